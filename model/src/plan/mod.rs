//! Segment planning: pure logic over the probe's packet index.
//!
//! Why: the split points decide both speed (segments encode in parallel) and correctness (every
//! shown frame in exactly one segment). Keeping this pure makes it testable without media files.

use crate::probe::{PacketEntry, Rational, SegmentPlan};

/// Plans segments of about `target_seconds`, cutting at keyframes where one is near the target
/// (within ±50 %), otherwise at the shown frame nearest the target (the worker then decodes
/// from the previous keyframe and drops the pre-roll). Empty when no frame is shown.
///
/// `parallelism` is how many segments are expected to encode at once. A short input that
/// would give fewer segments than that is cut into `parallelism` segments instead, so every
/// worker has one. Otherwise, when the segment count is not a multiple of it, the last
/// `parallelism` segments are halved (into pieces of equal cost, lead-in counted), so the
/// final round of work is short and the workers finish together instead of one of them
/// encoding a whole segment alone at the end.
///
/// O(n log n) in the packet count: a two-hour 60 fps source plans in well under a second.
pub fn plan_segments(
    packets: &[PacketEntry],
    tb: Rational,
    target_seconds: f64,
    parallelism: usize,
) -> Vec<SegmentPlan> {
    plan_segments_busy(packets, tb, target_seconds, parallelism, 0.0)
}

/// [`plan_segments`] when one worker has other work too: `busy_last` is that work in frames
/// of this video (the one-process farm's audio step, which takes the first child a segment
/// frees). A short input's last segment is then that much shorter, so its worker ends it
/// first and the workers still finish together; longer inputs are cut as without it.
pub fn plan_segments_busy(
    packets: &[PacketEntry],
    tb: Rational,
    target_seconds: f64,
    parallelism: usize,
    busy_last: f64,
) -> Vec<SegmentPlan> {
    plan_segments_at_scenes(packets, tb, (target_seconds, parallelism, busy_last), &[])
}

/// [`plan_segments_busy`] (`(target_seconds, parallelism, busy_last)`) where a cut goes to
/// the nearest of `scenes` (the pts of frames that begin a new scene, ascending) within
/// ±50 % of the target length, before a keyframe or any frame. Why: a target-quality
/// segment searches one rate factor, which means something only when the segment holds one
/// kind of picture.
pub fn plan_segments_at_scenes(
    packets: &[PacketEntry],
    tb: Rational,
    (target_seconds, parallelism, busy_last): (f64, usize, f64),
    scenes: &[i64],
) -> Vec<SegmentPlan> {
    let frames = ShownFrames::of(packets);
    let (Some(&first_pts), Some(&last_pts)) = (frames.pts.first(), frames.pts.last()) else {
        return Vec::new();
    };
    let target = tb.ticks(target_seconds.max(0.001)).max(1);
    let decode = DecodeStarts::of(packets);
    let mut starts = frames.starts(target, scenes);
    if parallelism > 1 && starts.len() < parallelism {
        // A short input: aim for one segment per worker, none shorter than a quarter second.
        let share = (last_pts - first_pts + 1) / parallelism as i64;
        if share >= tb.ticks(0.25).max(1) {
            starts = balance::balanced_starts(&frames, &decode, parallelism, busy_last);
        }
    } else if parallelism > 1 && starts.len() > 1 && !starts.len().is_multiple_of(parallelism) {
        let n = starts.len();
        let mut extra = Vec::new();
        for i in n.saturating_sub(parallelism)..n {
            let (a, b) = (
                starts[i],
                starts.get(i + 1).copied().unwrap_or(last_pts + 1),
            );
            // Two pieces of equal cost: the second one first decodes the first as its
            // lead-in. (`busy_last` is not used here: over several rounds the worker that was
            // busy first catches up, and a last piece planned shorter for it was measured to
            // end last as often as before.)
            let (lo, hi) = (
                frames.pts.partition_point(|&p| p < a),
                frames.pts.partition_point(|&p| p < b),
            );
            if let Some(cut) = balance::even_cut(&frames, &decode, lo..hi) {
                extra.push(frames.pts[cut]);
            }
        }
        starts.extend(extra);
        starts.sort_unstable();
        starts.dedup();
    }

    plans_from_starts(packets, &frames, &decode, &starts)
}

/// The segment plans for ascending segment start pts (the first one the first shown frame's).
fn plans_from_starts(
    packets: &[PacketEntry],
    frames: &ShownFrames,
    starts_of_decoding: &DecodeStarts,
    starts: &[i64],
) -> Vec<SegmentPlan> {
    let last_pts = frames.pts.last().copied().unwrap_or(0);
    let mut plans = Vec::with_capacity(starts.len());
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(last_pts + 1);
        let lo = frames.pts.partition_point(|&p| p < start);
        let hi = frames.pts.partition_point(|&p| p < end);
        let in_range = &frames.index[lo..hi];
        let min_idx = in_range.iter().copied().min().unwrap_or(0);
        let max_idx = in_range.iter().copied().max().unwrap_or(0);
        // Each frame's own start: a leading picture of an open GOP needs the GOP before.
        let first_packet = in_range
            .iter()
            .map(|&i| starts_of_decoding.before(i))
            .min()
            .unwrap_or(0);
        let starts_on_keyframe = packets[first_packet].pts == start && first_packet == min_idx;
        plans.push(SegmentPlan {
            index: i as u32,
            start_pts: start,
            end_pts: end,
            first_packet,
            last_packet: max_idx,
            frames: in_range.len() as u64,
            starts_on_keyframe,
            first_frame_pts: frames.pts[lo..hi].first().copied(),
            last_frame_pts: frames.pts[lo..hi].last().copied(),
        });
    }
    plans
}

/// The shown frames in presentation order, with their decode indices and the keyframes' pts.
struct ShownFrames {
    /// Presentation timestamps, ascending.
    pts: Vec<i64>,
    /// Decode index of each entry of `pts`.
    index: Vec<usize>,
    /// Presentation timestamps of the shown keyframes, ascending.
    keys: Vec<i64>,
}

impl ShownFrames {
    fn of(packets: &[PacketEntry]) -> Self {
        let mut shown: Vec<(i64, usize)> = packets
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.discard)
            .map(|(i, p)| (p.pts, i))
            .collect();
        shown.sort_unstable();
        let keys = shown
            .iter()
            .filter(|&&(_, i)| packets[i].key)
            .map(|&(pts, _)| pts)
            .collect();
        ShownFrames {
            pts: shown.iter().map(|&(pts, _)| pts).collect(),
            index: shown.iter().map(|&(_, i)| i).collect(),
            keys,
        }
    }

    /// Segment start times for segments of about `target` ticks: each cut at the scene change
    /// nearest the target length within ±50 %, else the keyframe, else the frame.
    fn starts(&self, target: i64, scenes: &[i64]) -> Vec<i64> {
        let (first_pts, last_pts) = (self.pts[0], self.pts[self.pts.len() - 1]);
        let mut starts = vec![first_pts];
        let mut start = first_pts;
        while last_pts - start >= target + target / 2 {
            let want = start + target;
            let (lo, hi) = (
                (start + 1).max(start + target / 2),
                start + target + target / 2,
            );
            let key_cut =
                nearest(scenes, want, lo, hi).or_else(|| nearest(&self.keys, want, lo, hi));
            match key_cut.or_else(|| nearest(&self.pts, want, start + 1, i64::MAX)) {
                Some(c) if c > start && c <= last_pts => {
                    starts.push(c);
                    start = c;
                }
                _ => break,
            }
        }
        starts
    }
}

/// The pts of the shown frames at `indices` (presentation order, ascending; those past the
/// last shown frame are left out): a scene detector's frame numbers as the planner's cuts.
pub fn shown_pts(packets: &[PacketEntry], indices: &[u64]) -> Vec<i64> {
    let frames = ShownFrames::of(packets);
    (indices.iter())
        .filter_map(|&i| frames.pts.get(usize::try_from(i).ok()?).copied())
        .collect()
}

/// The value of ascending `sorted` nearest to `want` within `lo..=hi` (ties: the smaller).
fn nearest(sorted: &[i64], want: i64, lo: i64, hi: i64) -> Option<i64> {
    let i = sorted.partition_point(|&p| p < want);
    let below = i
        .checked_sub(1)
        .map(|j| sorted[j])
        .filter(|&p| p >= lo && p <= hi);
    let above = sorted.get(i).copied().filter(|&p| p >= lo && p <= hi);
    match (below, above) {
        (Some(b), Some(a)) => Some(if want - b <= a - want { b } else { a }),
        (b, a) => b.or(a),
    }
}

/// Where decoding may start for a frame at a given decode index: the last clean keyframe at or
/// before it, or a later recovery point whose picture is whole again before it.
///
/// A frame decoded after a keyframe but shown before it is a leading picture of an open GOP
/// (MPEG-1/2 B-frames after an open GOP's I-frame, H.264 B-frames after a non-IDR I-frame,
/// HEVC RASL pictures): it refers to the GOP before, so its decoding starts at the keyframe
/// before that one. Starting at its own keyframe, the decoder drops it and the segment
/// comes out short. (A closed GOP's leading pictures would decode from their keyframe; the
/// earlier start costs one GOP of lead-in and is right for both.)
struct DecodeStarts {
    /// For each decode index, the last clean keyframe at or before it (0 when none), or the
    /// one before that when the packet is a leading picture of it.
    last_key: Vec<usize>,
    /// Recovery points as (first decode index that is correct, the point's index), sorted,
    /// with the running maximum of the point's index.
    recovered: Vec<(usize, usize)>,
}

impl DecodeStarts {
    fn of(packets: &[PacketEntry]) -> Self {
        let (mut last, mut before_last) = (0, 0);
        let last_key = packets
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if p.key && i > 0 {
                    before_last = last;
                    last = i;
                }
                if p.pts < packets[last].pts {
                    before_last
                } else {
                    last
                }
            })
            .collect();
        // One frame of margin past the count the bitstream gives.
        let mut recovered: Vec<(usize, usize)> = packets
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.recovery.map(|c| (i + c as usize + 1, i)))
            .collect();
        recovered.sort_unstable();
        let mut best = 0;
        for r in &mut recovered {
            best = best.max(r.1);
            r.1 = best;
        }
        DecodeStarts {
            last_key,
            recovered,
        }
    }

    fn before(&self, index: usize) -> usize {
        let key = self.last_key.get(index).copied().unwrap_or(0);
        let n = self.recovered.partition_point(|&(ready, _)| ready <= index);
        let recovery = n.checked_sub(1).map(|k| self.recovered[k].1).unwrap_or(0);
        key.max(recovery)
    }
}

/// The timestamp offset that makes every internal timestamp non-negative.
///
/// Why: intermediate NUT files must not hold negative timestamps (the muxer would shift them and
/// lose the source's exact times), and encoders emit dts a few frames before the first pts.
/// Adding this bias (and subtracting it on read) keeps source timestamps exact end to end.
pub fn timestamp_bias(packets: &[PacketEntry], tb: Rational) -> i64 {
    let min = packets.iter().map(|p| p.pts.min(p.dts)).min().unwrap_or(0);
    // Ten seconds of headroom covers any encoder's reorder delay.
    (-min).max(0) + tb.ticks(10.0)
}

mod balance;

mod package;
pub use package::{frames_at_times, plan_package_segments, PackagePlan};

#[cfg(test)]
mod tests;
