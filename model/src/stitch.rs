//! Joining encoded segments into one output: the stitch request and result, what the output
//! must hold (checked before it is delivered) and the quality measured against the source.
//!
//! Why plain data: a stitch runs in a worker's media child from a queue message; its checks
//! and report travel back to the dispatcher.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::audio::AudioTrackResult;
use crate::encode::Container;
use crate::probe::Rational;

/// Everything the stitch needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StitchRequest {
    /// Encoded segment files (NUT), in order.
    pub segments: Vec<PathBuf>,
    /// The video bias to subtract (source video time base).
    pub video_bias: i64,
    /// The source video time base.
    pub video_time_base: Rational,
    /// The audio intermediate file, if the output has audio.
    pub audio: Option<PathBuf>,
    /// Per audio stream of that file: bias, padding, language.
    pub audio_tracks: Vec<AudioTrackResult>,
    /// Seconds of the source's earliest shown timestamp: becomes the output's zero.
    pub start_seconds: f64,
    /// The source's display matrix, kept (rotation).
    pub display_matrix: Option<Vec<u8>>,
    /// The source frame rate (stream metadata of the output).
    pub frame_rate: Rational,
    /// The output container.
    pub container: Container,
    /// The destination file.
    pub output: PathBuf,
    /// Chapters of the source (its timeline), written moved to the output's zero.
    #[serde(default)]
    pub chapters: Vec<crate::probe::Chapter>,
    /// The source's title.
    #[serde(default)]
    pub title: Option<String>,
    /// Text subtitle tracks (cues on the source's timeline), written after the audio.
    #[serde(default)]
    pub subtitles: Vec<crate::subtitles::SubtitleTrack>,
    /// What the output must hold: when given, the file is decoded end to end and checked
    /// before it is renamed into place (the QC gate); a failure leaves nothing behind.
    #[serde(default)]
    pub expect: Option<OutputExpectation>,
}

/// What the stitch wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StitchResult {
    /// Video packets (frames) written.
    pub frames: u64,
    /// Audio packets written.
    pub audio_packets: u64,
    /// Output size in bytes.
    pub bytes: u64,
    /// Timestamps the stitch had to nudge to keep decode order monotonic (0 when all is well).
    pub adjusted_timestamps: u64,
    /// What the QC gate decoded, when the request asked for it.
    #[serde(default)]
    pub check: Option<OutputCheck>,
}

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
    /// Video frames read: every packet of the video, one frame each.
    pub frames: u64,
    /// Of those, the frames decoded: all of them (the gate decodes every frame; older
    /// releases decoded only the reference frames on their first look).
    #[serde(default)]
    pub decoded_frames: u64,
    /// Seconds of the first and last decoded video frame.
    pub video_start_seconds: f64,
    /// See `video_start_seconds`.
    pub video_end_seconds: f64,
    /// Per audio track: seconds of its first sample and seconds of sound decoded.
    pub audio: Vec<(f64, f64)>,
    /// Parts the video was decoded in side by side (1: in one piece, or again in one piece
    /// after the parts disagreed with the plan).
    #[serde(default)]
    pub video_parts: u32,
    /// Wall seconds the gate took, opening to verdict: the part of a job's end that the
    /// report names `qc_s`, so where an output's time goes can be read, not guessed.
    #[serde(default)]
    pub seconds: f64,
}

/// PSNR/SSIM figures over the compared frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QualityReport {
    /// Frames compared (the shorter of the two streams).
    pub frames: u64,
    /// Frames the source had beyond the output (or the other way round, negative).
    pub frame_count_difference: i64,
    /// PSNR over all three planes (sizes weighted, as FFmpeg's "average"), dB.
    pub psnr: f64,
    /// PSNR of luma, dB.
    pub psnr_y: f64,
    /// Mean SSIM of luma (8x8 windows, step 4).
    pub ssim: f64,
}

/// The temporary name an output is written under before the rename into place: hidden,
/// beside the output, so the rename stays on one file system.
///
/// Why here: the stitch and the engine's package assembly write through it, and a crash
/// leaves only names that nothing reads as an output.
pub fn temp_path(output: &Path) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    output.with_file_name(format!(".{name}.tessera-partial"))
}
