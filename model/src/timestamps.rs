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
pub fn smallest_step(ascending: &[i64]) -> i64 {
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

/// Where a stream's timestamps start over: recordings joined byte for byte (two MPEG-TS
/// captures appended), each starting at the muxer's default time. Rewrites `pts` (decode
/// order) so that each later run follows the one before by one frame interval, and returns
/// the decode index where each run begins with how far (ticks) its timestamps went back.
///
/// Why: sorted by presentation time the two runs would interleave (frames of the second
/// recording shown between those of the first); kept in the order they were recorded, each
/// with its own spacing, the output plays them one after the other, as the file does. A
/// pts is taken as a jump back when it lies more than `threshold` ticks before the largest
/// pts so far (B-frame reordering moves pts back by a few frames, never by a second).
pub fn rejoin_runs(pts: &mut [i64], threshold: i64) -> Vec<(usize, i64)> {
    // The runs: a new one begins where a pts lies far before the largest of the current run.
    let mut jumps = Vec::new();
    let mut run_max: Option<i64> = None;
    for (i, &p) in pts.iter().enumerate() {
        match run_max {
            Some(m) if p < m - threshold => {
                jumps.push((i, m - p));
                run_max = Some(p);
            }
            Some(m) => run_max = Some(m.max(p)),
            None => run_max = Some(p),
        }
    }
    // Each later run moves so its earliest frame follows the run before by that run's last
    // frame interval.
    let mut starts: Vec<usize> = jumps.iter().map(|&(i, _)| i).collect();
    starts.push(pts.len());
    let mut prev: Option<(i64, i64)> = None; // (largest pts, last interval) of the run before
    let mut a = 0;
    for &b in &starts {
        let run = &mut pts[a..b];
        let (Some(&lo), Some(&hi)) = (run.iter().min(), run.iter().max()) else {
            continue;
        };
        let offset = prev.map_or(0, |(max, step)| max + step - lo);
        for p in run.iter_mut() {
            *p += offset;
        }
        let below = run.iter().filter(|&&p| p < hi + offset).max().copied();
        let step = below.map_or(1, |s| (hi + offset - s).max(1));
        prev = Some((hi + offset, step));
        a = b;
    }
    jumps
}

/// How far back a pts must lie to start a run of its own (see [`rejoin_runs`]): `at_least`
/// (a second), or sixteen typical frame intervals when those are longer, so a slow source
/// (a time-lapse at 1 fps with B-frames) never takes its reordering for a jump.
pub fn jump_threshold(pts: &[i64], at_least: i64) -> i64 {
    let mut sorted = pts.to_vec();
    sorted.sort_unstable();
    let mut steps: Vec<i64> = sorted
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|d| *d > 0)
        .collect();
    if steps.is_empty() {
        return at_least;
    }
    let mid = steps.len() / 2;
    let (_, median, _) = steps.select_nth_unstable(mid);
    at_least.max(median.saturating_mul(16))
}

/// Whether two of `pts` are equal (see [`separate_equal_pts`]).
pub fn has_equal_pts(pts: &[i64]) -> bool {
    let mut sorted = pts.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).any(|w| w[0] == w[1])
}

/// Moves frames that share a presentation time apart: in presentation order, ties in the
/// order `tie` gives (the decoder's display order; decode order when it is equal), each pts
/// becomes at least one tick after the one before. Returns how many moved.
///
/// Why: a container with a coarse time base (Matroska's 1 ms) can give two frames one
/// timestamp (a variable-rate capture that moved a frame onto its neighbour). Every frame is
/// kept, but no muxer takes two packets with one decode time, and the range gate and the
/// plan must agree on each frame's time; a tick apart, both hold and the frame plays where
/// the source shows it, within a tick.
pub fn separate_equal_pts(pts: &mut [i64], tie: impl Fn(usize) -> usize) -> usize {
    let mut order: Vec<usize> = (0..pts.len()).collect();
    order.sort_by_key(|&i| (pts[i], tie(i), i));
    let (mut moved, mut prev) = (0, None::<i64>);
    for i in order {
        if let Some(p) = prev.filter(|&p| pts[i] <= p) {
            pts[i] = p + 1;
            moved += 1;
        }
        prev = Some(pts[i]);
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn frames_at_one_time_move_a_tick_apart() {
        // Decode order I P B B with the two B-frames at one time, then one that collides
        // with the moved one.
        let mut pts = vec![0, 99, 33, 33, 34, 132];
        assert!(has_equal_pts(&pts));
        assert_eq!(separate_equal_pts(&mut pts, |_| 0), 2);
        assert_eq!(pts, vec![0, 99, 33, 34, 35, 132]);
        // The decoder shows the later-decoded one of the pair first: it keeps the time.
        let mut shown = vec![0, 99, 33, 33, 132];
        let display = [0, 3, 2, 1, 4];
        separate_equal_pts(&mut shown, |i| display[i]);
        assert_eq!(shown, vec![0, 99, 34, 33, 132]);
        let mut fine = vec![0, 3, 1, 2];
        assert!(!has_equal_pts(&fine));
        assert_eq!(separate_equal_pts(&mut fine, |_| 0), 0);
        assert_eq!(fine, vec![0, 3, 1, 2]);
    }

    proptest! {
        #[test]
        fn separated_pts_give_strictly_rising_dts(
            raw in proptest::collection::vec(0i64..40, 1..120),
        ) {
            // Coarse times with many collisions, in any decode order.
            let mut pts = raw.clone();
            separate_equal_pts(&mut pts, |i| i % 3);
            let mut sorted = pts.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), pts.len());
            // No frame moves earlier, and the order of distinct times is kept.
            for (i, (&a, &b)) in raw.iter().zip(&pts).enumerate() {
                prop_assert!(b >= a, "frame {} moved earlier", i);
                for (&c, &d) in raw.iter().zip(&pts) {
                    if a < c {
                        prop_assert!(b < d);
                    }
                }
            }
            let rule = DtsRule::of(&pts);
            let mut d = rule.deriver();
            let dts: Vec<i64> = pts.iter().map(|&p| d.next(p)).collect();
            for w in dts.windows(2) {
                prop_assert!(w[0] < w[1], "dts not rising: {:?}", dts);
            }
            for (d, p) in dts.iter().zip(&pts) {
                prop_assert!(d <= p);
            }
        }
    }

    #[test]
    fn joined_recordings_play_one_after_the_other() {
        // Two runs with B-frame reordering, the second starting over at 0.
        let mut pts = vec![0, 3, 1, 2, 6, 4, 5, 0, 3, 1, 2];
        let jumps = rejoin_runs(&mut pts, 4);
        assert_eq!(jumps, vec![(7, 6)]);
        assert_eq!(pts, vec![0, 3, 1, 2, 6, 4, 5, 7, 10, 8, 9]);
        // A run whose first packet is not its first frame still follows as a whole.
        let mut lead = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 2, 0, 1];
        assert_eq!(rejoin_runs(&mut lead, 5), vec![(10, 7)]);
        assert_eq!(&lead[10..], &[12, 10, 11]);
        // Reordering alone is never a jump.
        let mut plain = vec![0, 30, 10, 20, 60, 40, 50];
        assert!(rejoin_runs(&mut plain, 45).is_empty());
        // A time-lapse at 1 fps (ticks of 1/1000 s) reorders by 2 s: no jump at 1 s.
        let slow: Vec<i64> = vec![0, 3000, 1000, 2000, 6000, 4000, 5000];
        assert_eq!(jump_threshold(&slow, 1000), 16_000);
        assert!(rejoin_runs(&mut slow.clone(), jump_threshold(&slow, 1000)).is_empty());
        // At 25 fps in 1/90000 a second stays the threshold.
        let fast: Vec<i64> = (0..100).map(|k| k * 3600).collect();
        assert_eq!(jump_threshold(&fast, 90_000), 90_000);
        assert_eq!(plain, vec![0, 30, 10, 20, 60, 40, 50]);
    }

    proptest! {
        #[test]
        fn rejoined_runs_never_overlap(
            runs in proptest::collection::vec((proptest::bool::ANY, 1usize..50), 1..5),
        ) {
            // Each run: frames 10 ticks apart, reordered in pairs, starting either after the
            // run before or at 0 again when the run before ends at 300 or later (a jump back of
            // at least 200 ticks).
            let (mut pts, mut starts) = (Vec::new(), Vec::new());
            let mut end = 0i64;
            for &(over, n) in &runs {
                let start = if over && end >= 200 + 100 { 0 } else { end + 10 };
                let mut run: Vec<i64> = (0..n as i64).map(|k| start + 10 * k).collect();
                for pair in run.chunks_mut(2) {
                    pair.reverse();
                }
                end = *run.iter().max().unwrap();
                starts.push(pts.len());
                pts.extend(run);
            }
            let before = pts.clone();
            rejoin_runs(&mut pts, 100);
            let mut sorted = pts.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), pts.len(), "two frames at one time: {:?}", pts);
            for (k, &a) in starts.iter().enumerate() {
                let b = starts.get(k + 1).copied().unwrap_or(pts.len());
                for i in a..b {
                    prop_assert_eq!(pts[i] - pts[a], before[i] - before[a]);
                }
            }
        }
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

/// The presentation timestamp of every video packet, in decode order, derived from the
/// decoder's output order (see the module doc). Crosses to the split compactly.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DerivedPts {
    /// Per packet in decode order (the packets the probe indexed), in the video time base.
    #[serde(with = "crate::index_codec::timestamps")]
    pub pts: Vec<i64>,
    /// Packets the decoder gave no picture for: decoded, never shown.
    #[serde(default)]
    pub hidden: Vec<u32>,
}
