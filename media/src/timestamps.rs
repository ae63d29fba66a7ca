//! Decode timestamps derived from presentation timestamps.
//!
//! Why: several containers do not carry a dts per packet. Matroska/WebM store only pts (the
//! demuxer leaves the first dts unknown and guesses the rest, so guesses and fallbacks go
//! backwards with B-frames), NUT's demuxer guesses them, AVI has dts only. A muxer refuses a
//! packet whose dts goes backwards or exceeds its pts. tessera therefore never copies a
//! demuxer's dts into an intermediate: every writer derives dts from the pts in decode order
//! with one rule, here. With reorder depth `d` (how far any packet sits ahead of its place in
//! presentation order), dts[i] is the (i-d)'th smallest pts, and the first `d` packets step
//! back from the smallest pts by the smallest frame interval. The result never decreases and
//! never exceeds the packet's own pts.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

/// What a writer needs to derive dts while streaming packets in decode order.
///
/// Why a small value: the probe sees every packet once and computes it; the split then derives
/// the same dts packet by packet without the whole index crossing the process boundary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DtsRule {
    /// The largest number of packets any packet precedes its presentation-order place by.
    pub depth: u32,
    /// The smallest positive interval between consecutive presentation timestamps.
    pub step: i64,
    /// The smallest pts of the stream.
    pub first_pts: i64,
}

impl DtsRule {
    /// Computes the rule for a whole stream's pts, in decode order.
    pub fn of(pts: &[i64]) -> DtsRule {
        if pts.is_empty() {
            return DtsRule::default();
        }
        let mut sorted = pts.to_vec();
        sorted.sort_unstable();
        let depth = pts
            .iter()
            .enumerate()
            .map(|(i, p)| i as i64 - sorted.partition_point(|x| x < p) as i64)
            .max()
            .unwrap_or(0)
            .max(0);
        let step = smallest_step(&sorted);
        DtsRule {
            depth: u32::try_from(depth).unwrap_or(u32::MAX),
            step,
            first_pts: sorted[0],
        }
    }

    /// A streaming deriver that yields the dts of each packet fed to it in decode order.
    pub fn deriver(self) -> DtsDeriver {
        DtsDeriver {
            rule: self,
            seen: 0,
            heap: BinaryHeap::new(),
        }
    }
}

/// The smallest positive interval between neighbours of an ascending list (1 when none).
pub(crate) fn smallest_step(ascending: &[i64]) -> i64 {
    ascending
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|d| *d > 0)
        .min()
        .unwrap_or(1)
}

/// Derives dts packet by packet (see the module doc); memory is bounded by the reorder depth.
#[derive(Debug)]
pub struct DtsDeriver {
    rule: DtsRule,
    seen: u64,
    heap: BinaryHeap<Reverse<i64>>,
}

impl DtsDeriver {
    /// The dts of the next packet in decode order, given its pts.
    ///
    /// Every packet's presentation rank is at least its decode index minus the depth, so the
    /// (i-d)'th smallest pts of the stream is among the first i+1 packets: the heap's minimum
    /// once the smaller ones were handed out.
    pub fn next(&mut self, pts: i64) -> i64 {
        let i = self.seen;
        self.seen += 1;
        self.heap.push(Reverse(pts));
        let depth = u64::from(self.rule.depth);
        if i < depth {
            return self.rule.first_pts - (depth - i) as i64 * self.rule.step;
        }
        // The heap is never empty here: one value was pushed above.
        self.heap.pop().map(|Reverse(v)| v.min(pts)).unwrap_or(pts)
    }
}

/// Decode timestamps for a whole list of pts in decode order (see [`DtsRule`]).
///
/// Why a batch form: the stitcher reads one encoded segment at a time and derives its dts
/// from that segment alone. Unknown pts leave the list unchanged.
pub fn decode_timestamps(pts: &[Option<i64>]) -> Vec<Option<i64>> {
    decode_timestamps_with(pts, 0, i64::MAX)
}

/// [`decode_timestamps`] with a reorder depth of at least `depth` and a step of at most
/// `step`.
///
/// Why: a stitched stream is one stream. When segments are concatenated, one whose encoder
/// reordered deeper than the one before (a short last segment, a scene the encoder chose
/// B-frames for) would start its dts inside the previous segment's. With the largest depth
/// and smallest step of all segments every segment leaves the same room before its first
/// pts, so dts rise across the joins. A larger depth is always valid: each dts is still an
/// earlier-or-equal pts, in order.
pub fn decode_timestamps_with(pts: &[Option<i64>], depth: u32, step: i64) -> Vec<Option<i64>> {
    let known: Vec<i64> = pts.iter().flatten().copied().collect();
    if known.len() != pts.len() || known.is_empty() {
        return pts.to_vec();
    }
    let own = DtsRule::of(&known);
    let rule = DtsRule {
        depth: own.depth.max(depth),
        step: own.step.min(step).max(1),
        first_pts: own.first_pts,
    };
    let mut deriver = rule.deriver();
    known.iter().map(|&p| Some(deriver.next(p))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dts_from_pts_with_b_pyramid() {
        // decode order I0 P4 B2 b1 b3 P8 B6 b5 b7 (durations of 1)
        let pts = [0, 4, 2, 1, 3, 8, 6, 5, 7].map(Some);
        let dts: Vec<i64> = decode_timestamps(&pts).into_iter().flatten().collect();
        assert_eq!(dts, vec![-2, -1, 0, 1, 2, 3, 4, 5, 6]);
        let no_reorder = [10, 20, 30].map(Some);
        assert_eq!(decode_timestamps(&no_reorder), no_reorder.to_vec());
        assert_eq!(decode_timestamps(&[Some(1), None]), vec![Some(1), None]);
    }

    #[test]
    fn matroska_b_frames_in_40ms_ticks() {
        // What the Matroska demuxer hands over for x264 -bf 3 at 25 fps (pts only, ms).
        let pts = [23, 103, 63, 183, 143, 343, 263, 223];
        let rule = DtsRule::of(&pts);
        assert_eq!(rule.depth, 2);
        assert_eq!(rule.step, 40);
        let mut d = rule.deriver();
        let dts: Vec<i64> = pts.iter().map(|&p| d.next(p)).collect();
        assert_eq!(dts, vec![-57, -17, 23, 63, 103, 143, 183, 223]);
    }

    #[test]
    fn segments_joined_with_the_deepest_reorder_keep_dts_rising() {
        // Segment A has no reordering, segment B reorders by two: alone, B's first dts would
        // fall on A's last one.
        let a = [0, 1, 2, 3].map(Some);
        let b = [4, 7, 6, 5].map(Some);
        let alone: Vec<i64> = [decode_timestamps(&a), decode_timestamps(&b)]
            .concat()
            .into_iter()
            .flatten()
            .collect();
        assert!(alone.windows(2).any(|w| w[1] <= w[0]), "{alone:?}");
        let depth = [&a[..], &b[..]]
            .iter()
            .map(|s| DtsRule::of(&s.iter().flatten().copied().collect::<Vec<_>>()).depth)
            .max()
            .unwrap();
        let joined: Vec<i64> = [
            decode_timestamps_with(&a, depth, 1),
            decode_timestamps_with(&b, depth, 1),
        ]
        .concat()
        .into_iter()
        .flatten()
        .collect();
        assert_eq!(joined, vec![-2, -1, 0, 1, 2, 3, 4, 5]);
        let pts: Vec<i64> = [a, b].concat().into_iter().flatten().collect();
        assert!(joined.iter().zip(&pts).all(|(d, p)| d <= p));
    }

    /// Builds a decode order from a presentation order by moving random frames ahead.
    fn reordered(n: usize, swaps: &[(usize, usize)]) -> Vec<i64> {
        let mut v: Vec<i64> = (0..n as i64).map(|i| i * 3 + 7).collect();
        for &(a, len) in swaps {
            let a = a % n;
            let b = (a + 1 + len % 4).min(n - 1);
            let x = v.remove(b);
            v.insert(a, x);
        }
        v
    }

    proptest! {
        #[test]
        fn derived_dts_is_monotonic_and_never_after_pts(
            n in 1usize..200,
            swaps in proptest::collection::vec((0usize..200, 0usize..4), 0..40),
        ) {
            let pts = reordered(n, &swaps);
            let rule = DtsRule::of(&pts);
            let mut d = rule.deriver();
            let dts: Vec<i64> = pts.iter().map(|&p| d.next(p)).collect();
            for w in dts.windows(2) {
                prop_assert!(w[0] <= w[1], "dts went back: {:?}", dts);
            }
            for (d, p) in dts.iter().zip(&pts) {
                prop_assert!(d <= p);
            }
            // The streaming form agrees with the batch form.
            let batch: Vec<i64> = decode_timestamps(&pts.iter().map(|&p| Some(p)).collect::<Vec<_>>())
                .into_iter().flatten().collect();
            prop_assert_eq!(batch, dts);
        }
    }
}
