//! What the watcher does with each answer of the metadata service. Pure: the polling is in
//! `spot.rs`.
//!
//! Why a rebalance recommendation standing at start is ignored: AWS keeps
//! `events/recommendations/rebalance` up for the rest of the instance's life. A worker it
//! drained exits 0; a Deployment restarts it on the same node, and if the restarted worker
//! drained again at its first poll the node would do no work until it is reclaimed. The
//! recommendation is advice: it drains a worker once, when it appears; a worker that finds it
//! already standing logs it once and keeps working. A termination notice (AWS instance-action,
//! GCP preempted, Azure Preempt) always drains, standing or not.

use crate::drain::DrainReason;

use super::notice::Notice;

/// What to do after one successful poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing new.
    Nothing,
    /// A new notice: drain.
    Drain(Notice),
    /// A rebalance recommendation stood before this worker's first poll: log it, keep working.
    StandingRebalance,
}

/// The watcher's memory of what it has seen.
#[derive(Debug, Default)]
pub struct Watch {
    /// A poll has answered (the first answer is what stood before this worker).
    polled: bool,
    /// A recommendation that stood at the first answer and has not gone since.
    standing_rebalance: bool,
    /// The last notice acted on (the service repeats it at every poll).
    last: Option<Notice>,
}

impl Watch {
    /// Decides on one poll's answer: `notice` is what the service says now.
    pub fn step(&mut self, notice: Option<Notice>) -> Step {
        let first = !self.polled;
        self.polled = true;
        let Some(n) = notice else {
            // Gone: a recommendation that comes back later is a new one.
            self.standing_rebalance = false;
            return Step::Nothing;
        };
        if n.reason == DrainReason::Rebalance {
            if first {
                self.standing_rebalance = true;
                return Step::StandingRebalance;
            }
            if self.standing_rebalance {
                return Step::Nothing;
            }
        }
        if self.last == Some(n) {
            return Step::Nothing;
        }
        self.last = Some(n);
        Step::Drain(n)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::spot::notice::aws_rebalance;

    fn interruption() -> Notice {
        Notice {
            reason: DrainReason::SpotInterruption,
            deadline: Some(SystemTime::now() + Duration::from_secs(120)),
        }
    }

    #[test]
    fn a_rebalance_standing_at_the_first_poll_is_reported_once_and_never_drains() {
        let mut w = Watch::default();
        assert_eq!(w.step(Some(aws_rebalance())), Step::StandingRebalance);
        for _ in 0..10 {
            assert_eq!(w.step(Some(aws_rebalance())), Step::Nothing);
        }
        // The termination notice still drains.
        let n = interruption();
        assert_eq!(w.step(Some(n)), Step::Drain(n));
        assert_eq!(w.step(Some(n)), Step::Nothing);
    }

    #[test]
    fn a_rebalance_that_appears_while_the_worker_runs_drains_once() {
        let mut w = Watch::default();
        assert_eq!(w.step(None), Step::Nothing);
        assert_eq!(w.step(Some(aws_rebalance())), Step::Drain(aws_rebalance()));
        assert_eq!(w.step(Some(aws_rebalance())), Step::Nothing);
    }

    #[test]
    fn a_standing_rebalance_that_goes_and_comes_back_is_a_new_one() {
        let mut w = Watch::default();
        assert_eq!(w.step(Some(aws_rebalance())), Step::StandingRebalance);
        assert_eq!(w.step(None), Step::Nothing);
        assert_eq!(w.step(Some(aws_rebalance())), Step::Drain(aws_rebalance()));
    }

    #[test]
    fn a_termination_notice_at_the_first_poll_drains() {
        let mut w = Watch::default();
        let n = interruption();
        assert_eq!(w.step(Some(n)), Step::Drain(n));
    }
}
