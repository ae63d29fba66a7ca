//! Text subtitle tracks written into the output by the stitch (mov_text in MP4; ASS kept as
//! ASS and the rest as SubRip in Matroska), timed to the output; the probe read them as cues
//! (probe/subtitles.rs).
//!
//! Why cues and not packets: the containers disagree on text formats (MP4 holds only
//! mov_text, Matroska no mov_text), so every track is decoded once to FFmpeg's common form (an
//! ASS event per cue, plus the track's ASS header) and encoded for the output's container.
//! Text is small: a feature film's track is a few hundred cues, carried in the stitch task.

use ffmpeg_next as ff;

use crate::{ffi, MediaError};
use tessera_model::encode::Container;
use tessera_model::subtitles::SubtitleTrack;

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
