//! The content oracle of the chaos run: every decoded frame of an output hashed
//! (`ffmpeg -f framemd5`) and compared with the same job's output from a run without
//! faults. Why: a frame count and timestamps match for a swapped segment or a foreign one
//! of the same length; only the pixels (and samples) tell them apart.

use std::path::Path;
use std::process::Command;

/// One decoded frame: its stream index and the MD5 of its decoded data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameHash {
    /// The stream the frame belongs to (0 video, 1 audio, ... as ffmpeg numbers them).
    pub stream: u32,
    /// The MD5 of the decoded frame (pixels or samples).
    pub md5: String,
}

/// The decoded frames of `path`, in order, each hashed. Panics (naming the file and
/// ffmpeg's message) when ffmpeg cannot decode it: the oracle must not pass on an error.
pub fn frame_hashes(path: &Path) -> Vec<FrameHash> {
    try_frame_hashes(path).unwrap_or_else(|e| panic!("{e}"))
}

/// The decoded frames of `path`, or why ffmpeg could not decode it (the file and its
/// message): a chaos output that does not decode is corrupt, not the end of the run.
pub fn try_frame_hashes(path: &Path) -> Result<Vec<FrameHash>, String> {
    let out = Command::new("ffmpeg")
        .args(["-nostdin", "-v", "error", "-threads", "1", "-i"])
        .arg(path)
        .args(["-map", "0:v?", "-map", "0:a?", "-f", "framemd5", "-"])
        .output()
        .expect("run ffmpeg");
    if !out.status.success() {
        return Err(format!(
            "framemd5 of {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(parse_framemd5(&String::from_utf8_lossy(&out.stdout)))
}

/// The frames of a framemd5 listing (`stream, dts, pts, duration, size, md5` lines; `#`
/// lines are comments).
pub fn parse_framemd5(text: &str) -> Vec<FrameHash> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(',').map(str::trim).collect();
            Some(FrameHash {
                stream: fields.first()?.parse().ok()?,
                md5: fields.last()?.to_string(),
            })
        })
        .collect()
}

/// How many frames of `output` differ from `reference`, stream by stream and position by
/// position; a frame missing from either side counts as differing.
pub fn differing_frames(reference: &[FrameHash], output: &[FrameHash]) -> usize {
    fn streams(h: &[FrameHash]) -> std::collections::BTreeMap<u32, Vec<&str>> {
        let mut by: std::collections::BTreeMap<u32, Vec<&str>> = Default::default();
        for f in h {
            by.entry(f.stream).or_default().push(&f.md5);
        }
        by
    }
    let (r, o) = (streams(reference), streams(output));
    let ids: std::collections::BTreeSet<u32> = r.keys().chain(o.keys()).copied().collect();
    ids.iter()
        .map(|id| {
            let (a, b) = (
                r.get(id).cloned().unwrap_or_default(),
                o.get(id).cloned().unwrap_or_default(),
            );
            let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
            a.len().max(b.len()) - same
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "#format: frame checksums\n#stream#, dts, pts, duration, size, hash\n\
        0, 0, 0, 1, 100, aaa\n1, 0, 0, 1024, 4096, s1\n0, 1, 1, 1, 100, bbb\n0, 2, 2, 1, 100, ccc\n";

    #[test]
    fn a_listing_parses_into_frames_per_stream() {
        let frames = parse_framemd5(LISTING);
        assert_eq!(frames.len(), 4);
        assert_eq!(
            frames[1],
            FrameHash {
                stream: 1,
                md5: "s1".into()
            }
        );
    }

    #[test]
    fn swapped_missing_and_extra_frames_differ() {
        let r = parse_framemd5(LISTING);
        assert_eq!(differing_frames(&r, &r), 0);
        let mut swapped = r.clone();
        swapped.swap(2, 3);
        assert_eq!(differing_frames(&r, &swapped), 2);
        assert_eq!(differing_frames(&r, &r[..3]), 1);
        assert_eq!(differing_frames(&r[..3], &r), 1);
    }
}
