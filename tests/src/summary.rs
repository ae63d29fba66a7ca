//! What a file plays as, by the ffprobe/ffmpeg oracle: the [`Summary`] of a file (video frames
//! in playing order, audio tracks with their frames and where the container presents them,
//! metadata), and how recordings joined byte for byte are laid out ([`lay_out`]).
//!
//! Why apart from playback.rs: both the invariants of an output against its source
//! (playback.rs) and the sync check (sync.rs) read a summary, and the first calls the second.

use crate::probe::{
    first_presented, format_start, frame_count, probe_stream_frames, stream_info, Frame, StreamInfo,
};
use std::path::{Path, PathBuf};

/// One audio track as the oracle sees it.
#[derive(Debug, Clone)]
pub struct AudioTrack {
    /// Stream metadata (codec, language, ...).
    pub info: StreamInfo,
    /// Decoded frames.
    pub frames: Vec<Frame>,
    /// When the container presents the first sample ([`first_presented`]), if known.
    pub presented: Option<f64>,
    /// Where [`lay_out`] moved the frames (recordings joined with timestamps that jump back).
    pub jumps: Vec<Jump>,
}

impl AudioTrack {
    /// When the first sample is heard (s): the first decoded frame's time (priming a container
    /// trims is not presented, FFmpeg's decoder drops it), or the container's word
    /// ([`first_presented`]) when nothing decodes. A decoder's delay (WMA: its first packets
    /// only prime it, and its first frame is stamped two frames after the container's start)
    /// is where the sound is: the sync markers of the matrix line up with the flashes from
    /// the decoded frame's time, not from the container's start.
    pub fn first_ts(&self) -> f64 {
        self.frames
            .first()
            .map(|f| f.ts)
            .or(self.presented)
            .unwrap_or(f64::NAN)
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
    /// Where [`lay_out`] moved the video frames: the A/V sync check moves each joined
    /// recording's audio as its video ([`crate::sync`]).
    pub video_jumps: Vec<Jump>,
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
                jumps: Vec::new(),
            })
            .collect();
        let mut audio: Vec<AudioTrack> = audio;
        for a in &mut audio {
            a.jumps = lay_out(&mut a.frames);
        }
        let mut video = probe_stream_frames(path, "v:0");
        let video_jumps = lay_out(&mut video);
        Summary {
            path: path.to_path_buf(),
            start: format_start(path),
            frame_count: frame_count(path),
            video,
            video_info,
            video_jumps,
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

/// One place where [`lay_out`] moved a stream: frame `at` and all after it by `shift` s more.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Jump {
    /// Index of the first frame of the recording that starts over.
    pub at: usize,
    /// Seconds added to it and every later frame (on top of earlier jumps' shifts).
    pub shift: f64,
}

/// Frames as they play: where timestamps jump back by half a second or more (recordings
/// joined byte for byte, each starting over), the rest follows the frame before by that
/// frame's duration (else the interval before it), as tessera is to lay the parts out.
pub fn played_in_order(frames: &mut [Frame]) {
    lay_out(frames);
}

/// [`played_in_order`], returning where it moved the frames and by how much: the sync
/// check moves each recording's audio by its video's shift ([`crate::sync`]).
pub fn lay_out(frames: &mut [Frame]) -> Vec<Jump> {
    const JUMP_S: f64 = 0.5;
    let mut jumps = Vec::new();
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
            jumps.push(Jump { at: i, shift });
        }
    }
    jumps
}
