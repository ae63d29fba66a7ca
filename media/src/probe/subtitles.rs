//! Text subtitle tracks read as cues during the probe's packet scan (the stitch writes them:
//! stitch/subtitles.rs).
//!
//! Why cues and not packets: the containers disagree on text formats (MP4 holds only
//! mov_text, Matroska no mov_text), so every track is decoded once to FFmpeg's common form (an
//! ASS event per cue, plus the track's ASS header) and encoded for the output's container.
//! Text is small: a feature film's track is a few hundred cues, carried in the stitch task.

use ffmpeg_next as ff;

use crate::ffi;
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
