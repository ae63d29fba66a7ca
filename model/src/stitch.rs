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

/// PSNR/SSIM and VMAF figures over the compared frames.
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
    /// VMAF of the output against the source (absent in reports of releases before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmaf: Option<VmafReport>,
}

/// VMAF of an output against its source: what users compare encoders and settings by.
///
/// Why per segment as well: each segment is encoded on its own, so a weak one is found (and,
/// with target quality, searched) where it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmafReport {
    /// The model: `vmaf_v0.6.1`, or `vmaf_4k_v0.6.1` for sources above 1440 lines.
    pub model: String,
    /// The libvmaf version that scored.
    pub libvmaf: String,
    /// The size both were scored at: the source's display size (the output scaled to it,
    /// bicubic).
    pub width: u32,
    /// See `width`.
    pub height: u32,
    /// The whole output.
    pub pooled: VmafPooled,
    /// Each segment in order, by the segments' frame counts (empty when not known).
    #[serde(default)]
    pub segments: Vec<VmafPooled>,
}

/// Per-frame VMAF scores of a run of frames, pooled the ways users read them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VmafPooled {
    /// Frames pooled.
    pub frames: u64,
    /// Arithmetic mean: "the VMAF" of most reports.
    pub mean: f64,
    /// libvmaf's harmonic mean, n / sum(1 / (score + 1)) - 1: weighs the bad frames.
    pub harmonic_mean: f64,
    /// 1st percentile (linear between ranks): the worst moments without a single outlier.
    pub p1: f64,
    /// 5th percentile.
    pub p5: f64,
    /// The worst frame.
    pub min: f64,
}

impl VmafPooled {
    /// Pools per-frame `scores` (`None` when there are none).
    pub fn of(scores: &[f64]) -> Option<Self> {
        if scores.is_empty() {
            return None;
        }
        let n = scores.len() as f64;
        let mut sorted = scores.to_vec();
        sorted.sort_by(f64::total_cmp);
        let percentile = |p: f64| {
            let rank = p / 100.0 * (n - 1.0);
            let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - rank.floor())
        };
        Some(VmafPooled {
            frames: scores.len() as u64,
            mean: scores.iter().sum::<f64>() / n,
            harmonic_mean: n / scores.iter().map(|s| 1.0 / (s + 1.0)).sum::<f64>() - 1.0,
            p1: percentile(1.0),
            p5: percentile(5.0),
            min: sorted[0],
        })
    }
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

#[cfg(test)]
mod tests {
    use super::VmafPooled;

    #[test]
    fn pooling_known_values() {
        let scores: Vec<f64> = (0..=100).rev().map(f64::from).collect();
        let p = VmafPooled::of(&scores).unwrap();
        assert_eq!((p.frames, p.mean, p.min), (101, 50.0, 0.0));
        assert!(
            (p.p1 - 1.0).abs() < 1e-9 && (p.p5 - 5.0).abs() < 1e-9,
            "{p:?}"
        );
        let one = VmafPooled::of(&[93.5]).unwrap();
        assert_eq!(
            (one.mean, one.p1, one.p5, one.min),
            (93.5, 93.5, 93.5, 93.5)
        );
        assert!((one.harmonic_mean - 93.5).abs() < 1e-9);
        assert!(VmafPooled::of(&[]).is_none());
    }

    /// Generated runs of scores: every pooled figure lies between the worst and the best
    /// frame, in the order min <= p1 <= p5 and harmonic mean <= mean.
    #[test]
    fn pooled_figures_are_ordered_for_generated_scores() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for case in 0..500 {
            let n = 1 + case % 97;
            let scores: Vec<f64> = (0..n)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state % 10_001) as f64 / 100.0
                })
                .collect();
            let p = VmafPooled::of(&scores).unwrap();
            let max = scores.iter().copied().fold(f64::MIN, f64::max);
            assert!(p.min <= p.p1 && p.p1 <= p.p5 && p.p5 <= max, "{p:?}");
            assert!(p.harmonic_mean <= p.mean + 1e-9 && p.harmonic_mean >= p.min - 1e-9);
            assert!(p.mean <= max + 1e-9 && p.mean >= p.min - 1e-9);
        }
    }
}
