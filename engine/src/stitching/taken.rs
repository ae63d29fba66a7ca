//! Stitches taken by a worker: the worker acks a stitch's delivery when it begins (a stitch may
//! outlast the broker's consumer timeout) and sends a `running` event every
//! [`STITCH_HEARTBEAT_SECONDS`](tessera_model::wire::STITCH_HEARTBEAT_SECONDS); when they stop
//! for the lapse, the worker is taken for dead and the stitch republished (the broker no longer
//! holds a copy that it would redeliver).
//!
//! Why apart: the stitch step's loop reads events; the clock per output is pure and tested here.

use std::time::Duration;

use tessera_farm::FarmError;
use tessera_model::error_code::{ErrorClass, ErrorCode};
use tokio::time::Instant;

/// The heartbeat clocks of a job's stitches.
pub(crate) struct Taken {
    /// When each output's stitch was last heard running (`None`: not taken, or done).
    last: Vec<Option<Instant>>,
    /// How often each output's stitch was republished after its heartbeats lapsed.
    republished: Vec<u32>,
    lapse: Duration,
}

impl Taken {
    /// Clocks for `outputs` stitches whose heartbeats lapse after `lapse`.
    pub(crate) fn new(outputs: usize, lapse: Duration) -> Self {
        Taken {
            last: vec![None; outputs],
            republished: vec![0; outputs],
            lapse,
        }
    }

    /// Output `i`'s stitch is running (a heartbeat).
    pub(crate) fn heard(&mut self, i: usize) {
        if let Some(t) = self.last.get_mut(i) {
            *t = Some(Instant::now());
        }
    }

    /// Output `i`'s stitch ended: no more heartbeats are awaited.
    pub(crate) fn forget(&mut self, i: usize) {
        if let Some(t) = self.last.get_mut(i) {
            *t = None;
        }
    }

    /// Returns the first output whose heartbeats have lapsed (pending while none is taken).
    pub(crate) async fn lapsed(&self) -> usize {
        let first = self
            .last
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.map(|t| (t + self.lapse, i)))
            .min();
        match first {
            Some((at, i)) => {
                tokio::time::sleep_until(at).await;
                i
            }
            None => std::future::pending().await,
        }
    }

    /// Output `i`'s heartbeats lapsed: it is to be republished (and awaited as not taken), or,
    /// after `max` such republishes, the job fails `task_lost`.
    pub(crate) fn republish(&mut self, i: usize, max: u32) -> Result<(), FarmError> {
        self.forget(i);
        let Some(count) = self.republished.get_mut(i) else {
            return Ok(());
        };
        if *count >= max {
            return Err(FarmError::Media {
                code: ErrorCode::TaskLost,
                class: ErrorClass::Abort,
                message: format!(
                    "stitch {i}: its worker stopped answering {} times (no heartbeat for {} s)",
                    *count + 1,
                    self.lapse.as_secs()
                ),
            });
        }
        *count += 1;
        tracing::warn!(
            output = i,
            lapse_s = self.lapse.as_secs(),
            "a taken stitch's heartbeats stopped: republished"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stitch_whose_heartbeats_stop_lapses_and_a_beating_one_does_not() {
        let lapse = Duration::from_secs(120);
        let mut taken = Taken::new(2, lapse);
        // Nothing taken: nothing lapses.
        assert!(
            tokio::time::timeout(Duration::from_secs(3600), taken.lapsed())
                .await
                .is_err()
        );
        taken.heard(0);
        taken.heard(1);
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_secs(30)).await;
            taken.heard(1);
        }
        // Output 0 went silent 300 s ago; output 1 beats on.
        assert_eq!(taken.lapsed().await, 0);
        taken.republish(0, 2).unwrap();
        let beat = tokio::time::timeout(Duration::from_secs(60), taken.lapsed()).await;
        assert!(beat.is_err(), "output 1 lapsed while beating");
        taken.forget(1);
        assert!(
            tokio::time::timeout(Duration::from_secs(3600), taken.lapsed())
                .await
                .is_err()
        );
    }

    #[test]
    fn lapses_past_the_limit_fail_the_job_as_task_lost() {
        let mut taken = Taken::new(1, Duration::from_secs(120));
        taken.republish(0, 2).unwrap();
        taken.republish(0, 2).unwrap();
        let err = taken.republish(0, 2).unwrap_err();
        assert_eq!(err.code(), ErrorCode::TaskLost);
        assert!(err.to_string().contains("stitch 0"), "{err}");
    }
}
