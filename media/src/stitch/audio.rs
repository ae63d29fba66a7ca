//! The stitch's audio: the tracks of the audio intermediate added as output streams, and their
//! packets fed between the video's, in time order.
//!
//! Why apart from the video join: the audio is one file read once from start to end, while the
//! video comes in segments; the join asks this feed for whatever audio precedes each video
//! packet.

use std::path::{Path, PathBuf};

use ffmpeg_next as ff;

use crate::demux::{open_input, read_packet};
use crate::{ffi, MediaError};
use tessera_model::stitch::StitchRequest;

struct Source {
    ictx: ff::format::context::Input,
    path: PathBuf,
}

/// The audio intermediate being read into the output (output streams 1 and on, track i as
/// stream i + 1), one packet ahead.
pub(crate) struct AudioFeed<'r> {
    req: &'r StitchRequest,
    src: Option<Source>,
    /// Each track's time base in the intermediate.
    in_tbs: Vec<ff::Rational>,
    /// The next packet, read but not yet written.
    pending: Option<ff::Packet>,
    /// No packet is left to interleave.
    done: bool,
}

impl<'r> AudioFeed<'r> {
    /// Opens the audio intermediate when the request has audio tracks, and adds a stream per
    /// track to `octx` (written to `tmp`), before its header: copied parameters, priming
    /// samples, language.
    pub(crate) fn open(
        req: &'r StitchRequest,
        octx: &mut ff::format::context::Output,
        tmp: &Path,
    ) -> Result<Self, MediaError> {
        let src = match &req.audio {
            Some(path) if !req.audio_tracks.is_empty() => Some(Source {
                ictx: open_input(path)?,
                path: path.clone(),
            }),
            _ => None,
        };
        let mut in_tbs = Vec::new();
        if let Some(src) = &src {
            for (i, track) in req.audio_tracks.iter().enumerate() {
                let s = src.ictx.stream(i).ok_or_else(|| {
                    MediaError::invalid(&src.path, format!("no audio stream {i}"))
                })?;
                let known = ffi::muxer_has_tag(octx, s.parameters().id());
                let mut ost = octx
                    .add_stream(ff::encoder::find(ff::codec::Id::None))
                    .map_err(|e| MediaError::write(tmp, e))?;
                ost.set_parameters(s.parameters());
                ost.set_time_base(s.time_base());
                ffi::adapt_codec_tag(&mut ost, known);
                ffi::set_initial_padding(&mut ost, track.initial_padding);
                if let Some(lang) = &track.language {
                    let mut md = ff::Dictionary::new();
                    md.set("language", lang);
                    ost.set_metadata(md);
                }
                in_tbs.push(s.time_base());
            }
        }
        let done = src.is_none();
        Ok(AudioFeed {
            req,
            src,
            in_tbs,
            pending: None,
            done,
        })
    }

    /// Writes the audio packets that come before a video packet at `v_seconds` (interleaving);
    /// `out_tbs` are the output streams' time bases. Gives how many were written.
    pub(crate) fn write_until(
        &mut self,
        octx: &mut ff::format::context::Output,
        v_seconds: f64,
        out_tbs: &[ff::Rational],
        tmp: &Path,
    ) -> Result<u64, MediaError> {
        let mut written = 0;
        while !self.done {
            if self.pending.is_none() {
                self.pending = self.next()?;
                if self.pending.is_none() {
                    self.done = true;
                    break;
                }
            }
            let a = self.pending.as_ref().map(|p| self.seconds(p));
            if a.is_some_and(|a| a <= v_seconds) {
                if let Some(p) = self.pending.take() {
                    self.write(octx, p, out_tbs, tmp)?;
                    written += 1;
                }
            } else {
                break;
            }
        }
        Ok(written)
    }

    /// Writes every audio packet left, after the last video packet. Gives how many.
    pub(crate) fn write_rest(
        &mut self,
        octx: &mut ff::format::context::Output,
        out_tbs: &[ff::Rational],
        tmp: &Path,
    ) -> Result<u64, MediaError> {
        let mut written = 0;
        if let Some(p) = self.pending.take() {
            self.write(octx, p, out_tbs, tmp)?;
            written += 1;
        }
        while let Some(p) = self.next()? {
            self.write(octx, p, out_tbs, tmp)?;
            written += 1;
        }
        Ok(written)
    }

    /// Reads the next audio packet with bias and start removed (in its input time base),
    /// tagged with its output stream index.
    fn next(&mut self) -> Result<Option<ff::Packet>, MediaError> {
        let req = self.req;
        let Some(src) = self.src.as_mut() else {
            return Ok(None);
        };
        while let Some(mut p) = read_packet(&mut src.ictx, &src.path)? {
            let i = p.stream();
            let Some(track) = req.audio_tracks.get(i) else {
                continue;
            };
            let tb = self.in_tbs[i];
            let start = (req.start_seconds * f64::from(tb.denominator())
                / f64::from(tb.numerator()))
            .round() as i64;
            let shift = |v: Option<i64>| v.map(|x| x - track.bias - start);
            p.set_pts(shift(p.pts()));
            p.set_dts(shift(p.dts()));
            p.set_stream(i + 1);
            p.set_position(-1);
            return Ok(Some(p));
        }
        Ok(None)
    }

    /// Where a packet read by `next` lies, in seconds.
    fn seconds(&self, p: &ff::Packet) -> f64 {
        let tb = self.in_tbs[p.stream() - 1];
        p.dts().or(p.pts()).unwrap_or(0) as f64 * f64::from(tb.numerator())
            / f64::from(tb.denominator())
    }

    fn write(
        &self,
        octx: &mut ff::format::context::Output,
        mut p: ff::Packet,
        out_tbs: &[ff::Rational],
        tmp: &Path,
    ) -> Result<(), MediaError> {
        let i = p.stream();
        p.rescale_ts(self.in_tbs[i - 1], out_tbs[i]);
        p.write_interleaved(octx)
            .map_err(|e| MediaError::write(tmp, format!("audio packet: {e}")))
    }
}
