//! The audio repairs a job will make, named before it makes them: each overlap the audio
//! step trims and each gap it fills (audio/timeline.rs), as warnings in the probe's findings
//! (`tessera probe`, the job's report).
//!
//! Why in the probe: the scan has seen every packet's time already, the warnings then reach
//! the report the same way on both farms (the audio step may run on a worker, whose result
//! carries no text), and `tessera probe` shows them before anything is encoded.

use super::scan::{AudioSpan, Step};
use crate::audio::timeline::TOLERANCE_SECONDS;
use tessera_model::probe::AudioInfo;

/// Warnings a track gets at most; the rest are counted in one more line.
const MAX_PER_TRACK: usize = 5;

/// One warning per repair of each track (at most [`MAX_PER_TRACK`], then a count), given the
/// video's run shifts (seconds, see `ProbeInfo::run_shifts_seconds`).
pub(crate) fn audio_repairs(
    audio: &[AudioInfo],
    spans: &[AudioSpan],
    run_shifts_seconds: &[f64],
) -> Vec<String> {
    let mut warnings = Vec::new();
    for (n, (info, span)) in audio.iter().zip(spans).enumerate() {
        let tb = info.time_base;
        let offs: Vec<(f64, f64)> = span
            .steps
            .iter()
            .filter_map(|s| offset(s, run_shifts_seconds, |t| tb.seconds(t)))
            .collect();
        let track = format!("audio track {} (stream {})", n + 1, info.index);
        for &(at, off) in offs.iter().take(MAX_PER_TRACK) {
            let ms = off.abs() * 1e3;
            warnings.push(if off < 0.0 {
                format!(
                    "{track}: its packets overlap by {ms:.0} ms at {at:.3} s (recordings \
                     joined?): the overlap is trimmed, so sound and picture stay in sync after it"
                )
            } else {
                format!(
                    "{track}: a gap of {ms:.0} ms in its packets at {at:.3} s is filled with \
                     silence, so sound and picture stay in sync after it"
                )
            });
        }
        if offs.len() > MAX_PER_TRACK {
            warnings.push(format!(
                "{track}: {} more overlaps and gaps repaired",
                offs.len() - MAX_PER_TRACK
            ));
        }
    }
    warnings
}

/// Where the step's packet is laid against where the packets before it end (s: negative an
/// overlap, positive a gap) and its time, when that is beyond the tolerance. A new run is laid
/// by the video's shift for it; with none, right after the run before (nothing to repair).
fn offset(step: &Step, shifts: &[f64], seconds: impl Fn(i64) -> f64) -> Option<(f64, f64)> {
    let at = seconds(step.at);
    let off = if step.starts_run {
        let shift = |run: usize| {
            run.checked_sub(1)
                .map_or(Some(0.0), |k| shifts.get(k).copied())
        };
        let (here, before) = (shift(step.run)?, shift(step.run - 1)?);
        (at + here) - (seconds(step.prev_end) + before)
    } else {
        at - seconds(step.prev_end)
    };
    (off.abs() > TOLERANCE_SECONDS).then_some((at, off))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t: i64) -> f64 {
        t as f64 / 1000.0
    }

    #[test]
    fn overlaps_and_gaps_beyond_the_tolerance_are_named() {
        // 32 ms of overlap at 15.379 s, within a run.
        let step = Step {
            run: 0,
            at: 15_379,
            prev_end: 15_411,
            starts_run: false,
        };
        let (at, off) = offset(&step, &[], ms).unwrap();
        assert!((at - 15.379).abs() < 1e-9 && (off + 0.032).abs() < 1e-9);
        // 5 ms is rounding, not a repair.
        let small = Step {
            run: 0,
            at: 1_005,
            prev_end: 1_000,
            starts_run: false,
        };
        assert_eq!(offset(&small, &[], ms), None);
    }

    #[test]
    fn a_new_run_is_judged_where_the_videos_shift_lays_it() {
        // The audio starts over at 0 after ending at 4.02 s; the video moved its second run by
        // 4.0 s: the audio's second run lands 20 ms before the first one's end.
        let jump = Step {
            run: 1,
            at: 0,
            prev_end: 4_020,
            starts_run: true,
        };
        let (_, off) = offset(&jump, &[4.0], ms).unwrap();
        assert!((off + 0.020).abs() < 1e-9, "{off}");
        // Without a video shift for it the run follows on: nothing to name.
        assert_eq!(offset(&jump, &[], ms), None);
    }
}
