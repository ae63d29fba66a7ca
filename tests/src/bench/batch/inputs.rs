//! The batch's uploads: `n` clips of the input matrix ([`crate::matrix`]: its containers,
//! codecs, audio and timing variants, made by its recipes) at lengths from 2 s to 3 minutes,
//! cached in `bench/.cache/batch/`.
//!
//! Why this mix: a day of uploads is mostly short clips with a few long recordings, in
//! whatever a phone, an editor or a broadcaster wrote. Every third upload is short (2-9 s),
//! every third medium (10-40 s), every third long (40-180 s); the first is 2 s and the
//! longest 180 s, so the range is always spanned. Sizes follow the length (short 720p,
//! medium 480p, long 360p) so one round stays near five minutes a side on 2 cores, and the
//! intra-only codecs (ProRes, MJPEG, whose files are tens of Mb/s) take the short slots.
//! DNxHD, which the matrix makes at 1920x1080 only, is left out.

use std::path::{Path, PathBuf};

use crate::matrix::{sample, Case, Video, MATRIX_SEED};
use crate::probe::{ffprobe_json, frame_count, num, packets};

/// One upload of the batch.
#[derive(Debug, Clone)]
pub struct Upload {
    /// The matrix case it was made from.
    pub case: Case,
    /// Its generated length (s).
    pub secs: u32,
    /// The local file.
    pub path: PathBuf,
    /// Its decoded video frames.
    pub frames: u64,
    /// How long its video shows (s): see [`span`].
    pub duration_s: f64,
}

impl Upload {
    /// The object key in the input bucket: `batch/NN-case-LENs.ext`.
    pub fn key(&self, i: usize) -> String {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        format!("batch/{i:02}-{}", name.unwrap_or_default())
    }
}

/// The length class of slot `i`: 0 short, 1 medium, 2 long.
fn class(i: usize) -> usize {
    i % 3
}

/// The planned lengths (s) of `n` uploads with `scale` applied (at least 2 s each, so the
/// edit-list variant's 1.3 s cut leaves frames):
/// short 2-9 s, medium 10-40 s, long 40-180 s by slot (see the module docs), seeded.
pub fn lengths(n: usize, scale: f64, seed: u64) -> Vec<u32> {
    let last_long = (0..n).rev().find(|&i| class(i) == 2);
    (0..n)
        .map(|i| {
            let h = fnv(seed, &(i as u64).to_le_bytes());
            let secs = match class(i) {
                _ if i == 0 => 2,
                _ if Some(i) == last_long => 180,
                0 => 2 + h % 8,
                1 => 10 + h % 31,
                _ => 40 + h % 141,
            };
            ((secs as f64 * scale).round() as u32).max(2)
        })
        .collect()
}

/// The frame size of slot `i` (by its length class).
pub fn size(i: usize) -> (u32, u32) {
    match class(i) {
        0 => (1280, 720),
        1 => (854, 480),
        _ => (640, 360),
    }
}

/// 64-bit FNV-1a of `bytes` from a seeded start (stable across Rust versions).
fn fnv(seed: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64 ^ seed, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn is_intra(v: Video) -> bool {
    matches!(v, Video::ProRes | Video::Mjpeg)
}

/// `n` matrix cases (no DNxHD) in slot order: every container first (the matrix's sample),
/// intra-only codecs in short slots while any are left.
pub fn cases(n: usize) -> Vec<Case> {
    let pool: Vec<Case> = sample(MATRIX_SEED, n + 4)
        .into_iter()
        .filter(|c| c.video != Video::Dnxhd)
        .collect();
    let (mut intra, mut other): (Vec<Case>, Vec<Case>) =
        pool.into_iter().partition(|c| is_intra(c.video));
    // Seeded order, so a small sample is not all one container.
    other.sort_by_key(|c| fnv(MATRIX_SEED, c.name().as_bytes()));
    intra.reverse();
    other.reverse();
    (0..n)
        .map_while(|i| {
            let from_intra = class(i) == 0 && !intra.is_empty();
            if from_intra || other.is_empty() {
                intra.pop()
            } else {
                other.pop()
            }
        })
        .collect()
}

/// The workspace's `bench/.cache/batch/`.
pub fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .join("bench/.cache/batch")
}

/// The batch: `n` uploads at `scale`, generated (with ffmpeg, once) into [`cache_dir`], each
/// with its frame count and shown duration (probed once, kept beside it as `FILE.probe`).
pub fn uploads(n: usize, scale: f64) -> Vec<Upload> {
    let dir = cache_dir();
    let secs = lengths(n, scale, MATRIX_SEED);
    cases(n)
        .into_iter()
        .enumerate()
        .map(|(i, case)| {
            println!(
                "==> input {i:02}: {} {} s at {:?}",
                case.name(),
                secs[i],
                size(i)
            );
            let path = case.build_sized(secs[i], size(i), &dir);
            let (frames, duration_s) = probed(&path);
            Upload {
                case,
                secs: secs[i],
                path,
                frames,
                duration_s,
            }
        })
        .collect()
}

/// `(frames, duration s)` of `path`, from its `.probe` file or ffprobe.
fn probed(path: &Path) -> (u64, f64) {
    let note = PathBuf::from(format!("{}.probe", path.display()));
    if let Some(v) = std::fs::read_to_string(&note)
        .ok()
        .and_then(|t| parse_probe(&t))
    {
        return v;
    }
    let frames = frame_count(path);
    let shown: Vec<f64> = packets(path, "v:0")
        .into_iter()
        .filter(|p| !p.discard && p.pts.is_finite())
        .map(|p| p.pts)
        .collect();
    // AVI stores no presentation times (and no start offset): its own duration then.
    let duration = match span(&shown) {
        d if d > 0.0 => d,
        _ => num(&ffprobe_json(path, &["-show_entries", "format=duration"])["format"]["duration"])
            .unwrap_or_else(|| panic!("no duration for {}", path.display())),
    };
    std::fs::write(&note, format!("{frames} {duration}")).expect("write the probe note");
    (frames, duration)
}

/// How long frames presented at `pts` (s, any order) last: first to last plus the median
/// interval (the last frame's own length). Why not the container's duration: Matroska and
/// NUT give the end time there, so a clip whose timestamps start at 10 s would count 10 s
/// more output than it has.
pub fn span(pts: &[f64]) -> f64 {
    let mut v = pts.to_vec();
    v.sort_by(f64::total_cmp);
    let (Some(first), Some(last)) = (v.first(), v.last()) else {
        return 0.0;
    };
    let gaps: Vec<f64> = v.windows(2).map(|w| w[1] - w[0]).collect();
    let frame = if gaps.is_empty() {
        0.0
    } else {
        crate::bench::median(gaps)
    };
    last - first + frame
}

/// `FRAMES DURATION` of a `.probe` note.
fn parse_probe(text: &str) -> Option<(u64, f64)> {
    let (f, d) = text.trim().split_once(' ')?;
    Some((f.parse().ok()?, d.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_span_two_seconds_to_three_minutes_with_a_third_short() {
        let l = lengths(40, 1.0, MATRIX_SEED);
        assert_eq!(l.len(), 40);
        assert_eq!(l.iter().min(), Some(&2));
        assert_eq!(l.iter().max(), Some(&180));
        assert!(l.iter().filter(|&&s| s < 10).count() * 3 >= 40);
        assert!(l.iter().all(|&s| (2..=180).contains(&s)));
        assert_eq!(l, lengths(40, 1.0, MATRIX_SEED), "seeded, not random");
        let small = lengths(8, 0.25, MATRIX_SEED);
        assert_eq!(small[0], 2, "0.5 s rounds up to the 2 s floor");
        assert_eq!(small[5], 45, "the last long slot is 180 s");
    }

    #[test]
    fn sizes_follow_the_length_class() {
        assert_eq!(size(0), (1280, 720));
        assert_eq!(size(4), (854, 480));
        assert_eq!(size(38), (640, 360));
    }

    #[test]
    fn a_span_runs_from_the_first_frame_to_the_end_of_the_last() {
        let pts = [10.08, 10.0, 10.04, 10.16];
        assert!((span(&pts) - 0.2).abs() < 1e-9, "{}", span(&pts));
        assert!((span(&[3.0]) - 0.0).abs() < 1e-12);
        assert_eq!(span(&[]), 0.0);
    }

    #[test]
    fn probe_notes_round_trip() {
        assert_eq!(parse_probe("1500 60.04\n"), Some((1500, 60.04)));
        assert_eq!(parse_probe("garbage"), None);
    }
}
