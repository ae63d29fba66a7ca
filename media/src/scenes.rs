//! Scene changes of a video: the frames (in presentation order) where the picture changes
//! from one shot to another, measured on small grey frames.
//!
//! Why: a target-quality segment searches one rate factor for all its frames; a segment that
//! holds two kinds of picture (a still slide, then grain) gets a rate factor right for
//! neither. The planner moves cuts to these frames when they are near the target length.
//!
//! The measure is FFmpeg's `scdet` one, kept here with the rest of the media code: the mean
//! absolute difference of consecutive frames' luma (0-100), and the score of a frame the
//! smaller of that difference and its change from the previous difference, so a steady pan
//! (large differences, all alike) scores low and a cut (one large difference) high.

use std::path::Path;

use crate::verify::frames::{Fit, FrameReader};
use crate::MediaError;

/// The size frames are compared at: small enough to be cheap and to ignore noise.
const SIZE: (u32, u32) = (64, 36);
/// A frame whose score reaches this begins a scene (`scdet`'s default).
const THRESHOLD: f64 = 10.0;

/// The presentation-order indices of the frames of `input` that begin a new scene (never the
/// first frame), decoding on `threads` threads.
pub fn scene_changes(input: &Path, threads: usize) -> Result<Vec<u64>, MediaError> {
    crate::init();
    let mut reader = FrameReader::open(input, threads)?;
    let mut fit = Fit::to(SIZE.0, SIZE.1);
    let mut previous: Option<Vec<u8>> = None;
    let mut detector = Detector::default();
    let mut cuts = Vec::new();
    let mut index = 0u64;
    while let Some(frame) = reader.next()? {
        let small = fit.fit(&frame, input)?;
        let luma = plane(&small);
        if let Some(prev) = &previous {
            if detector.score(prev, &luma) >= THRESHOLD {
                cuts.push(index);
            }
        }
        previous = Some(luma);
        index += 1;
    }
    Ok(cuts)
}

/// The luma plane of a small frame without its row padding.
fn plane(frame: &ffmpeg_next::frame::Video) -> Vec<u8> {
    let (w, h, stride) = (
        frame.width() as usize,
        frame.height() as usize,
        frame.stride(0),
    );
    let data = frame.data(0);
    (0..h)
        .flat_map(|y| data[y * stride..y * stride + w].iter().copied())
        .collect()
}

/// The state of the score: the previous pair's difference.
#[derive(Default)]
struct Detector {
    previous_difference: f64,
}

impl Detector {
    /// The score (0-100) of the frame `luma` after `prev` (planes of one size).
    fn score(&mut self, prev: &[u8], luma: &[u8]) -> f64 {
        let sum: u64 = (prev.iter().zip(luma))
            .map(|(&a, &b)| u64::from(a.abs_diff(b)))
            .sum();
        let difference = sum as f64 * 100.0 / (luma.len().max(1) as f64 * 255.0);
        let change = (difference - self.previous_difference).abs();
        self.previous_difference = difference;
        difference.min(change).clamp(0.0, 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::Detector;

    #[test]
    fn a_cut_scores_high_and_a_steady_change_low() {
        let mut d = Detector::default();
        let grey = vec![100u8; 64];
        let white = vec![240u8; 64];
        assert_eq!(d.score(&grey, &grey), 0.0);
        assert!(d.score(&grey, &white) > 50.0, "a cut");
        // The same large difference again and again (a fast pan): low after the first.
        let shades: Vec<Vec<u8>> = (0..5).map(|i| vec![(i * 40) as u8; 64]).collect();
        let mut d = Detector::default();
        let scores: Vec<f64> = shades.windows(2).map(|w| d.score(&w[0], &w[1])).collect();
        assert!(scores[1..].iter().all(|&s| s < 1.0), "{scores:?}");
    }
}
