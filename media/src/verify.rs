//! The QC gate of a stitched output: decode the file end to end before it is published and
//! check it against the plan.
//!
//! Why decode rather than trust the muxer: the muxer writes whatever packets it is given; a
//! segment that lost frames, timestamps that went backwards, or an audio track that came out
//! empty are only visible to a reader. A file that fails here is never delivered: the job
//! fails with `qc_failed` and the reason.
//!
//! Beside it: the video decode in parts (parts.rs), and the PSNR/SSIM/VMAF report of an
//! output against its source (quality.rs, frames.rs, vmaf.rs).

pub(crate) mod frames;
mod parts;
pub(crate) mod quality;
pub(crate) mod vmaf;

use std::path::Path;

use ffmpeg_next as ff;

use crate::demux::{open_audio_decoder, open_own_file_with_dts, read_packet};
use crate::{ffi, MediaError};
use parts::{borders, decode_video, seconds};
use tessera_model::stitch::OutputCheck;
use tessera_model::stitch::OutputExpectation;

struct AudioTrack {
    index: usize,
    decoder: ff::decoder::Audio,
    tb: ff::Rational,
    start: Option<f64>,
    samples: u64,
    rate: u32,
}

/// Fewest frames worth a part of their own in the parallel video decode.
const MIN_FRAMES_PER_PART: u64 = 48;

/// Decodes `path` end to end and checks it against `expect`; the error says what is wrong.
/// The video is decoded in up to `threads` parts side by side (see parts.rs),
/// beside the audio.
pub fn verify_output(
    path: &Path,
    expect: &OutputExpectation,
    threads: usize,
) -> Result<OutputCheck, MediaError> {
    let started = std::time::Instant::now();
    let fail = |reason: String| MediaError::QcFailed {
        what: expect.label.clone(),
        reason,
    };
    let mut ictx = open_own_file_with_dts(path)?;
    let video = ictx
        .streams()
        .best(ff::media::Type::Video)
        .ok_or_else(|| fail("no video stream".into()))?;
    let (v_index, v_tb) = (video.index(), video.time_base());
    let mut keyframes = ffi::keyframe_times(&video);
    if keyframes.is_empty() {
        // Matroska reads its cues on the first seek.
        if ictx.seek(0, ..0).is_ok() {
            if let Some(v) = ictx.stream(v_index) {
                keyframes = ffi::keyframe_times(&v);
            }
        }
    }
    let keyframes: Vec<f64> = keyframes.iter().map(|&t| seconds(t, v_tb)).collect();
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

    let parts = (expect.frames / MIN_FRAMES_PER_PART).clamp(1, threads.max(1) as u64) as usize;
    let (start, end) = (
        expect.time_base.seconds(expect.first_pts),
        expect.time_base.seconds(expect.last_pts),
    );
    let split = borders(&keyframes, start, end, parts);
    let (shown, audio_read) = std::thread::scope(|scope| {
        let video = scope.spawn(|| decode_video(path, v_index, &split, threads));
        let audio_read = read_audio(&mut ictx, path, v_index, &mut audio);
        let shown = video
            .join()
            .unwrap_or_else(|_| Err("the video decoder crashed".into()));
        (shown, audio_read)
    });
    audio_read.map_err(|e| match e {
        AudioFailure::Read(e) => e,
        AudioFailure::Decode(reason) => fail(reason),
    })?;
    // A first look in parts that disagrees with the plan gets a second, in one part, so a
    // file our encoder cut unusually (a keyframe that is not an entry point) is judged on one
    // decode from its start.
    let (shown, video_parts) = match shown {
        Ok(s) if s.frames == expect.frames => (Ok(s), split.len()),
        _ if split.len() > 1 => (decode_video(path, v_index, &split[..1], threads), 1),
        other => (other, 1),
    };
    let shown = shown.map_err(fail)?;

    let check = OutputCheck {
        frames: shown.frames,
        decoded_frames: shown.decoded,
        video_start_seconds: shown.first.unwrap_or(0.0),
        video_end_seconds: shown.last.unwrap_or(0.0),
        audio: audio
            .iter()
            .map(|t| {
                let seconds = t.samples as f64 / f64::from(t.rate);
                (t.start.unwrap_or(0.0), seconds)
            })
            .collect(),
        video_parts: video_parts as u32,
        seconds: started.elapsed().as_secs_f64(),
    };
    judge(&check, expect).map_err(fail)?;
    Ok(check)
}

enum AudioFailure {
    Read(MediaError),
    Decode(String),
}

/// Reads the file once for its audio tracks (video packets are decoded elsewhere).
fn read_audio(
    ictx: &mut ff::format::context::Input,
    path: &Path,
    v_index: usize,
    audio: &mut [AudioTrack],
) -> Result<(), AudioFailure> {
    let mut samples = ff::frame::Audio::empty();
    while let Some(packet) = read_packet(ictx, path).map_err(AudioFailure::Read)? {
        if packet.stream() == v_index {
            continue;
        }
        if let Some(t) = audio.iter_mut().find(|t| t.index == packet.stream()) {
            t.decoder.send_packet(&packet).map_err(|e| {
                AudioFailure::Decode(format!("audio stream {} undecodable: {e}", t.index))
            })?;
            t.drain(&mut samples);
        }
    }
    for t in audio.iter_mut() {
        let _ = t.decoder.send_eof();
        t.drain(&mut samples);
    }
    Ok(())
}

impl AudioTrack {
    fn drain(&mut self, samples: &mut ff::frame::Audio) {
        while self.decoder.receive_frame(samples).is_ok() {
            if self.start.is_none() {
                self.start = samples.timestamp().map(|ts| seconds(ts, self.tb));
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
    use tessera_model::probe::Rational;

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
            decoded_frames: 60,
            video_start_seconds: 0.0,
            video_end_seconds: 3.96,
            audio: vec![(0.0, 4.0)],
            video_parts: 1,
            seconds: 0.5,
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
