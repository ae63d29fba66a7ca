//! Planning for a streaming package: farm segments that are whole numbers of media segments.
//!
//! Why: every rendition of a package must start a media segment with an IDR at the same
//! frame, so players switch cleanly. A farm segment always starts with an IDR; cutting the
//! farm only at media segment starts means no farm cut ever adds a keyframe (or a short
//! media segment) inside a media segment.

use serde::{Deserialize, Serialize};

use super::{plans_from_starts, DecodeStarts, ShownFrames};
use crate::probe::{PacketEntry, Rational, SegmentPlan};

/// A package's plan: the farm segments and the media segment starts inside them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackagePlan {
    /// The farm segments (each starts at one of `media_starts`).
    pub segments: Vec<SegmentPlan>,
    /// Pts (video time base) of the first frame of every media segment, ascending: the
    /// first shown frame at or after each multiple of the media segment length, counted from
    /// the first shown frame. These frames are encoded as IDRs in every rendition.
    pub media_starts: Vec<i64>,
}

/// Plans media segments of `media_seconds` and farm segments of about `target_seconds`
/// made of whole media segments; short inputs get at least `parallelism` farm segments when
/// they have that many media segments. Empty when no frame is shown.
pub fn plan_package_segments(
    packets: &[PacketEntry],
    tb: Rational,
    target_seconds: f64,
    media_seconds: f64,
    parallelism: usize,
) -> PackagePlan {
    let frames = ShownFrames::of(packets);
    let media_starts = media_starts(&frames.pts, tb, media_seconds);
    if media_starts.is_empty() {
        return PackagePlan {
            segments: Vec::new(),
            media_starts,
        };
    }
    let n = media_starts.len();
    let workers = parallelism.max(1);
    let per_farm = (target_seconds / media_seconds.max(1e-3)).round().max(1.0) as usize;
    // As many farm segments as the target length gives, rounded up to a multiple of the
    // workers so the last round keeps every worker busy (5 equal segments on 2 workers
    // leave one idle for a fifth of the job); sizes differ by at most one media segment.
    let mut count = n.div_ceil(per_farm).max(workers.min(n));
    if !count.is_multiple_of(workers) {
        count = (count / workers + 1) * workers;
    }
    let count = count.min(n);
    let starts: Vec<i64> = (0..count).map(|i| media_starts[i * n / count]).collect();
    PackagePlan {
        segments: plans_from_starts(packets, &frames, &DecodeStarts::of(packets), &starts),
        media_starts,
    }
}

/// The first shown frame at or after `first + k * seconds` for k = 0, 1, ... (each
/// boundary computed from k, not by adding, so rounding never drifts).
fn media_starts(sorted_pts: &[i64], tb: Rational, seconds: f64) -> Vec<i64> {
    let (Some(&first), Some(&last)) = (sorted_pts.first(), sorted_pts.last()) else {
        return Vec::new();
    };
    let mut starts = vec![first];
    for k in 1u64.. {
        // Exact in integers: k * seconds in ticks, rounded up so a frame exactly on the
        // boundary starts the segment.
        let at = first + ticks_ceil(tb, k as f64 * seconds);
        if at > last {
            break;
        }
        let i = sorted_pts.partition_point(|&p| p < at);
        match sorted_pts.get(i) {
            Some(&p) if p > *starts.last().unwrap_or(&first) => starts.push(p),
            Some(_) => {}
            None => break,
        }
    }
    starts
}

/// For each time (seconds from the first shown frame), the pts of the first shown frame at
/// or after it; a time past the last frame gets the last frame. With the span from the first
/// shown frame to the last, in seconds. Empty when no frame is shown.
///
/// Why: a package's poster and thumbnails are taken from these frames by the segment
/// encodes that own them.
pub fn frames_at_times(packets: &[PacketEntry], tb: Rational, times: &[f64]) -> (Vec<i64>, f64) {
    let frames = ShownFrames::of(packets);
    let (Some(&first), Some(&last)) = (frames.pts.first(), frames.pts.last()) else {
        return (Vec::new(), 0.0);
    };
    let span = tb.seconds(last - first);
    let picks = times
        .iter()
        .map(|&t| {
            let at = first + ticks_ceil(tb, t.max(0.0));
            let i = frames.pts.partition_point(|&p| p < at);
            frames.pts.get(i).copied().unwrap_or(last)
        })
        .collect();
    (picks, span)
}

fn ticks_ceil(tb: Rational, seconds: f64) -> i64 {
    let exact = seconds * f64::from(tb.den) / f64::from(tb.num.max(1));
    // A hair below an integer is float noise of an exact boundary (6 s at 1/25 is 150.0).
    (exact - 1e-6).ceil() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `n` frames in decode order with B-frame pairs (I P B B ...) and a keyframe every
    /// `key_every` frames in presentation order.
    fn packets_with_keys(n: usize, key_every: usize) -> Vec<PacketEntry> {
        let n = n as i64;
        let mut order = Vec::new();
        let mut j = 0;
        while j < n {
            let anchor = (j + 2).min(n - 1);
            order.push(anchor);
            order.extend(j..anchor);
            j = anchor + 1;
        }
        order
            .iter()
            .enumerate()
            .map(|(d, &pts)| PacketEntry {
                pts,
                dts: d as i64 - 2,
                key: pts % key_every as i64 == 0,
                discard: false,
                recovery: None,
            })
            .collect()
    }

    #[test]
    fn farm_segments_are_whole_media_segments() {
        // 25 fps, 30 s, a keyframe every 4 s (which the package plan does not follow).
        let packets = packets_with_keys(750, 100);
        let tb = Rational::new(1, 25);
        let p = plan_package_segments(&packets, tb, 12.0, 6.0, 1);
        assert_eq!(p.media_starts, [0, 150, 300, 450, 600]);
        let starts: Vec<i64> = p.segments.iter().map(|s| s.start_pts).collect();
        assert_eq!(starts, [0, 150, 450]);
        assert_eq!(p.segments.iter().map(|s| s.frames).sum::<u64>(), 750);
        // Two workers on 30 s asking for 60 s segments: one each, whole media segments.
        let p = plan_package_segments(&packets, tb, 60.0, 6.0, 2);
        let starts: Vec<i64> = p.segments.iter().map(|s| s.start_pts).collect();
        assert_eq!(starts, [0, 300]);
    }

    #[test]
    fn farm_segments_come_in_rounds_of_the_workers() {
        // 60 s at 30 fps in 6 s media segments, 12 s farm segments, 2 workers: not 5
        // segments of 12 s (the fifth alone) but 6 of 6 or 12 s, 30 s of work each.
        let packets = packets_with_keys(1800, 250);
        let p = plan_package_segments(&packets, Rational::new(1, 30), 12.0, 6.0, 2);
        let frames: Vec<u64> = p.segments.iter().map(|s| s.frames).collect();
        assert_eq!(frames, [180, 360, 360, 180, 360, 360]);
        let p = plan_package_segments(&packets, Rational::new(1, 30), 12.0, 6.0, 3);
        assert_eq!(p.segments.len(), 6);
        // Fewer media segments than workers: one each.
        let p = plan_package_segments(&packets, Rational::new(1, 30), 12.0, 20.0, 4);
        assert_eq!(p.segments.len(), 3);
    }

    #[test]
    fn ntsc_boundaries_do_not_drift() {
        // 29.97 fps in 1/30000: frame n at n * 1001.
        let packets = packets_with_keys(1800, 60).into_iter().map(|mut p| {
            p.pts *= 1001;
            p.dts *= 1001;
            p
        });
        let packets: Vec<_> = packets.collect();
        let p = plan_package_segments(&packets, Rational::new(1, 30000), 6.0, 6.0, 1);
        // 6 s = 179.82 frames: the boundaries are frames 180, 360, 540, ... (k*6 s rounded up).
        let frames: Vec<i64> = p.media_starts.iter().map(|t| t / 1001).collect();
        assert_eq!(&frames[..5], &[0, 180, 360, 540, 720]);
        assert_eq!(frames[9], 1619);
    }

    #[test]
    fn still_times_pick_the_next_frame_and_clamp_to_the_last() {
        let packets = packets_with_keys(250, 50);
        let (picks, span) = frames_at_times(
            &packets,
            Rational::new(1, 25),
            &[0.0, 2.0, 2.01, 9.96, 100.0],
        );
        assert_eq!(picks, [0, 50, 51, 249, 249]);
        assert!((span - 9.96).abs() < 1e-9);
        assert_eq!(
            frames_at_times(&[], Rational::new(1, 25), &[1.0]).0,
            Vec::<i64>::new()
        );
    }

    proptest! {
        #[test]
        fn every_frame_once_and_every_farm_cut_a_media_start(
            n in 1usize..2000, key_every in 1usize..300, den in 1i32..121,
            media in 1.0f64..12.0, target in 1.0f64..40.0, par in 1usize..9,
        ) {
            let packets = packets_with_keys(n, key_every);
            let p = plan_package_segments(&packets, Rational::new(1, den), target, media, par);
            prop_assert_eq!(p.segments.iter().map(|s| s.frames).sum::<u64>(), n as u64);
            for s in &p.segments {
                prop_assert!(p.media_starts.binary_search(&s.start_pts).is_ok());
            }
            let full = p.media_starts.len() >= par;
            prop_assert!(!full || p.segments.len().is_multiple_of(par) || p.segments.len() == p.media_starts.len());
            for w in p.media_starts.windows(2) {
                prop_assert!(w[0] < w[1]);
            }
        }
    }
}
