//! The QC gate of a stitched output: decode the file end to end before it is published and
//! check it against the plan.
//!
//! Why decode rather than trust the muxer: the muxer writes whatever packets it is given; a
//! segment that lost frames, timestamps that went backwards, or an audio track that came out
//! empty are only visible to a reader. A file that fails here is never delivered: the job
//! fails with `qc_failed` and the reason.

use std::path::Path;

use ffmpeg_next as ff;
use serde::{Deserialize, Serialize};

use crate::demux::{open_audio_decoder, open_input, open_video_decoder_with, read_packet};
use crate::types::Rational;
use crate::{ffi, MediaError};

/// What a stitched output must hold, from the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputExpectation {
    /// How errors name the output ("output 0 (s3://bucket/key)").
    pub label: String,
    /// Video frames.
    pub frames: u64,
    /// Pts of the first and last shown frame on the output's timeline (the source video time
    /// base, the source's start moved to zero).
    pub first_pts: i64,
    /// See `first_pts`.
    pub last_pts: i64,
    /// The time base of `first_pts` and `last_pts`.
    pub time_base: Rational,
    /// How far a timestamp may stray: one frame of the source.
    pub tolerance_seconds: f64,
    /// Audio tracks the output must carry.
    pub audio_tracks: usize,
}

/// What the gate found in a good output.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputCheck {
    /// Video frames decoded.
    pub frames: u64,
    /// Seconds of the first and last decoded video frame.
    pub video_start_seconds: f64,
    /// See `video_start_seconds`.
    pub video_end_seconds: f64,
    /// Per audio track: seconds of its first sample and seconds of sound decoded.
    pub audio: Vec<(f64, f64)>,
}

struct AudioTrack {
    index: usize,
    decoder: ff::decoder::Audio,
    tb: ff::Rational,
    start: Option<f64>,
    samples: u64,
    rate: u32,
}

/// Decodes `path` end to end and checks it against `expect`; the error says what is wrong.
pub fn verify_output(
    path: &Path,
    expect: &OutputExpectation,
    threads: usize,
) -> Result<OutputCheck, MediaError> {
    let fail = |reason: String| MediaError::QcFailed {
        what: expect.label.clone(),
        reason,
    };
    let mut ictx = open_input(path)?;
    let video = ictx
        .streams()
        .best(ff::media::Type::Video)
        .ok_or_else(|| fail("no video stream".into()))?;
    let (v_index, v_tb) = (video.index(), video.time_base());
    let mut decoder = open_video_decoder_with(&video, path, threads, ffi::decode_fast)?;
    let mut audio = Vec::new();
    for s in ictx.streams() {
        if s.parameters().medium() == ff::media::Type::Audio {
            let decoder = open_audio_decoder(&s, path)?;
            let rate = decoder.rate().max(1);
            audio.push(AudioTrack {
                index: s.index(),
                decoder,
                tb: s.time_base(),
                start: None,
                samples: 0,
                rate,
            });
        }
    }
    if audio.len() != expect.audio_tracks {
        return Err(fail(format!(
            "{} audio tracks, {} asked for",
            audio.len(),
            expect.audio_tracks
        )));
    }

    let mut shown = Shown::default();
    let mut frame = ff::frame::Video::empty();
    let mut samples = ff::frame::Audio::empty();
    while let Some(packet) = read_packet(&mut ictx, path)? {
        if packet.stream() == v_index {
            decoder
                .send_packet(&packet)
                .map_err(|e| fail(format!("video packet {} undecodable: {e}", shown.frames)))?;
            while decoder.receive_frame(&mut frame).is_ok() {
                shown.take(&frame, v_tb).map_err(fail)?;
            }
        } else if let Some(t) = audio.iter_mut().find(|t| t.index == packet.stream()) {
            t.decoder
                .send_packet(&packet)
                .map_err(|e| fail(format!("audio stream {} undecodable: {e}", t.index)))?;
            t.drain(&mut samples);
        }
    }
    let _ = decoder.send_eof();
    while decoder.receive_frame(&mut frame).is_ok() {
        shown.take(&frame, v_tb).map_err(fail)?;
    }
    for t in &mut audio {
        let _ = t.decoder.send_eof();
        t.drain(&mut samples);
    }

    let check = OutputCheck {
        frames: shown.frames,
        video_start_seconds: shown.first.unwrap_or(0.0),
        video_end_seconds: shown.last.unwrap_or(0.0),
        audio: audio
            .iter()
            .map(|t| {
                let seconds = t.samples as f64 / f64::from(t.rate);
                (t.start.unwrap_or(0.0), seconds)
            })
            .collect(),
    };
    judge(&check, expect).map_err(fail)?;
    Ok(check)
}

#[derive(Default)]
struct Shown {
    frames: u64,
    first: Option<f64>,
    last: Option<f64>,
}

impl Shown {
    fn take(&mut self, frame: &ff::frame::Video, tb: ff::Rational) -> Result<(), String> {
        if ffi::frame_is_damaged(frame) {
            return Err(format!("video frame {} decodes damaged", self.frames));
        }
        let Some(ts) = frame.timestamp() else {
            return Err(format!("video frame {} has no timestamp", self.frames));
        };
        let t = ts as f64 * f64::from(tb.numerator()) / f64::from(tb.denominator());
        if let Some(prev) = self.last.filter(|&p| t <= p) {
            return Err(format!(
                "video timestamps go backwards at frame {}: {t:.6} s after {prev:.6} s",
                self.frames
            ));
        }
        self.first.get_or_insert(t);
        self.last = Some(t);
        self.frames += 1;
        Ok(())
    }
}

impl AudioTrack {
    fn drain(&mut self, samples: &mut ff::frame::Audio) {
        while self.decoder.receive_frame(samples).is_ok() {
            if self.start.is_none() {
                self.start = samples.timestamp().map(|ts| {
                    ts as f64 * f64::from(self.tb.numerator()) / f64::from(self.tb.denominator())
                });
            }
            self.samples += samples.samples() as u64;
        }
    }
}

/// The checks on what was decoded (pure, so every rule has a unit test).
fn judge(found: &OutputCheck, expect: &OutputExpectation) -> Result<(), String> {
    if found.frames != expect.frames {
        return Err(format!(
            "{} video frames decoded, {} planned",
            found.frames, expect.frames
        ));
    }
    let tol = expect.tolerance_seconds.max(0.002);
    let first = expect.time_base.seconds(expect.first_pts);
    let last = expect.time_base.seconds(expect.last_pts);
    if (found.video_start_seconds - first).abs() > tol {
        return Err(format!(
            "video starts at {:.3} s, the plan says {first:.3} s",
            found.video_start_seconds
        ));
    }
    if (found.video_end_seconds - last).abs() > tol {
        return Err(format!(
            "last video frame at {:.3} s, the plan says {last:.3} s",
            found.video_end_seconds
        ));
    }
    for (i, &(start, seconds)) in found.audio.iter().enumerate() {
        if seconds <= 0.0 {
            return Err(format!("audio track {i} holds no sound"));
        }
        // Zero is the source's earliest sample or frame: nothing may start before it.
        if start < -tol {
            return Err(format!(
                "audio track {i} starts at {start:.3} s, before zero"
            ));
        }
        if start > found.video_end_seconds + tol {
            return Err(format!(
                "audio track {i} starts at {start:.3} s, after the video ends"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect() -> OutputExpectation {
        OutputExpectation {
            label: "output 0 (out.mp4)".into(),
            frames: 100,
            first_pts: 0,
            last_pts: 99,
            time_base: Rational { num: 1, den: 25 },
            tolerance_seconds: 0.04,
            audio_tracks: 1,
        }
    }

    fn found() -> OutputCheck {
        OutputCheck {
            frames: 100,
            video_start_seconds: 0.0,
            video_end_seconds: 3.96,
            audio: vec![(0.0, 4.0)],
        }
    }

    #[test]
    fn an_output_as_planned_passes() {
        assert_eq!(judge(&found(), &expect()), Ok(()));
        // Within a frame is within tolerance.
        let mut f = found();
        f.video_end_seconds = 3.99;
        f.audio[0].0 = 0.021;
        assert_eq!(judge(&f, &expect()), Ok(()));
    }

    #[test]
    fn each_rule_fails_on_its_own() {
        type Change = Box<dyn Fn(&mut OutputCheck)>;
        let cases: Vec<(&str, Change)> = vec![
            ("frames decoded", Box::new(|f| f.frames = 88)),
            ("video starts", Box::new(|f| f.video_start_seconds = 0.48)),
            ("last video frame", Box::new(|f| f.video_end_seconds = 3.5)),
            ("no sound", Box::new(|f| f.audio[0].1 = 0.0)),
            ("before zero", Box::new(|f| f.audio[0].0 = -0.5)),
            ("after the video ends", Box::new(|f| f.audio[0].0 = 9.0)),
        ];
        for (what, change) in cases {
            let mut f = found();
            change(&mut f);
            let err = judge(&f, &expect()).unwrap_err();
            assert!(err.contains(what), "{what}: {err}");
        }
    }
}
