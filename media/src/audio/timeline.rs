//! Where each decoded audio frame belongs on the output's timeline: the rule that keeps a
//! transcoded track in sync with the video at every point of the file, not only at its start.
//!
//! Why: a source's audio is not always one unbroken run of samples. Two recordings joined byte
//! for byte each bring their own encoder priming and padding, so the second one's first frame
//! starts before the first one's last frame ends (an overlap); a capture that lost packets
//! leaves a hole (a gap); recordings whose timestamps start over jump back. Samples laid end
//! to end from the first one turn every overlap into a lag (and every gap into a lead) for the
//! rest of the file. So each frame is placed at its own timestamp:
//!
//! - within [`TOLERANCE_SECONDS`] of where the samples so far end, it follows them as it is
//!   (timestamp rounding never moves a sample);
//! - further on, the hole before it is filled with silence;
//! - earlier, the samples it shares with what is already laid are dropped: from the end of
//!   what is laid while those are still held back from the encoder (up to [`HOLD_SECONDS`]),
//!   else from the frame's start. Why the old end first: at a join the new recording's sound
//!   goes with the pictures shown then (the old recording's pictures have ended; what runs
//!   over is its tail and its encoder's padding, the new one's start is its first words);
//! - a jump back of a second or more starts a new run, which is moved by the video's shift
//!   for that run (the probe's `run_shifts_seconds`: each recording keeps its own sync), or,
//!   when the video has no such run, laid right after the samples so far.
//!
//! The first frame fixes the mapping: the transcoder lays it where the decoder stamps it (plus
//! the job's bias), and that distance is kept for every later frame, so a constant offset never
//! reads as a gap.

/// How far a frame may sit from where the samples so far end before it is moved (s): well
/// under a frame of 60 fps video, well over timestamp rounding (1 ms in Matroska and FLV).
pub const TOLERANCE_SECONDS: f64 = 0.010;

/// A jump back of this much or more starts a new run (s): the probe's rule for audio runs.
pub const JUMP_SECONDS: f64 = 1.0;

/// How much of the laid sound is held back from the encoder so an overlap can still cut it
/// (s): more than any join's overlap measured (encoder priming and padding, 20-130 ms).
pub const HOLD_SECONDS: f64 = 0.5;

/// What to do with one decoded frame (in output samples): silence to lay before it, samples
/// to cut from the end of what is laid, samples to drop from its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Placement {
    /// Samples of silence before the frame (a gap).
    pub(crate) silence: i64,
    /// Samples cut from the end of what is laid and not yet encoded (an overlap).
    pub(crate) cut: i64,
    /// Samples dropped from the frame's start (the rest of an overlap).
    pub(crate) skip: i64,
}

/// One repair the timeline made, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repair {
    /// Silence filled in at `at` (output samples), `samples` long.
    Gap { at: i64, samples: i64 },
    /// Samples dropped at `at` (output samples), `samples` of them.
    Overlap { at: i64, samples: i64 },
}

/// The placement rule for one track, in samples of the output rate.
#[derive(Debug, Clone)]
pub(crate) struct Timeline {
    tolerance: i64,
    jump: i64,
    /// The video's shift for each run after the first (samples).
    run_shifts: Vec<i64>,
    /// Subtracted from a frame's timestamp: the first frame's distance from where it was laid.
    delay: Option<i64>,
    /// Runs begun after the first.
    runs: usize,
    /// Added to the current run's timestamps.
    shift: i64,
    /// The end of the latest frame of the current run, unshifted.
    run_end: Option<i64>,
    /// Repairs made, in order.
    pub(crate) repairs: Vec<Repair>,
}

impl Timeline {
    /// The rule at `rate` samples a second, with the video's `run_shifts_seconds`.
    pub(crate) fn new(rate: u32, run_shifts_seconds: &[f64]) -> Timeline {
        let samples = |s: f64| (s * f64::from(rate)).round() as i64;
        Timeline {
            tolerance: samples(TOLERANCE_SECONDS).max(1),
            jump: samples(JUMP_SECONDS),
            run_shifts: run_shifts_seconds.iter().map(|&s| samples(s)).collect(),
            delay: None,
            runs: 0,
            shift: 0,
            run_end: None,
            repairs: Vec::new(),
        }
    }

    /// Places a frame of `len` samples stamped `ts` (output samples, unbiased as the source
    /// stamps it; `None`: unstamped, it follows on) when the samples so far end at `written`,
    /// the last `held` of them not yet encoded.
    pub(crate) fn place(
        &mut self,
        ts: Option<i64>,
        len: i64,
        written: i64,
        held: i64,
    ) -> Placement {
        let Some(ts) = ts else {
            return Placement::default();
        };
        let delay = *self.delay.get_or_insert(ts - written);
        if self.run_end.is_some_and(|end| ts < end - self.jump) {
            // A new run: the video's shift for it, or right after what is laid.
            self.runs += 1;
            self.shift = match self.run_shifts.get(self.runs - 1) {
                Some(&s) => s,
                None => written - (ts - delay),
            };
            self.run_end = None;
        }
        self.run_end = Some(self.run_end.map_or(ts + len, |e| e.max(ts + len)));
        let at = ts - delay + self.shift;
        let off = at - written;
        if off > self.tolerance {
            self.repairs.push(Repair::Gap {
                at: written,
                samples: off,
            });
            Placement {
                silence: off,
                ..Placement::default()
            }
        } else if -off > self.tolerance {
            let cut = (-off).min(held.max(0));
            let skip = (-off - cut).min(len);
            self.repairs.push(Repair::Overlap {
                at: written - cut,
                samples: cut + skip,
            });
            Placement {
                silence: 0,
                cut,
                skip,
            }
        } else {
            Placement::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames of 1024 samples at 48 kHz laid by `t` from `start`, `held` samples held back
    /// (or all of them, when fewer): (placements, end).
    fn lay_holding(
        t: &mut Timeline,
        start: i64,
        stamps: &[i64],
        held: i64,
    ) -> (Vec<Placement>, i64) {
        let mut written = start;
        let mut out = Vec::new();
        for &ts in stamps {
            let p = t.place(Some(ts), 1024, written, held.min(written - start));
            written += p.silence - p.cut + 1024 - p.skip;
            out.push(p);
        }
        (out, written)
    }

    fn lay(t: &mut Timeline, start: i64, stamps: &[i64]) -> (Vec<Placement>, i64) {
        lay_holding(t, start, stamps, 0)
    }

    #[test]
    fn an_unbroken_run_and_small_rounding_are_left_alone() {
        let mut t = Timeline::new(48_000, &[]);
        // 1 ms of jitter either way (48 samples) never moves a frame.
        let stamps = [0, 1024, 2048 + 48, 3072 - 48, 4096];
        let (placed, end) = lay(&mut t, 0, &stamps);
        assert!(
            placed.iter().all(|p| *p == Placement::default()),
            "{placed:?}"
        );
        assert_eq!(end, 5 * 1024);
        assert!(t.repairs.is_empty());
    }

    #[test]
    fn an_overlap_at_a_join_is_trimmed_and_a_gap_filled() {
        let mut t = Timeline::new(48_000, &[]);
        // The second recording starts 1536 samples (32 ms) before the first one ends.
        // Nothing held back: the new frames lose their start.
        let (placed, end) = lay(&mut t, 0, &[0, 1024, 2048 - 1536, 2048 - 512]);
        assert_eq!(
            placed[2],
            Placement {
                skip: 1024,
                ..Default::default()
            }
        );
        assert_eq!(
            placed[3],
            Placement {
                skip: 512,
                ..Default::default()
            }
        );
        assert_eq!(
            end,
            2048 + 512,
            "everything after the join is where it is stamped"
        );
        // Held back: the old end goes, the new recording's start is kept whole.
        let mut t = Timeline::new(48_000, &[]);
        let (placed, end) = lay_holding(&mut t, 0, &[0, 1024, 2048 - 1536, 2048 - 512], 24_000);
        assert_eq!(
            placed[2],
            Placement {
                cut: 1536,
                ..Default::default()
            }
        );
        assert_eq!(placed[3], Placement::default());
        assert_eq!(end, 2048 + 512);
        assert_eq!(
            t.repairs,
            vec![Repair::Overlap {
                at: 512,
                samples: 1536
            }]
        );
        // An overlap longer than what is held: the rest comes off the new frame's start.
        let mut t = Timeline::new(48_000, &[]);
        let (placed, _) = lay_holding(&mut t, 0, &[0, 1024, 2048, 3072 - 2500], 1000);
        assert_eq!(
            placed[3],
            Placement {
                cut: 1000,
                skip: 1024,
                ..Default::default()
            }
        );
        // A 100 ms hole is filled.
        let mut t = Timeline::new(48_000, &[]);
        let (placed, end) = lay(&mut t, 0, &[0, 1024 + 4800]);
        assert_eq!(
            placed[1],
            Placement {
                silence: 4800,
                ..Default::default()
            }
        );
        assert_eq!(end, 2048 + 4800);
        assert_eq!(
            t.repairs,
            vec![Repair::Gap {
                at: 1024,
                samples: 4800
            }]
        );
    }

    #[test]
    fn a_decoder_delay_is_kept_not_read_as_a_gap() {
        // The container presents the track at 0 but the first frame comes stamped 2 frames in.
        let mut t = Timeline::new(48_000, &[]);
        let (placed, _) = lay(&mut t, 0, &[2048, 3072, 4096]);
        assert!(
            placed.iter().all(|p| *p == Placement::default()),
            "{placed:?}"
        );
    }

    #[test]
    fn a_jump_back_takes_the_videos_shift_or_follows_on() {
        // Two runs stamped from 0; the video moved its second run by 2.5 s.
        let mut t = Timeline::new(48_000, &[2.5]);
        let first: Vec<i64> = (0..100).map(|i| i * 1024).collect(); // 2.13 s
        let (_, end) = lay(&mut t, 0, &first);
        let p = t.place(Some(0), 1024, end, 0);
        assert_eq!(p.silence, 120_000 - end, "laid at the video's 2.5 s");
        // Without a video shift the run follows on.
        let mut t = Timeline::new(48_000, &[]);
        let (_, end) = lay(&mut t, 0, &first);
        assert_eq!(t.place(Some(0), 1024, end, 0), Placement::default());
        // A later frame of the new run is placed by the same shift.
        assert_eq!(
            t.place(Some(1024), 1024, end + 1024, 0),
            Placement::default()
        );
    }

    #[test]
    fn unstamped_frames_follow_on() {
        let mut t = Timeline::new(44_100, &[]);
        assert_eq!(t.place(None, 1152, 0, 0), Placement::default());
        assert!(t.repairs.is_empty());
    }
}
