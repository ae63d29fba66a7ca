//! What a file plays as, and whether an output plays as its source: the ffprobe/ffmpeg oracle's
//! [`Summary`] of a file (frames in playing order, audio tracks, metadata) and
//! [`compare_media`], the invariants of an output against its source that need no report:
//! every source frame once, in order, with its timestamp; A/V offset and audio duration kept;
//! size, rotation and colour kept; quality good.

use crate::probe::{
    first_presented, format_start, frame_count, probe_stream_frames, psnr, stream_info, Frame,
    StreamInfo,
};
use std::path::{Path, PathBuf};

/// Audio tracks' durations may differ from the source's by this much (s).
pub const AUDIO_DURATION_TOLERANCE_S: f64 = 0.1;
/// Minimum acceptable PSNR of output against source (dB).
pub const MIN_PSNR_DB: f64 = 30.0;

/// One audio track as the oracle sees it.
#[derive(Debug, Clone)]
pub struct AudioTrack {
    /// Stream metadata (codec, language, ...).
    pub info: StreamInfo,
    /// Decoded frames.
    pub frames: Vec<Frame>,
    /// When the container presents the first sample ([`first_presented`]), if known.
    pub presented: Option<f64>,
}

impl AudioTrack {
    /// When the first sample is presented (s): the container's word ([`first_presented`]) or
    /// the first decoded frame, whichever is earlier (a decoder's delay does not move the
    /// track; priming a container trims is not presented).
    pub fn first_ts(&self) -> f64 {
        let decoded = self.frames.first().map_or(f64::NAN, |f| f.ts);
        match self.presented {
            Some(p) if p < decoded => p,
            _ => decoded,
        }
    }

    /// Decoded duration: end of the last frame minus start of the first.
    pub fn duration(&self) -> f64 {
        let (Some(first), Some(last)) = (self.frames.first(), self.frames.last()) else {
            return 0.0;
        };
        let rate = self.info.sample_rate.unwrap_or(48_000) as f64;
        let last_len = last.duration.unwrap_or(last.samples as f64 / rate);
        last.ts + last_len - self.first_ts().min(first.ts)
    }
}

/// Everything the checks need to know about one file.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The file.
    pub path: PathBuf,
    /// Container `start_time` (s), as ffprobe reports it.
    pub start: f64,
    /// Decoded video frame count (`-count_frames`).
    pub frame_count: u64,
    /// Decoded video frames, presentation order.
    pub video: Vec<Frame>,
    /// First video stream's metadata.
    pub video_info: StreamInfo,
    /// Audio tracks in container order.
    pub audio: Vec<AudioTrack>,
}

impl Summary {
    /// Probes `path` with ffprobe (decodes every frame).
    pub fn of(path: &Path) -> Summary {
        let streams = stream_info(path);
        let video_info = streams
            .iter()
            .find(|s| s.codec_type == "video")
            .cloned()
            .unwrap_or_else(|| panic!("{} has no video stream", path.display()));
        let audio = streams
            .iter()
            .filter(|s| s.codec_type == "audio")
            .enumerate()
            .map(|(i, info)| AudioTrack {
                info: info.clone(),
                frames: probe_stream_frames(path, &format!("a:{i}")),
                presented: first_presented(
                    path,
                    &format!("a:{i}"),
                    info.sample_rate.unwrap_or(48_000),
                ),
            })
            .collect();
        let mut audio: Vec<AudioTrack> = audio;
        for a in &mut audio {
            played_in_order(&mut a.frames);
        }
        let mut video = probe_stream_frames(path, "v:0");
        played_in_order(&mut video);
        Summary {
            path: path.to_path_buf(),
            start: format_start(path),
            frame_count: frame_count(path),
            video,
            video_info,
            audio,
        }
    }

    /// The presentation start: the earliest first decoded frame over the
    /// video and audio streams. Unlike the container's `start_time` it does
    /// not count packets that are decoded but never shown (AAC priming and
    /// Opus pre-skip, which MKV/WebM expose as negative timestamps).
    pub fn presentation_start(&self) -> f64 {
        self.video
            .first()
            .map(|f| f.ts)
            .into_iter()
            .chain(
                self.audio
                    .iter()
                    .map(AudioTrack::first_ts)
                    .filter(|t| !t.is_nan()),
            )
            .fold(f64::INFINITY, f64::min)
    }

    /// Video frame timestamps relative to [`Summary::presentation_start`].
    pub fn rel_times(&self) -> Vec<f64> {
        let start = self.presentation_start();
        self.video.iter().map(|f| f.ts - start).collect()
    }

    /// The shortest interval between consecutive video frames: "one frame
    /// duration" for tolerances (1/fps for constant frame rate).
    pub fn min_frame_interval(&self) -> f64 {
        self.video
            .windows(2)
            .map(|w| w[1].ts - w[0].ts)
            .filter(|d| *d > 1e-6)
            .fold(f64::INFINITY, f64::min)
            .min(0.1)
    }

    /// First audio timestamp minus first video timestamp for track `i`.
    pub fn av_offset(&self, i: usize) -> f64 {
        self.audio[i].first_ts() - self.video.first().map_or(f64::NAN, |f| f.ts)
    }
}

/// Frames as they play: where timestamps jump back by half a second or more (recordings
/// joined byte for byte, each starting over), the rest follows the frame before by that
/// frame's duration (else the interval before it), as tessera is to lay the parts out.
pub fn played_in_order(frames: &mut [Frame]) {
    const JUMP_S: f64 = 0.5;
    for i in 1..frames.len() {
        let (prev, here) = (frames[i - 1], frames[i].ts);
        if here < prev.ts - JUMP_S {
            let interval = i
                .checked_sub(2)
                .map(|j| prev.ts - frames[j].ts)
                .filter(|d| *d > 0.0);
            let step = prev
                .duration
                .filter(|d| *d > 0.0)
                .or(interval)
                .unwrap_or(0.0);
            let shift = prev.ts + step - here;
            for f in &mut frames[i..] {
                f.ts += shift;
            }
        }
    }
}

fn known(v: &Option<String>) -> Option<&str> {
    v.as_deref()
        .filter(|s| !matches!(*s, "unknown" | "unspecified" | "reserved"))
}

/// The invariants of an output `o` against its source `s` that need no report: every frame
/// once with its time, the audio tracks (offset, duration, channels, language), size,
/// aspect, rotation and colour, and PSNR. Adds what is violated to `p`; returns the PSNR.
pub fn compare_media(s: &Summary, o: &Summary, p: &mut Vec<String>) -> f64 {
    let tol = s.min_frame_interval() + 1e-3;
    check_video(s, o, tol, p);
    check_audio(s, o, tol, p);
    check_metadata(&s.video_info, &o.video_info, p);
    let db = psnr(&o.path, &s.path);
    if db.is_nan() || db < MIN_PSNR_DB {
        p.push(format!("PSNR {db:.2} dB < {MIN_PSNR_DB} dB"));
    }
    db
}

fn check_video(s: &Summary, o: &Summary, tol: f64, p: &mut Vec<String>) {
    if o.video_info.codec_name != "h264" {
        p.push(format!(
            "output video codec {} != h264",
            o.video_info.codec_name
        ));
    }
    if o.frame_count != s.frame_count {
        p.push(format!(
            "decoded frames: output {} != source {}",
            o.frame_count, s.frame_count
        ));
    }
    for (sum, what) in [(s, "source"), (o, "output")] {
        if sum.video.len() as u64 != sum.frame_count {
            p.push(format!(
                "{what}: ffprobe frame list ({}) != nb_read_frames ({})",
                sum.video.len(),
                sum.frame_count
            ));
        }
    }
    let o_start = o.presentation_start();
    if o.start.abs() > tol || o_start.abs() > tol {
        p.push(format!(
            "output starts at {o_start:.4} s (container start_time {:.4} s), expected 0",
            o.start
        ));
    }
    let (st, ot) = (s.rel_times(), o.rel_times());
    let (Some(sf), Some(of)) = (st.first(), ot.first()) else {
        p.push("no decoded video frames".into());
        return;
    };
    if (sf - of).abs() > tol {
        p.push(format!(
            "first frame at {of:.4} s, source {sf:.4} s (from start; tol {tol:.4})"
        ));
    }
    let (sl, ol) = (st[st.len() - 1], ot[ot.len() - 1]);
    if (sl - ol).abs() > tol {
        p.push(format!(
            "last frame at {ol:.4} s, source {sl:.4} s (from start; tol {tol:.4})"
        ));
    }
    if st.len() == ot.len() {
        let bad: Vec<usize> = (0..st.len())
            .filter(|i| (st[*i] - ot[*i]).abs() > tol)
            .collect();
        if let Some(&i) = bad.first() {
            p.push(format!(
                "{} of {} frame timestamps off by > {tol:.4} s; first at frame {i}: output {:.4} s, source {:.4} s",
                bad.len(), st.len(), ot[i], st[i]
            ));
        }
    }
    if ot.windows(2).any(|w| w[1] <= w[0]) {
        p.push("output frame timestamps are not strictly increasing".into());
    }
}

fn check_audio(s: &Summary, o: &Summary, tol: f64, p: &mut Vec<String>) {
    if s.audio.len() != o.audio.len() {
        p.push(format!(
            "audio tracks: output {} != source {}",
            o.audio.len(),
            s.audio.len()
        ));
        return;
    }
    for (i, (sa, oa)) in s.audio.iter().zip(&o.audio).enumerate() {
        if oa.info.codec_name != "aac" {
            p.push(format!("audio {i}: codec {} != aac", oa.info.codec_name));
        }
        let lang = |l: &Option<String>| l.clone().filter(|l| l != "und");
        if lang(&sa.info.language) != lang(&oa.info.language) {
            p.push(format!(
                "audio {i}: language {:?} != source {:?}",
                oa.info.language, sa.info.language
            ));
        }
        if oa.frames.is_empty() {
            p.push(format!("audio {i}: no decoded frames"));
            continue;
        }
        let (so, oo) = (s.av_offset(i), o.av_offset(i));
        if (so - oo).abs() > tol || oo.is_nan() {
            p.push(format!(
                "audio {i}: A/V offset {oo:.4} s, source {so:.4} s (tol {tol:.4})"
            ));
        }
        if sa.info.channels != oa.info.channels {
            p.push(format!(
                "audio {i}: {:?} channels, source {:?}",
                oa.info.channels, sa.info.channels
            ));
        } else if let (Some(sl), Some(ol)) = (&sa.info.channel_layout, &oa.info.channel_layout) {
            if speakers(sl) != speakers(ol) {
                p.push(format!("audio {i}: channel layout {ol}, source {sl}"));
            }
        }
        let (sd, od) = (sa.duration(), oa.duration());
        if (sd - od).abs() > AUDIO_DURATION_TOLERANCE_S {
            p.push(format!("audio {i}: duration {od:.4} s, source {sd:.4} s"));
        }
    }
}

/// A channel layout's name without the side/back distinction of its surround pair: AAC's
/// channel configurations have one 5.1 (and one 7.1), so a 5.1(side) source is rightly coded
/// as AAC's 5.1, which is what FFmpeg's own AAC encoder does.
fn speakers(layout: &str) -> &str {
    layout
        .strip_suffix("(side)")
        .or_else(|| layout.strip_suffix("(back)"))
        .unwrap_or(layout)
}

/// Display aspects (width / height on screen) may differ by this share: the output's size is
/// rounded to even numbers, and a sample aspect is a ratio of small integers.
pub const DISPLAY_ASPECT_TOLERANCE: f64 = 0.01;

fn check_metadata(s: &StreamInfo, o: &StreamInfo, p: &mut Vec<String>) {
    if let (Some(sd), Some(od)) = (s.display_aspect(), o.display_aspect()) {
        if (od / sd - 1.0).abs() > DISPLAY_ASPECT_TOLERANCE {
            p.push(format!(
                "display aspect {od:.4} (sample aspect {:?}), source {sd:.4} (sample aspect {:?})",
                o.sample_aspect, s.sample_aspect
            ));
        }
    }
    let even = |v: Option<u64>| v.map(|v| v - v % 2);
    if o.width != even(s.width) || o.height != even(s.height) {
        p.push(format!(
            "output size {:?}x{:?}, expected {:?}x{:?} (source {:?}x{:?})",
            o.width,
            o.height,
            even(s.width),
            even(s.height),
            s.width,
            s.height
        ));
    }
    let rot = |r: Option<f64>| r.filter(|r| r.abs() > 0.5).map(|r| r.rem_euclid(360.0));
    if rot(s.rotation) != rot(o.rotation) {
        p.push(format!(
            "rotation {:?} != source {:?}",
            o.rotation, s.rotation
        ));
    }
    let colour = [
        ("color_primaries", &s.color_primaries, &o.color_primaries),
        ("color_transfer", &s.color_transfer, &o.color_transfer),
        ("color_space", &s.color_space, &o.color_space),
    ];
    for (name, sv, ov) in colour {
        if let Some(want) = known(sv) {
            if known(ov) != Some(want) {
                p.push(format!("{name} {ov:?} != source {want:?}"));
            }
        }
    }
    if s.color_range.as_deref() == Some("pc") && o.color_range.as_deref() != Some("pc") {
        p.push(format!(
            "color_range {:?} != source full range (pc)",
            o.color_range
        ));
    }
}
