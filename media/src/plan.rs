//! Segment planning: pure logic over the probe's packet index.
//!
//! Why: the split points decide both speed (segments encode in parallel) and correctness (every
//! shown frame in exactly one segment). Keeping this pure makes it testable without media files.

use crate::types::{PacketEntry, Rational, SegmentPlan};

/// Plans segments of about `target_seconds`, cutting at keyframes where one is near the target
/// (within ±50 %), otherwise at the shown frame nearest the target (the worker then decodes
/// from the previous keyframe and drops the pre-roll). Empty when no frame is shown.
///
/// `parallelism` is how many segments are expected to encode at once. When the segment count
/// is not a multiple of it, the last `parallelism` segments are halved, so the final round of
/// work is short and the workers finish together instead of one of them encoding a whole
/// segment alone at the end.
pub fn plan_segments(
    packets: &[PacketEntry],
    tb: Rational,
    target_seconds: f64,
    parallelism: usize,
) -> Vec<SegmentPlan> {
    // Shown frames in presentation order: (pts, decode index, key).
    let mut shown: Vec<(i64, usize, bool)> = packets
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.discard)
        .map(|(i, p)| (p.pts, i, p.key))
        .collect();
    if shown.is_empty() {
        return Vec::new();
    }
    shown.sort_by_key(|&(pts, idx, _)| (pts, idx));
    let first_pts = shown[0].0;
    let last_pts = shown[shown.len() - 1].0;
    let target = tb.ticks(target_seconds.max(0.001)).max(1);

    let mut starts = vec![first_pts];
    loop {
        let start = *starts.last().unwrap_or(&first_pts);
        if last_pts - start < target + target / 2 {
            break;
        }
        let want = start + target;
        let (lo, hi) = (start + target / 2, start + target + target / 2);
        let key_cut = shown
            .iter()
            .filter(|&&(pts, _, key)| key && pts > start && pts >= lo && pts <= hi)
            .min_by_key(|&&(pts, _, _)| (pts - want).abs())
            .map(|&(pts, _, _)| pts);
        let cut = key_cut.or_else(|| {
            shown
                .iter()
                .filter(|&&(pts, _, _)| pts > start)
                .min_by_key(|&&(pts, _, _)| (pts - want).abs())
                .map(|&(pts, _, _)| pts)
        });
        match cut {
            Some(c) if c > start && c <= last_pts => starts.push(c),
            _ => break,
        }
    }

    let n = starts.len();
    if parallelism > 1 && n > 1 && n % parallelism != 0 {
        let mut extra = Vec::new();
        for i in n.saturating_sub(parallelism)..n {
            let (a, b) = (
                starts[i],
                starts.get(i + 1).copied().unwrap_or(last_pts + 1),
            );
            let mid = a + (b - a) / 2;
            if let Some(&(pts, _, _)) = shown
                .iter()
                .filter(|&&(pts, _, _)| pts > a && pts < b)
                .min_by_key(|&&(pts, _, _)| (pts - mid).abs())
            {
                extra.push(pts);
            }
        }
        starts.extend(extra);
        starts.sort_unstable();
        starts.dedup();
    }

    let mut plans = Vec::with_capacity(starts.len());
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(last_pts + 1);
        let in_range: Vec<&(i64, usize, bool)> = shown
            .iter()
            .filter(|&&(pts, _, _)| pts >= start && pts < end)
            .collect();
        let min_idx = in_range.iter().map(|f| f.1).min().unwrap_or(0);
        let max_idx = in_range.iter().map(|f| f.1).max().unwrap_or(0);
        // Decoding starts at the last keyframe at or before the first-decoded frame of the
        // range; with no keyframe before it, at the first packet of the stream.
        let first_packet = (0..=min_idx).rev().find(|&j| packets[j].key).unwrap_or(0);
        let starts_on_keyframe = packets[first_packet].pts == start && first_packet == min_idx;
        plans.push(SegmentPlan {
            index: i as u32,
            start_pts: start,
            end_pts: end,
            first_packet,
            last_packet: max_idx,
            frames: in_range.len() as u64,
            starts_on_keyframe,
        });
    }
    plans
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

#[cfg(test)]
mod tests {
    use super::*;

    const TB: Rational = Rational { num: 1, den: 30 };

    /// CFR stream in decode order with one keyframe every `gop` frames and B-frame reordering
    /// (I P B B pattern: decode order I0 P3 B1 B2 P6 B4 B5 ...).
    fn stream(frames: i64, gop: i64, open_gop: bool) -> Vec<PacketEntry> {
        let mut out = Vec::new();
        let mut pts_order: Vec<i64> = Vec::new();
        let mut g0 = 0;
        while g0 < frames {
            let gend = (g0 + gop).min(frames);
            pts_order.push(g0);
            let mut j = g0 + 1;
            while j < gend {
                let anchor = (j + 2).min(gend - 1);
                pts_order.push(anchor);
                pts_order.extend(j..anchor);
                j = anchor + 1;
            }
            g0 = gend;
        }
        for (d, &p) in pts_order.iter().enumerate() {
            out.push(PacketEntry {
                pts: p,
                dts: d as i64 - 2,
                key: p % gop == 0,
                discard: false,
            });
        }
        if open_gop {
            // Move the two frames before every keyframe (after the first) behind it in decode
            // order: leading pictures of an open GOP.
            let mut reordered = Vec::new();
            let mut held: Vec<PacketEntry> = Vec::new();
            for p in out {
                if p.pts % gop >= gop - 2 && p.pts > 0 && p.pts + 2 < frames {
                    held.push(p);
                } else {
                    reordered.push(p);
                    if p.key {
                        reordered.append(&mut held);
                    }
                }
            }
            reordered.append(&mut held);
            return reordered;
        }
        out
    }

    fn check_partition(packets: &[PacketEntry], plans: &[SegmentPlan]) {
        for p in packets.iter().filter(|p| !p.discard) {
            let owners: Vec<_> = plans
                .iter()
                .filter(|s| p.pts >= s.start_pts && p.pts < s.end_pts)
                .collect();
            assert_eq!(
                owners.len(),
                1,
                "frame pts {} owned by {}",
                p.pts,
                owners.len()
            );
            let seg = owners[0];
            let idx = packets.iter().position(|q| q == p).unwrap();
            assert!(idx >= seg.first_packet && idx <= seg.last_packet);
            assert!(packets[seg.first_packet].key || seg.first_packet == 0);
        }
        let shown = packets.iter().filter(|p| !p.discard).count() as u64;
        assert_eq!(plans.iter().map(|s| s.frames).sum::<u64>(), shown);
        for w in plans.windows(2) {
            assert_eq!(w[0].end_pts, w[1].start_pts);
        }
    }

    #[test]
    fn closed_gop_cuts_on_keyframes() {
        let pk = stream(300, 30, false);
        let plans = plan_segments(&pk, TB, 2.0, 1);
        check_partition(&pk, &plans);
        assert_eq!(plans.len(), 5);
        assert!(plans.iter().all(|s| s.starts_on_keyframe));
        assert!(plans.iter().all(|s| s.start_pts % 30 == 0));
    }

    #[test]
    fn open_gop_leading_frames_belong_to_previous_segment() {
        let pk = stream(300, 30, true);
        let plans = plan_segments(&pk, TB, 2.0, 1);
        check_partition(&pk, &plans);
        // the leading frames of keyframe 60 (pts 58, 59) are decoded after it: segment 0's
        // chunk must extend past the keyframe.
        let s0 = &plans[0];
        assert_eq!(s0.end_pts, 60);
        assert!(pk[s0.last_packet].pts < 60);
        let key60 = pk.iter().position(|p| p.pts == 60).unwrap();
        assert!(s0.last_packet > key60);
    }

    #[test]
    fn sparse_keyframes_cut_between_keyframes_with_preroll() {
        let pk = stream(600, 600, false); // one keyframe in 20 s
        let plans = plan_segments(&pk, TB, 5.0, 1);
        check_partition(&pk, &plans);
        assert_eq!(plans.len(), 4);
        assert!(plans[1..]
            .iter()
            .all(|s| s.first_packet == 0 && !s.starts_on_keyframe));
    }

    #[test]
    fn edit_list_discard_packets_are_never_owned() {
        let mut pk = stream(120, 30, false);
        for p in pk.iter_mut() {
            p.pts -= 10;
            p.dts -= 10;
            p.discard = p.pts < 0;
        }
        let plans = plan_segments(&pk, TB, 1.0, 1);
        check_partition(&pk, &plans);
        assert_eq!(plans[0].start_pts, 0);
        assert_eq!(
            plans[0].first_packet, 0,
            "decoding starts at the discarded keyframe"
        );
    }

    #[test]
    fn short_tail_merges_and_vfr_is_fine() {
        let mut pk = stream(100, 30, false);
        // variable frame rate: stretch the second half
        for p in pk.iter_mut() {
            if p.pts > 50 {
                p.pts = 50 + (p.pts - 50) * 3;
            }
        }
        let plans = plan_segments(&pk, TB, 1.0, 1);
        check_partition(&pk, &plans);
        let last = plans.last().unwrap();
        assert!(last.end_pts - last.start_pts >= 15);
        assert!(plan_segments(&[], TB, 1.0, 2).is_empty());
    }

    #[test]
    fn tail_segments_are_halved_when_rounds_are_uneven() {
        let pk = stream(420, 60, false); // 14 s, keyframes every 2 s: 7 segments
        let whole = plan_segments(&pk, TB, 2.0, 1);
        assert_eq!(whole.len(), 7);
        let split = plan_segments(&pk, TB, 2.0, 2);
        check_partition(&pk, &split);
        assert_eq!(split.len(), 9);
        assert_eq!(&split[..5], &whole[..5]);
        assert!(split[5..].iter().all(|s| s.end_pts - s.start_pts == 30));
        // an even count is left alone
        assert_eq!(plan_segments(&pk, TB, 2.0, 7), whole);
    }

    #[test]
    fn bias_makes_timestamps_non_negative() {
        let pk = [PacketEntry {
            pts: -5,
            dts: -7,
            key: true,
            discard: true,
        }];
        assert_eq!(timestamp_bias(&pk, TB), 7 + 300);
    }
}
