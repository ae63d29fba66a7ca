//! Decode timestamps for NVENC's packets, computed from the pts of the frames sent.
//!
//! Why: FFmpeg 5.1's NVENC sets `dts = input_pts[n] - B * ticks_per_frame * time_base.num`,
//! a shift of B *ticks*, which is only right when one frame lasts one tick (time base
//! 1/fps). tessera keeps the source time base (1/15360, 1/90000, 1/1000), so the first
//! B-frame comes out with pts < dts and the NUT muxer refuses it. FFmpeg 6.1 replaced that
//! with the rule used here: the dts of packet k is the pts of the k-th frame sent, `B`
//! frames back, and the first `B` packets extrapolate backwards by one frame step.

use std::collections::VecDeque;

/// Gives each packet of one encoder its dts; see the module doc.
#[derive(Debug)]
pub(super) struct NvencDts {
    /// The encoder's reorder delay: its B-frames between references.
    delay: u64,
    /// Pts of the frames sent and not yet used as a dts, in sending order.
    sent: VecDeque<i64>,
    /// Pts of the first frame sent.
    first: Option<i64>,
    /// Frames sent so far.
    sent_count: u64,
    /// One frame's duration in encoder ticks, measured over the first `delay` frames.
    step: Option<i64>,
    /// One frame's duration from the frame rate, for segments shorter than `delay` frames.
    fallback_step: i64,
    /// Packets received so far.
    received: u64,
    /// The last dts given (dts must rise strictly).
    last: Option<i64>,
}

impl NvencDts {
    /// For an encoder with `b_frames` B-frames whose frames last `frame_step` ticks (an
    /// estimate; used only when a segment has fewer frames than `b_frames`).
    pub(super) fn new(b_frames: u32, frame_step: i64) -> Self {
        NvencDts {
            delay: u64::from(b_frames),
            sent: VecDeque::new(),
            first: None,
            sent_count: 0,
            step: None,
            fallback_step: frame_step.max(1),
            received: 0,
            last: None,
        }
    }

    /// Records the pts of a frame sent to the encoder (encoder time base).
    pub(super) fn sent(&mut self, pts: i64) {
        let first = *self.first.get_or_insert(pts);
        self.sent_count += 1;
        if self.step.is_none() && self.delay > 0 && self.sent_count == self.delay + 1 {
            let d = i64::try_from(self.delay).unwrap_or(i64::MAX);
            self.step = Some(((pts - first) / d).max(1));
        }
        self.sent.push_back(pts);
    }

    /// The dts of the next packet, whose pts is `pts`: never above `pts`, always above the
    /// previous one.
    pub(super) fn next(&mut self, pts: i64) -> i64 {
        let k = self.received;
        self.received += 1;
        let candidate = if k >= self.delay {
            self.sent.pop_front().unwrap_or(pts)
        } else {
            let first = self.first.unwrap_or(pts);
            let step = self.step.unwrap_or(self.fallback_step);
            let back = i64::try_from(self.delay - k).unwrap_or(i64::MAX);
            first.saturating_sub(back.saturating_mul(step))
        };
        let mut dts = candidate.min(pts);
        if let Some(last) = self.last {
            if dts <= last {
                dts = last + 1;
            }
        }
        self.last = Some(dts);
        dts
    }
}

/// One frame's duration in ticks of `time_base` at `frame_rate` (1 when either is unknown).
pub(super) fn frame_step(time_base: (i32, i32), frame_rate: Option<(i32, i32)>) -> i64 {
    let (tb_num, tb_den) = (i64::from(time_base.0), i64::from(time_base.1));
    match frame_rate {
        Some((fr_num, fr_den)) if fr_num > 0 && fr_den > 0 && tb_num > 0 && tb_den > 0 => {
            // ticks = (fr_den / fr_num) / (tb_num / tb_den), rounded.
            let num = tb_den * i64::from(fr_den);
            let den = tb_num * i64::from(fr_num);
            ((num + den / 2) / den).max(1)
        }
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVENC's output order with 3 B-frames and no B-references: I0 P4 B1 B2 B3 P8 B5 B6 B7…
    fn nvenc_order(frames: usize) -> Vec<usize> {
        let mut order = vec![0];
        let mut anchor = 0;
        while anchor + 1 < frames {
            let next = (anchor + 4).min(frames - 1);
            order.push(next);
            order.extend(anchor + 1..next);
            anchor = next;
        }
        order
    }

    fn run(frames: usize, tb_step: i64, start: i64) -> Vec<(i64, i64)> {
        let pts: Vec<i64> = (0..frames as i64).map(|i| start + i * tb_step).collect();
        let mut dts = NvencDts::new(3, tb_step);
        for &p in &pts {
            dts.sent(p);
        }
        nvenc_order(frames)
            .into_iter()
            .map(|i| (pts[i], dts.next(pts[i])))
            .collect()
    }

    fn assert_valid(packets: &[(i64, i64)]) {
        for (i, &(pts, dts)) in packets.iter().enumerate() {
            assert!(dts <= pts, "packet {i}: pts {pts} < dts {dts}");
            if i > 0 {
                assert!(dts > packets[i - 1].1, "packet {i}: dts not rising");
            }
        }
    }

    #[test]
    fn dts_is_valid_in_every_time_base() {
        // 1/15360 at 30 fps (512 ticks), 1/90000 at 25 fps, 1/1000 at 24 fps, 1/30.
        for (step, start) in [(512, 153_600), (3600, 900_000), (42, 10_000), (1, 0)] {
            for frames in [1, 2, 3, 4, 5, 7, 8, 9, 60, 250] {
                let p = run(frames, step, start);
                assert_eq!(p.len(), frames);
                assert_valid(&p);
            }
        }
    }

    #[test]
    fn dts_follows_the_sent_frames_three_back() {
        let p = run(9, 512, 0);
        let dts: Vec<i64> = p.iter().map(|&(_, d)| d).collect();
        // First three extrapolate one frame per packet back from the first pts.
        assert_eq!(
            dts,
            vec![-1536, -1024, -512, 0, 512, 1024, 1536, 2048, 2560]
        );
        // The first B-frame (pts 512) is the third packet: FFmpeg 5.1 gave it dts 1021.
        assert_eq!(p[2], (512, -512));
    }

    #[test]
    fn short_segments_use_the_frame_rate_step() {
        let mut d = NvencDts::new(3, 3600);
        d.sent(90_000);
        d.sent(93_600);
        assert_eq!(d.next(90_000), 90_000 - 3 * 3600);
        assert_eq!(d.next(93_600), 90_000 - 2 * 3600);
    }

    #[test]
    fn no_b_frames_means_dts_is_pts() {
        let mut d = NvencDts::new(0, 1);
        for p in [0, 512, 1024] {
            d.sent(p);
            assert_eq!(d.next(p), p);
        }
    }

    #[test]
    fn frame_steps() {
        assert_eq!(frame_step((1, 15360), Some((30, 1))), 512);
        assert_eq!(frame_step((1, 90000), Some((30000, 1001))), 3003);
        assert_eq!(frame_step((1, 1000), Some((24, 1))), 42);
        assert_eq!(frame_step((1, 1000), None), 1);
        assert_eq!(frame_step((0, 0), Some((25, 1))), 1);
    }
}
