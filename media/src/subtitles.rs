//! Text subtitle tracks: read as cues during the probe's packet scan, written into the output
//! by the stitch (mov_text in MP4; ASS kept as ASS and the rest as SubRip in Matroska), timed
//! to the output.
//!
//! Why cues and not packets: the containers disagree on text formats (MP4 holds only
//! mov_text, Matroska no mov_text), so every track is decoded once to FFmpeg's common form (an
//! ASS event per cue, plus the track's ASS header) and encoded for the output's container.
//! Text is small: a feature film's track is a few hundred cues, carried in the stitch task.

use ffmpeg_next as ff;

use crate::{ffi, MediaError};
use tessera_model::encode::Container;
use tessera_model::subtitles::is_text;
use tessera_model::subtitles::Cue;
use tessera_model::subtitles::SubtitleTrack;

/// Collects the cues of every text subtitle stream while the probe scans the packets.
pub(crate) struct Collector {
    tracks: Vec<(SubtitleTrack, ff::decoder::Subtitle, ff::Rational)>,
}

impl Collector {
    /// Decoders for the input's text subtitle streams (a track that cannot be decoded is left
    /// out, and listed with the ignored streams).
    pub(crate) fn new(ictx: &ff::format::context::Input) -> Collector {
        let tracks = ictx
            .streams()
            .filter(|s| s.parameters().medium() == ff::media::Type::Subtitle)
            .filter(|s| is_text(s.parameters().id().name()))
            .filter_map(|s| {
                let mut ctx = ff::codec::Context::from_parameters(s.parameters())
                    .ok()?
                    .decoder();
                ctx.set_packet_time_base(s.time_base());
                let decoder = ctx.subtitle().ok()?;
                let track = SubtitleTrack {
                    source_index: s.index(),
                    codec: s.parameters().id().name().to_string(),
                    language: s.metadata().get("language").map(str::to_string),
                    header: ffi::subtitle_header(&decoder),
                    cues: Vec::new(),
                };
                Some((track, decoder, s.time_base()))
            })
            .collect();
        Collector { tracks }
    }

    /// Whether `index` is a collected stream.
    pub(crate) fn holds(&self, index: usize) -> bool {
        self.tracks.iter().any(|t| t.0.source_index == index)
    }

    /// Decodes one packet of a collected stream into cues (an undecodable packet loses its
    /// cue, not the job).
    pub(crate) fn take(&mut self, packet: &ff::Packet) {
        let Some((track, decoder, tb)) = self
            .tracks
            .iter_mut()
            .find(|t| t.0.source_index == packet.stream())
        else {
            return;
        };
        let mut sub = ff::Subtitle::new();
        if !matches!(decoder.decode(packet, &mut sub), Ok(true)) {
            return;
        }
        let Some(pts) = packet.pts().or(packet.dts()) else {
            return;
        };
        let at = f64::from(tb.numerator()) / f64::from(tb.denominator());
        let base = pts as f64 * at;
        let start = base + f64::from(sub.start()) / 1000.0;
        let end = if sub.end() > sub.start() {
            base + f64::from(sub.end()) / 1000.0
        } else {
            base + packet.duration().max(0) as f64 * at
        };
        for rect in sub.rects() {
            if let ff::codec::subtitle::Rect::Ass(a) = rect {
                track.cues.push(Cue {
                    start_seconds: start,
                    end_seconds: end.max(start),
                    ass: a.get().replace('\0', ""),
                });
            }
        }
    }

    /// The tracks with their cues.
    pub(crate) fn finish(self) -> Vec<SubtitleTrack> {
        self.tracks.into_iter().map(|t| t.0).collect()
    }
}

/// An output stream for `track` and its encoder (the encoder's parameters are the stream's).
pub(crate) struct Writer {
    encoder: ff::encoder::subtitle::Encoder,
    stream: usize,
    tb: ff::Rational,
    buf: Vec<u8>,
}

impl Writer {
    /// Adds the track's stream to `octx` (before its header is written).
    pub(crate) fn add(
        octx: &mut ff::format::context::Output,
        track: &SubtitleTrack,
        container: Container,
        what: &std::path::Path,
    ) -> Result<Writer, MediaError> {
        let name = output_codec(track, container);
        let codec = ff::encoder::find_by_name(name)
            .ok_or_else(|| MediaError::encode(name, "encoder not in this FFmpeg build"))?;
        let mut ctx = ff::codec::Context::new_with_codec(codec)
            .encoder()
            .subtitle()
            .map_err(|e| MediaError::encode(name, e))?;
        let tb = ff::Rational::new(1, 1000);
        ffi::set_subtitle_header(&mut ctx, &track.header);
        ctx.set_time_base(tb);
        let encoder = ctx
            .open_as(codec)
            .map_err(|e| MediaError::encode(name, format!("cannot open: {e}")))?;
        let mut ost = octx
            .add_stream(codec)
            .map_err(|e| MediaError::write(what, e))?;
        ost.set_parameters(&encoder);
        ost.set_time_base(tb);
        if let Some(lang) = &track.language {
            let mut md = ff::Dictionary::new();
            md.set("language", lang);
            ost.set_metadata(md);
        }
        Ok(Writer {
            encoder,
            stream: ost.index(),
            tb,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Encodes every cue, moved by `-zero` seconds (cues ending before zero are dropped, one
    /// straddling it starts at zero), and writes it interleaved.
    pub(crate) fn write_all(
        &mut self,
        octx: &mut ff::format::context::Output,
        track: &SubtitleTrack,
        zero: f64,
        what: &std::path::Path,
    ) -> Result<u64, MediaError> {
        let out_tb = octx
            .stream(self.stream)
            .map(|s| s.time_base())
            .unwrap_or(self.tb);
        let mut written = 0;
        for cue in &track.cues {
            let (start, end) = (cue.start_seconds - zero, cue.end_seconds - zero);
            if end <= 0.0 {
                continue;
            }
            let (start_ms, end_ms) = (
                (start.max(0.0) * 1000.0).round() as i64,
                (end * 1000.0).round() as i64,
            );
            let mut sub = ff::Subtitle::new();
            sub.set_pts(Some(start_ms * 1000));
            sub.set_start(0);
            sub.set_end(u32::try_from(end_ms - start_ms).unwrap_or(0));
            if let ff::codec::subtitle::RectMut::Ass(mut a) =
                sub.add_rect(ff::codec::subtitle::Type::Ass)
            {
                a.set(&cue.ass);
            }
            let n = ffi::encode_subtitle(&mut self.encoder, &sub, &mut self.buf)
                .map_err(|e| MediaError::encode("subtitles", e))?;
            if n == 0 {
                continue;
            }
            let mut packet = ff::Packet::copy(&self.buf[..n]);
            packet.set_stream(self.stream);
            packet.set_pts(Some(start_ms));
            packet.set_dts(Some(start_ms));
            packet.set_duration(end_ms - start_ms);
            packet.rescale_ts(self.tb, out_tb);
            packet
                .write_interleaved(octx)
                .map_err(|e| MediaError::write(what, format!("subtitle packet: {e}")))?;
            written += 1;
        }
        Ok(written)
    }
}

/// The encoder a track gets in `container`.
fn output_codec(track: &SubtitleTrack, container: Container) -> &'static str {
    match container {
        Container::Mp4 => "mov_text",
        Container::Mkv if matches!(track.codec.as_str(), "ass" | "ssa") => "ass",
        Container::Mkv => "subrip",
    }
}
