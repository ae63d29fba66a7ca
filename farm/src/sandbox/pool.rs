//! A pool of warm slots shared by a worker's concurrent tasks.
//!
//! Why: a worker runs its segments as independent tasks, not as fixed slot loops; the pool
//! lends each running operation a [`SandboxSlot`] (with its warm child) and takes it back
//! afterwards, so the number of warm children follows the number of operations running at
//! once. Slots are keyed (e.g. by GPU card) so an operation finds a child that already holds
//! the right device context, and owned (by the job whose media a child last parsed): a
//! child that served one job never serves another, so a child compromised by one upload
//! cannot read or tamper with the next job's segments.

use std::sync::Mutex;

use serde::de::DeserializeOwned;

use super::{ChildStats, Limits, MediaOp, Sandbox, SandboxSlot, WarmPolicy};
use crate::FarmError;

/// Idle warm slots, lent out one per running operation.
pub struct SlotPool<K> {
    sandbox: Sandbox,
    policy: WarmPolicy,
    idle: Mutex<Vec<Idle<K>>>,
}

/// An idle slot: its key, and the job its child last worked for (`None`: untouched).
struct Idle<K> {
    key: K,
    owner: Option<String>,
    slot: SandboxSlot,
}

impl<K: PartialEq> SlotPool<K> {
    /// An empty pool; slots are created on demand (or by [`SlotPool::warm`]).
    pub fn new(sandbox: Sandbox, policy: WarmPolicy) -> Self {
        SlotPool {
            sandbox,
            policy,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Starts children for `count` slots of `key` now, so the first operations find them
    /// ready (best effort: a child that cannot start is started again by its first operation).
    pub fn warm(&self, key: K, count: usize, limits: Limits)
    where
        K: Clone,
    {
        for _ in 0..count {
            let mut slot = SandboxSlot::new(self.sandbox.clone(), self.policy);
            if let Err(e) = slot.warm(limits) {
                tracing::warn!(error = %e, "media child not pre-started");
            }
            self.put_back(key.clone(), None, slot);
        }
    }

    /// Runs `op` of job `owner` in an idle slot of `key` (a new one when none is idle; its
    /// child replaced when it last served another job) and returns the slot to the pool
    /// afterwards. If this future is dropped first, the slot and its child (which is
    /// mid-operation) are dropped too: the child is killed, never reused.
    pub async fn run<T: DeserializeOwned>(
        &self,
        key: K,
        owner: &str,
        op: &MediaOp,
        limits: Limits,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<(T, ChildStats), FarmError> {
        let mut slot = self.take(&key, owner);
        let result = slot.run(op, limits, progress).await;
        self.put_back(key, Some(owner.to_string()), slot);
        result
    }

    /// Idle slots now (for tests and metrics).
    pub fn idle(&self) -> usize {
        self.lock().len()
    }

    /// An idle slot of `key`: one whose child served `owner` or nobody, else one whose child
    /// served another job (that child is ended), else a new slot.
    fn take(&self, key: &K, owner: &str) -> SandboxSlot {
        let mut idle = self.lock();
        let clean = |i: &Idle<K>| i.owner.as_deref().is_none_or(|o| o == owner);
        let found = (idle.iter().rposition(|i| &i.key == key && clean(i)))
            .map(|i| (i, false))
            .or_else(|| idle.iter().rposition(|i| &i.key == key).map(|i| (i, true)));
        match found {
            Some((i, foreign)) => {
                let mut slot = idle.swap_remove(i).slot;
                if foreign {
                    slot.discard_child();
                }
                slot
            }
            None => SandboxSlot::new(self.sandbox.clone(), self.policy),
        }
    }

    fn put_back(&self, key: K, owner: Option<String>, slot: SandboxSlot) {
        self.lock().push(Idle { key, owner, slot });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Idle<K>>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }
}
