//! Children started ahead of need for [`Sandbox::run`](super::Sandbox::run).
//!
//! Why: a child links the ~170 libav* libraries before it can do anything. Debian builds them
//! with immediate binding, so each start costs 80-120 ms of CPU in the dynamic loader (measured
//! with `perf`; `ffprobe -version` pays the same). A job's probe, split, audio and stitch each
//! started one, one after the other, on the job's critical path: on a 5 s clip that was a large
//! share of the fixed overhead. Two ways to take it off that path:
//! - *spares* (services): a few children started ahead; each serves exactly one operation and
//!   exits, like a one-shot child, so nothing of one operation (or job, or tenant) reaches the
//!   next; a replacement starts as soon as a spare is taken, beside the operation that took it;
//! - *reuse* (the one-process farm, which serves one job): a fixed set of warm children, one
//!   per worker, serves all the job's operations (probe, split, audio, segment encodes,
//!   stitch) in turn, so the job pays two or three child starts, not seven; an operation waits
//!   for a free child rather than starting another.

use std::sync::Mutex;

use serde::de::DeserializeOwned;

use super::{ChildStats, Limits, MediaOp, Sandbox, SandboxSlot, WarmPolicy};
use crate::FarmError;

/// One operation per child: a spare is never reused, it only starts early.
const ONE_OPERATION: WarmPolicy = WarmPolicy {
    max_operations: 1,
    max_age: std::time::Duration::from_secs(24 * 3600),
    prewarm: false,
};

/// How the children of a [`Ready`] set are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Use {
    /// Each child serves one operation; `target` spares are kept started.
    OnePerOperation,
    /// Children serve operations in sequence (within the [`WarmPolicy`] limits); idle ones are
    /// kept for the next operation, and at most `target` run at once.
    Reuse,
}

/// Children started ahead, and how they are used.
pub(crate) struct Ready {
    sandbox: Sandbox,
    target: usize,
    limits: Limits,
    mode: Use,
    idle: Mutex<Vec<SandboxSlot>>,
    /// Reuse: one permit per child, so operations queue for a warm child.
    permits: tokio::sync::Semaphore,
}

impl std::fmt::Debug for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ready")
            .field("mode", &self.mode)
            .field("target", &self.target)
            .field("idle", &self.idle().len())
            .finish()
    }
}

impl Ready {
    /// Starts `target` children under `limits` (the rlimits the operations will ask for; an
    /// operation with other rlimits gets a fresh child). `sandbox` must start children itself
    /// (have no [`Ready`] set of its own).
    pub(crate) fn new(sandbox: Sandbox, target: usize, limits: Limits, mode: Use) -> Ready {
        let ready = Ready {
            sandbox,
            target,
            limits,
            mode,
            idle: Mutex::new(Vec::new()),
            permits: tokio::sync::Semaphore::new(target.max(1)),
        };
        ready.refill();
        ready
    }

    /// Runs `op` in a ready child (a fresh one when none is idle).
    pub(crate) async fn run<T: DeserializeOwned>(
        &self,
        op: &MediaOp,
        limits: Limits,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<(T, ChildStats), FarmError> {
        let _permit = match self.mode {
            Use::Reuse => {
                Some(
                    self.permits
                        .acquire()
                        .await
                        .map_err(|_| FarmError::ChildCrashed {
                            what: op.name().into(),
                            detail: "media children closed".into(),
                        })?,
                )
            }
            Use::OnePerOperation => None,
        };
        let taken = self.idle().pop();
        if self.mode == Use::OnePerOperation {
            // The replacement starts now, beside this operation, not after it.
            self.refill();
        }
        let mut slot =
            taken.unwrap_or_else(|| SandboxSlot::new(self.sandbox.clone(), self.policy()));
        // A used-up or failed child is ended by the slot; dropping the slot (or this future)
        // ends whatever child it still holds.
        let result = slot.run(op, limits, progress).await;
        if self.mode == Use::Reuse {
            self.idle().push(slot);
        }
        result
    }

    /// Whether children serve operation after operation (the one-process farm).
    pub(crate) fn reuses(&self) -> bool {
        self.mode == Use::Reuse
    }

    /// How many children the set keeps (at most this many run at once when it reuses them).
    pub(crate) fn target(&self) -> usize {
        self.target.max(1)
    }

    /// Idle children (ready or starting) now, for tests and logs.
    pub(crate) fn idle_count(&self) -> usize {
        self.idle().len()
    }

    /// The process ids of the idle children (for tests).
    #[cfg(test)]
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.idle()
            .iter()
            .filter_map(SandboxSlot::child_pid)
            .collect()
    }

    /// The warm policy of this set's slots.
    fn policy(&self) -> WarmPolicy {
        match self.mode {
            Use::OnePerOperation => ONE_OPERATION,
            Use::Reuse => WarmPolicy::default(),
        }
    }

    fn refill(&self) {
        let mut idle = self.idle();
        while idle.len() < self.target {
            let mut slot = SandboxSlot::new(self.sandbox.clone(), self.policy());
            if let Err(e) = slot.warm(self.limits) {
                // Best effort: the operation then starts its own child, as without spares.
                tracing::warn!(error = %e, "media child not started ahead");
                return;
            }
            idle.push(slot);
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<SandboxSlot>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }
}
