//! Audio: every kept track transcoded once for the whole input (or stream-copied when the
//! source is already AAC), into one intermediate NUT file.
//!
//! Why whole-file: per-segment audio drifts and clicks at boundaries (encoder priming and
//! frame-size rounding per segment); audio is cheap enough to do in one pass beside the video.

use std::path::Path;

use ff::Rescale as _;
use ffmpeg_next as ff;

use crate::demux::{open_audio_decoder, open_input, rational, read_packet, skip_samples};
use crate::{ffi, nut, MediaError};
use tessera_model::audio::AudioRequest;
use tessera_model::audio::AudioResult;
use tessera_model::audio::AudioTrackResult;

/// Sample rates the AAC encoder accepts; anything else is resampled to 48 kHz.
const AAC_RATES: [u32; 12] = [
    96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000,
];

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

struct Transcoder {
    decoder: ff::decoder::Audio,
    resampler: Option<ff::software::resampling::Context>,
    encoder: ff::encoder::Audio,
    layout: ff::ChannelLayout,
    rate: u32,
    frame_size: usize,
    /// Planar f32 samples waiting to fill an encoder frame.
    fifo: Vec<Vec<f32>>,
    /// Pts (in samples, biased) of the first sample in `fifo`.
    next_pts: Option<i64>,
    /// Where the container presents the track's first sample (input time base): the first
    /// packet not discarded, plus the samples its side data says to skip.
    first_presented: Option<i64>,
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
    let mut tracks = Vec::new();
    for &index in &req.tracks {
        let stream = ictx.stream(index).ok_or_else(|| {
            MediaError::InvalidRequest(format!("{}: no stream {index}", input.display()))
        })?;
        let language = stream.metadata().get("language").map(str::to_string);
        let params = stream.parameters();
        let copy = req.copy_tracks.contains(&index) && params.id() == ff::codec::Id::AAC;
        let in_tb = stream.time_base();
        let (mode, out_tb, codec_name, padding) = if copy {
            let known = ffi::muxer_has_tag(&octx, params.id());
            let mut ost = octx
                .add_stream(ff::encoder::find(ff::codec::Id::None))
                .map_err(|e| MediaError::write(&req.output, e))?;
            ost.set_parameters(params);
            ost.set_time_base(in_tb);
            ffi::adapt_codec_tag(&mut ost, known);
            (Mode::Copy, in_tb, "aac".to_string(), 0)
        } else {
            let t = open_transcoder(&stream, input, req)?;
            let tb = ff::Rational::new(1, t.rate as i32);
            let padding = ffi::encoder_initial_padding(&t.encoder);
            let mut ost = octx
                .add_stream(ff::encoder::find(ff::codec::Id::AAC))
                .map_err(|e| MediaError::write(&req.output, e))?;
            ost.set_parameters(&t.encoder);
            ost.set_time_base(tb);
            (Mode::Encode(Box::new(t)), tb, "aac".to_string(), padding)
        };
        tracks.push(Track {
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
        });
    }
    let muxer_tbs = nut::write_header(&mut octx, &req.output)?;
    for (i, t) in tracks.iter_mut().enumerate() {
        t.out_tb = muxer_tbs[i];
        t.bias = (req.bias_seconds * f64::from(t.out_tb.denominator())
            / f64::from(t.out_tb.numerator()))
        .round() as i64;
        t.result.bias = t.bias;
        t.result.time_base = rational(t.out_tb);
    }

    while let Some(mut packet) = read_packet(&mut ictx, input)? {
        let Some(pos) = tracks
            .iter()
            .position(|t| t.source_index == packet.stream())
        else {
            continue;
        };
        let t = &mut tracks[pos];
        match &mut t.mode {
            Mode::Copy => {
                if ffi::packet_is_discard(&packet) {
                    continue;
                }
                packet.rescale_ts(t.in_tb, t.out_tb);
                let shift = |v: Option<i64>| v.map(|x| x + t.bias);
                packet.set_pts(shift(packet.pts()));
                packet.set_dts(shift(packet.dts()));
                packet.set_stream(pos);
                packet.set_position(-1);
                nut::write(&mut octx, &packet, &req.output)?;
                t.result.packets += 1;
            }
            Mode::Encode(tr) => {
                if tr.first_presented.is_none() && !ffi::packet_is_discard(&packet) {
                    // Skip samples count at the decoder's rate (unknown: nothing to skip).
                    let skip = match tr.decoder.rate() {
                        0 => 0,
                        r => skip_samples(&packet).rescale(ff::Rational::new(1, r as i32), t.in_tb),
                    };
                    tr.first_presented = packet.pts().map(|p| p + skip);
                }
                // A corrupt audio packet costs a few ms of sound, not the job.
                if tr.decoder.send_packet(&packet).is_ok() {
                    pump(
                        tr,
                        pos,
                        t.bias,
                        t.in_tb,
                        &mut octx,
                        &req.output,
                        &mut t.result.packets,
                        false,
                    )?;
                }
            }
        }
    }
    for (pos, t) in tracks.iter_mut().enumerate() {
        if let Mode::Encode(tr) = &mut t.mode {
            let _ = tr.decoder.send_eof();
            pump(
                tr,
                pos,
                t.bias,
                t.in_tb,
                &mut octx,
                &req.output,
                &mut t.result.packets,
                true,
            )?;
        }
    }
    nut::finish(&mut octx, &req.output)?;
    Ok(AudioResult {
        tracks: tracks.into_iter().map(|t| t.result).collect(),
    })
}

fn open_transcoder(
    stream: &ff::format::stream::Stream,
    input: &Path,
    req: &AudioRequest,
) -> Result<Transcoder, MediaError> {
    let bitrate_per_channel = req.bitrate_per_channel;
    let decoder = open_audio_decoder(stream, input)?;
    let layout = output_layout(decoder.channels(), req.stereo_downmix);
    let rate = if AAC_RATES.contains(&decoder.rate()) {
        decoder.rate()
    } else {
        48000
    };
    let codec = ff::encoder::find(ff::codec::Id::AAC)
        .ok_or_else(|| MediaError::encode("aac", "encoder not in this FFmpeg build"))?;
    let mut enc = ff::codec::Context::new_with_codec(codec)
        .encoder()
        .audio()
        .map_err(|e| MediaError::encode("aac", e))?;
    enc.set_rate(rate as i32);
    enc.set_channel_layout(layout);
    enc.set_format(ff::format::Sample::F32(ff::format::sample::Type::Planar));
    enc.set_time_base(ff::Rational::new(1, rate as i32));
    enc.set_bit_rate((bitrate_per_channel * layout.channels().max(1) as u64) as usize);
    enc.set_flags(ff::codec::Flags::GLOBAL_HEADER);
    let encoder = enc
        .open_as(codec)
        .map_err(|e| MediaError::encode("aac", format!("cannot open: {e}")))?;
    let frame_size = (encoder.frame_size() as usize).max(1);
    Ok(Transcoder {
        decoder,
        resampler: None,
        encoder,
        layout,
        rate,
        frame_size,
        fifo: vec![Vec::new(); layout.channels().max(1) as usize],
        next_pts: None,
        first_presented: None,
    })
}

/// The AAC layout a track of `channels` channels is coded in: mono and 5.1 as they are (AAC
/// has one 5.1, which a 5.1(side) source maps to, as FFmpeg's encoder does), everything else,
/// or anything over two channels with `stereo_downmix`, as stereo.
fn output_layout(channels: u16, stereo_downmix: bool) -> ff::ChannelLayout {
    match channels.max(1) {
        1 => ff::ChannelLayout::MONO,
        6 if !stereo_downmix => ff::ChannelLayout::_5POINT1_BACK,
        _ => ff::ChannelLayout::STEREO,
    }
}

/// Moves decoded frames through the resampler into full encoder frames, and encoded packets to
/// the muxer. With `flush`, drains everything (end of input).
#[allow(clippy::too_many_arguments)]
fn pump(
    t: &mut Transcoder,
    stream_index: usize,
    bias: i64,
    in_tb: ff::Rational,
    octx: &mut ff::format::context::Output,
    out_path: &Path,
    packets: &mut u64,
    flush: bool,
) -> Result<(), MediaError> {
    let mut decoded = ff::frame::Audio::empty();
    while t.decoder.receive_frame(&mut decoded).is_ok() {
        if t.next_pts.is_none() {
            // The first sound is where the container presents it. A decoder with a delay
            // (WMA, Vorbis: the first packets only prime it) stamps its first frame a packet
            // or two later; laying the samples from there would move the track away from
            // the video by that delay.
            let decoded_ts = decoded.timestamp();
            let ts = match (t.first_presented, decoded_ts) {
                (Some(p), Some(d)) => p.min(d),
                (p, d) => d.or(p).unwrap_or(0),
            };
            let samples = ts.rescale(in_tb, ff::Rational::new(1, t.rate as i32));
            t.next_pts = Some(samples + bias);
        }
        // A decoder may leave the layout unset (PCM in AVI/MXF, mono guessed): name the
        // default one on the frame itself, since the resampler compares every frame with
        // what it was built for and refuses a difference ("Input changed").
        if decoded.channel_layout().is_empty() {
            decoded.set_channel_layout(ff::ChannelLayout::default(i32::from(decoded.channels())));
        }
        let same_input = t.resampler.as_ref().is_some_and(|r| {
            let input = r.input();
            input.format == decoded.format()
                && input.channel_layout == decoded.channel_layout()
                && input.rate == decoded.rate()
        });
        if !same_input {
            // First frame, or the stream changed format mid-way: keep what the old resampler
            // still holds, then build one for what comes now.
            if let Some(old) = t.resampler.as_mut() {
                let mut rest = ff::frame::Audio::empty();
                if old.flush(&mut rest).is_ok() && rest.samples() > 0 {
                    push_samples(&mut t.fifo, &rest);
                }
            }
            let r = ff::software::resampling::Context::get(
                decoded.format(),
                decoded.channel_layout(),
                decoded.rate(),
                ff::format::Sample::F32(ff::format::sample::Type::Planar),
                t.layout,
                t.rate,
            )
            .map_err(|e| MediaError::encode("swresample", e))?;
            t.resampler = Some(r);
        }
        let Some(resampler) = t.resampler.as_mut() else {
            continue;
        };
        let mut out = ff::frame::Audio::empty();
        resampler
            .run(&decoded, &mut out)
            .map_err(|e| MediaError::encode("swresample", e))?;
        push_samples(&mut t.fifo, &out);
        emit_frames(t, stream_index, octx, out_path, packets, false)?;
    }
    if flush {
        if let Some(r) = &mut t.resampler {
            let mut out = ff::frame::Audio::empty();
            if r.flush(&mut out).is_ok() && out.samples() > 0 {
                push_samples(&mut t.fifo, &out);
            }
        }
        emit_frames(t, stream_index, octx, out_path, packets, true)?;
        t.encoder
            .send_eof()
            .map_err(|e| MediaError::encode("aac", e))?;
        write_packets(t, stream_index, octx, out_path, packets)?;
    }
    Ok(())
}

fn push_samples(fifo: &mut [Vec<f32>], frame: &ff::frame::Audio) {
    let n = frame.samples();
    for (ch, buf) in fifo.iter_mut().enumerate() {
        if ch < frame.planes() {
            buf.extend_from_slice(&frame.plane::<f32>(ch)[..n]);
        }
    }
}

fn emit_frames(
    t: &mut Transcoder,
    stream_index: usize,
    octx: &mut ff::format::context::Output,
    out_path: &Path,
    packets: &mut u64,
    last: bool,
) -> Result<(), MediaError> {
    loop {
        let available = t.fifo[0].len();
        if available == 0 || (available < t.frame_size && !last) {
            return Ok(());
        }
        let n = available.min(t.frame_size);
        let mut frame = ff::frame::Audio::new(
            ff::format::Sample::F32(ff::format::sample::Type::Planar),
            n,
            t.layout,
        );
        frame.set_rate(t.rate);
        for (ch, buf) in t.fifo.iter_mut().enumerate() {
            frame.plane_mut::<f32>(ch)[..n].copy_from_slice(&buf[..n]);
            buf.drain(..n);
        }
        let pts = t.next_pts.unwrap_or(0);
        frame.set_pts(Some(pts));
        t.next_pts = Some(pts + n as i64);
        t.encoder
            .send_frame(&frame)
            .map_err(|e| MediaError::encode("aac", e))?;
        write_packets(t, stream_index, octx, out_path, packets)?;
    }
}

fn write_packets(
    t: &mut Transcoder,
    stream_index: usize,
    octx: &mut ff::format::context::Output,
    out_path: &Path,
    packets: &mut u64,
) -> Result<(), MediaError> {
    let mut packet = ff::Packet::empty();
    let enc_tb = t.encoder.time_base();
    let out_tb = octx
        .stream(stream_index)
        .map(|s| s.time_base())
        .unwrap_or(enc_tb);
    while t.encoder.receive_packet(&mut packet).is_ok() {
        packet.set_stream(stream_index);
        packet.rescale_ts(enc_tb, out_tb);
        nut::write(octx, &packet, out_path)?;
        *packets += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surround_stays_surround_unless_mixed_down() {
        assert_eq!(output_layout(1, false), ff::ChannelLayout::MONO);
        assert_eq!(output_layout(2, false), ff::ChannelLayout::STEREO);
        assert_eq!(output_layout(6, false), ff::ChannelLayout::_5POINT1_BACK);
        assert_eq!(output_layout(6, true), ff::ChannelLayout::STEREO);
        // Mono is never "mixed down" to two channels.
        assert_eq!(output_layout(1, true), ff::ChannelLayout::MONO);
        // Layouts AAC has no configuration for here go to stereo either way.
        assert_eq!(output_layout(4, false), ff::ChannelLayout::STEREO);
        assert_eq!(output_layout(0, false), ff::ChannelLayout::MONO);
    }
}
