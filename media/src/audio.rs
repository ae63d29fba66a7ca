//! Audio: every kept track transcoded once for the whole input (or stream-copied when the
//! source is already AAC), into one intermediate NUT file.
//!
//! Why whole-file: per-segment audio drifts and clicks at boundaries (encoder priming and
//! frame-size rounding per segment); audio is cheap enough to do in one pass beside the video.
//!
//! This file picks the tracks and routes each packet (copied, or to its track's transcoder);
//! a transcoded track's decode-resample-encode chain is transcoder.rs, the AAC layout it is
//! coded in layout.rs, and where each of its decoded frames goes on the output's timeline
//! (overlaps trimmed, gaps filled) timeline.rs.

mod layout;
pub(crate) mod timeline;
mod transcoder;

use std::path::Path;

use ffmpeg_next as ff;

use crate::demux::{open_input, rational, read_packet};
use crate::{ffi, nut, MediaError};
use tessera_model::audio::AudioRequest;
use tessera_model::audio::AudioResult;
use tessera_model::audio::AudioTrackResult;
use transcoder::{Sink, Transcoder};

enum Mode {
    Copy,
    Encode(Box<Transcoder>),
}

struct Track {
    source_index: usize,
    in_tb: ff::Rational,
    out_tb: ff::Rational,
    bias: i64,
    mode: Mode,
    result: AudioTrackResult,
}

/// Transcodes (or copies) the requested tracks of `req.input` into `req.output`. Errors name
/// the input and the audio stage, never the intermediate file.
pub fn transcode_audio(req: &AudioRequest) -> Result<AudioResult, MediaError> {
    audio_tracks(req).map_err(|e| e.for_input(&req.input, "audio"))
}

fn audio_tracks(req: &AudioRequest) -> Result<AudioResult, MediaError> {
    crate::init();
    let input = req.input.as_path();
    let mut ictx = open_input(input)?;
    let mut octx = nut::create(&req.output)?;
    let mut tracks = req
        .tracks
        .iter()
        .map(|&index| add_track(&ictx, &mut octx, index, req))
        .collect::<Result<Vec<_>, _>>()?;
    let muxer_tbs = nut::write_header(&mut octx, &req.output)?;
    for (i, t) in tracks.iter_mut().enumerate() {
        t.out_tb = muxer_tbs[i];
        t.bias = (req.bias_seconds * f64::from(t.out_tb.denominator())
            / f64::from(t.out_tb.numerator()))
        .round() as i64;
        t.result.bias = t.bias;
        t.result.time_base = rational(t.out_tb);
        if let Mode::Encode(tr) = &mut t.mode {
            tr.bias = t.bias;
        }
    }

    while let Some(packet) = read_packet(&mut ictx, input)? {
        let Some(pos) = tracks
            .iter()
            .position(|t| t.source_index == packet.stream())
        else {
            continue;
        };
        tracks[pos].take(packet, pos, &mut octx, &req.output)?;
    }
    for (pos, t) in tracks.iter_mut().enumerate() {
        if let Mode::Encode(tr) = &mut t.mode {
            tr.finish(&mut Sink {
                octx: &mut octx,
                path: &req.output,
                stream: pos,
                packets: &mut t.result.packets,
            })?;
        }
    }
    nut::finish(&mut octx, &req.output)?;
    Ok(AudioResult {
        tracks: tracks.into_iter().map(|t| t.result).collect(),
    })
}

/// Adds the output stream of source track `index` to `octx` (header not yet written): a copy
/// when the request asks for one and the source is AAC, else an AAC transcode.
fn add_track(
    ictx: &ff::format::context::Input,
    octx: &mut ff::format::context::Output,
    index: usize,
    req: &AudioRequest,
) -> Result<Track, MediaError> {
    let input = req.input.as_path();
    let stream = ictx.stream(index).ok_or_else(|| {
        MediaError::InvalidRequest(format!("{}: no stream {index}", input.display()))
    })?;
    let language = stream.metadata().get("language").map(str::to_string);
    let params = stream.parameters();
    let copy = req.copy_tracks.contains(&index) && params.id() == ff::codec::Id::AAC;
    let in_tb = stream.time_base();
    let (mode, out_tb, codec_name, padding) = if copy {
        let known = ffi::muxer_has_tag(octx, params.id());
        let mut ost = octx
            .add_stream(ff::encoder::find(ff::codec::Id::None))
            .map_err(|e| MediaError::write(&req.output, e))?;
        ost.set_parameters(params);
        ost.set_time_base(in_tb);
        ffi::adapt_codec_tag(&mut ost, known);
        (Mode::Copy, in_tb, "aac".to_string(), 0)
    } else {
        let t = Transcoder::open(&stream, input, req)?;
        let tb = ff::Rational::new(1, t.rate as i32);
        let padding = ffi::encoder_initial_padding(&t.encoder);
        let mut ost = octx
            .add_stream(ff::encoder::find(ff::codec::Id::AAC))
            .map_err(|e| MediaError::write(&req.output, e))?;
        ost.set_parameters(&t.encoder);
        ost.set_time_base(tb);
        (Mode::Encode(Box::new(t)), tb, "aac".to_string(), padding)
    };
    Ok(Track {
        source_index: index,
        in_tb,
        out_tb,
        bias: 0,
        mode,
        result: AudioTrackResult {
            source_index: index,
            codec: codec_name,
            copied: copy,
            language,
            initial_padding: padding,
            bias: 0,
            time_base: rational(out_tb),
            packets: 0,
        },
    })
}

impl Track {
    /// Writes one packet of this track, output stream `pos` of `octx`: copied with the bias
    /// added (a packet the demuxer marks discard is dropped), or through its transcoder.
    fn take(
        &mut self,
        mut packet: ff::Packet,
        pos: usize,
        octx: &mut ff::format::context::Output,
        path: &Path,
    ) -> Result<(), MediaError> {
        match &mut self.mode {
            Mode::Copy => {
                if ffi::packet_is_discard(&packet) {
                    return Ok(());
                }
                packet.rescale_ts(self.in_tb, self.out_tb);
                let shift = |v: Option<i64>| v.map(|x| x + self.bias);
                packet.set_pts(shift(packet.pts()));
                packet.set_dts(shift(packet.dts()));
                packet.set_stream(pos);
                packet.set_position(-1);
                nut::write(octx, &packet, path)?;
                self.result.packets += 1;
            }
            Mode::Encode(tr) => tr.feed(
                &packet,
                &mut Sink {
                    octx,
                    path,
                    stream: pos,
                    packets: &mut self.result.packets,
                },
            )?,
        }
        Ok(())
    }
}
