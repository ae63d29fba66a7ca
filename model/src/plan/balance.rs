//! Cut points for a short input shared among workers, balanced by estimated cost.
//!
//! Why: a short input is cut into one segment per worker, and the job ends when the slowest
//! segment does. A segment that does not start on a keyframe first decodes its lead-in (the
//! frames from the keyframe before it, references only), so cutting a one-keyframe clip in
//! even halves leaves the second worker ~10% more work and the first one idle at the end.
//! Here every segment's cost is its frames plus a share of its lead-in, and the cuts make
//! the costs even.

use std::ops::Range;

use super::{DecodeStarts, ShownFrames};

/// What decoding one lead-in frame costs next to decoding and encoding one frame of the
/// segment. Measured on the 5 s 720p benchmark (x264 veryfast, one thread): 74 lead-in
/// frames (those nothing refers to skipped) cost the segment 187 ms against 22.4 ms a frame,
/// about 0.11; slower presets make it smaller, so this errs on the cheap side of half.
pub(super) const LEAD_IN_WEIGHT: f64 = 0.11;

/// Start timestamps of at most `parts` segments covering every shown frame, chosen so that
/// the largest (frames + weighted lead-in) is as small as it can be. `busy_last` is work, in
/// frames of this video, that the worker of the last segment does besides it (in the
/// one-process farm the job's audio step takes the first child a segment frees): the last
/// segment is that much shorter, so every worker still finishes at the same time. Pure.
pub(super) fn balanced_starts(
    frames: &ShownFrames,
    decode: &DecodeStarts,
    parts: usize,
    busy_last: f64,
) -> Vec<i64> {
    let n = frames.pts.len();
    let lead = |a: usize| lead_in_cost(frames, decode, a);
    // Never more than one segment's share: a wrong estimate then costs little.
    let busy_last = busy_last.clamp(0.0, n as f64 / parts.max(1) as f64);
    // Cuts whose segments all cost at most `limit`, when `parts` segments suffice.
    let cuts = |limit: f64| -> Option<Vec<usize>> {
        let mut cuts = vec![0];
        let mut a = 0;
        loop {
            let room = limit - lead(a);
            if room < 1.0 {
                return None;
            }
            // The rest fits in this segment, the work before the last one included.
            if (n - a) as f64 + busy_last <= room {
                return Some(cuts);
            }
            if cuts.len() == parts {
                return None;
            }
            // room >= 1, so b > a unless a is the last frame.
            let b = (a + room.floor() as usize).min(n - 1);
            if b <= a {
                return None;
            }
            cuts.push(b);
            a = b;
        }
    };
    let (mut lo, mut hi) = (
        n as f64 / parts.max(1) as f64,
        n as f64 * (1.0 + LEAD_IN_WEIGHT) + busy_last + 1.0,
    );
    let mut best = cuts(hi).unwrap_or_else(|| vec![0]);
    for _ in 0..40 {
        let mid = (lo + hi) / 2.0;
        match cuts(mid) {
            Some(c) => {
                best = c;
                hi = mid;
            }
            None => lo = mid,
        }
        if hi - lo < 0.5 {
            break;
        }
    }
    best.into_iter().map(|a| frames.pts[a]).collect()
}

/// Where to cut the shown frames `range` in two pieces of equal cost (frames + weighted
/// lead-in). None when the range has fewer than two frames. Pure, O(range).
pub(super) fn even_cut(
    frames: &ShownFrames,
    decode: &DecodeStarts,
    range: Range<usize>,
) -> Option<usize> {
    let (lo, hi) = (range.start, range.end);
    if hi < lo + 2 {
        return None;
    }
    let first_lead = lead_in_cost(frames, decode, lo);
    let cost = |cut: usize| {
        let first = (cut - lo) as f64 + first_lead;
        let second = (hi - cut) as f64 + lead_in_cost(frames, decode, cut);
        first.max(second)
    };
    (lo + 1..hi).min_by(|&x, &y| cost(x).total_cmp(&cost(y)))
}

/// What a segment starting at shown frame `a` pays for its lead-in, in frames.
fn lead_in_cost(frames: &ShownFrames, decode: &DecodeStarts, a: usize) -> f64 {
    let idx = frames.index[a];
    LEAD_IN_WEIGHT * idx.saturating_sub(decode.before(idx)) as f64
}
