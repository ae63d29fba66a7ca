//! Why and by when a worker stops taking work: SIGTERM, a spot-interruption notice, or
//! nothing to do for a while (`--exit-when-idle`).
//!
//! Why one place: the consume loop stops on it, the drain gives in-flight segments the time
//! left before the machine goes away (never more than the configured grace), `/readyz` turns
//! false on it so Kubernetes sends no more traffic, and the service does not reconnect to the
//! broker once it is set.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// Seconds kept back from a notice's deadline: requeueing the segments that did not finish
/// and closing the connection must happen before the machine is taken.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(10);

/// Why the worker drains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainReason {
    /// SIGTERM or the embedding program's shutdown.
    Shutdown,
    /// The cloud will take the machine (AWS instance-action, GCP preempted, Azure Preempt).
    SpotInterruption,
    /// AWS rebalance recommendation: the machine is at elevated risk; finish and leave.
    Rebalance,
    /// No work for the configured idle time.
    Idle,
}

impl DrainReason {
    /// The reason as logs and metrics spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            DrainReason::Shutdown => "shutdown",
            DrainReason::SpotInterruption => "spot_interruption",
            DrainReason::Rebalance => "rebalance_recommendation",
            DrainReason::Idle => "idle",
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct State {
    reason: DrainReason,
    deadline: Option<Instant>,
}

/// The worker's drain state, shared by the consume loop, the spot watcher and `/readyz`.
#[derive(Debug, Default)]
pub struct Drain {
    state: Mutex<Option<State>>,
    stop: CancellationToken,
}

impl Drain {
    /// Starts draining (or shortens a drain already started): the loop stops taking work, and
    /// in-flight work must end by `deadline` less [`DEADLINE_MARGIN`] when one is given.
    pub fn begin(&self, reason: DrainReason, deadline: Option<Instant>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let next = match *state {
            None => State { reason, deadline },
            Some(s) => State {
                // The first reason stays, unless a deadline makes this one the binding one.
                reason: if deadline.is_some() && s.deadline.is_none() {
                    reason
                } else {
                    s.reason
                },
                deadline: match (s.deadline, deadline) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                },
            },
        };
        *state = Some(next);
        drop(state);
        self.stop.cancel();
    }

    /// Whether the worker is draining (then `/readyz` answers 503).
    pub fn is_draining(&self) -> bool {
        self.reason().is_some()
    }

    /// Why the worker drains, if it does.
    pub fn reason(&self) -> Option<DrainReason> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.map(|s| s.reason)
    }

    /// Cancelled when draining begins.
    pub fn stopped(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// How long in-flight work may still run: the configured `grace`, cut to the notice's
    /// deadline less the margin.
    pub fn grace(&self, grace: Duration) -> Duration {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.and_then(|s| s.deadline) {
            Some(deadline) => grace.min(
                deadline
                    .saturating_duration_since(Instant::now())
                    .saturating_sub(DEADLINE_MARGIN),
            ),
            None => grace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_cuts_the_grace_to_its_deadline_less_the_margin() {
        let d = Drain::default();
        assert!(!d.is_draining());
        assert_eq!(d.grace(Duration::from_secs(100)), Duration::from_secs(100));
        let stop = d.stopped();
        d.begin(DrainReason::Rebalance, None);
        assert!(stop.is_cancelled());
        assert_eq!(d.reason(), Some(DrainReason::Rebalance));
        assert_eq!(d.grace(Duration::from_secs(100)), Duration::from_secs(100));
        // AWS: two minutes from the notice.
        d.begin(
            DrainReason::SpotInterruption,
            Some(Instant::now() + Duration::from_secs(120)),
        );
        assert_eq!(d.reason(), Some(DrainReason::SpotInterruption));
        let g = d.grace(Duration::from_secs(300));
        assert!(
            g <= Duration::from_secs(110) && g > Duration::from_secs(105),
            "{g:?}"
        );
        // The configured grace still bounds it, and a later, longer deadline changes nothing.
        assert_eq!(d.grace(Duration::from_secs(20)), Duration::from_secs(20));
        d.begin(
            DrainReason::SpotInterruption,
            Some(Instant::now() + Duration::from_secs(600)),
        );
        assert!(d.grace(Duration::from_secs(300)) <= Duration::from_secs(110));
        // A deadline already closer than the margin leaves nothing.
        d.begin(
            DrainReason::SpotInterruption,
            Some(Instant::now() + Duration::from_secs(5)),
        );
        assert_eq!(d.grace(Duration::from_secs(300)), Duration::ZERO);
    }
}
