//! Admission of segment tasks to the encode queue, by job priority.
//!
//! Why: RabbitMQ 3.10's quorum queues have no message priorities, and once a segment is on
//! the queue it is served in order. So the dispatcher keeps at most a window of segments
//! queued or encoding across all its jobs and admits the waiting segments of the
//! highest-priority job first (the oldest request among equals). An urgent job then waits
//! for at most a window's worth of segments, not for every segment submitted before it.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// The window of admitted segments, shared by every job of a dispatcher.
#[derive(Debug)]
pub struct PublishGate {
    window: usize,
    state: Mutex<GateState>,
}

#[derive(Debug, Default)]
struct GateState {
    admitted: usize,
    held: HashMap<String, usize>,
    waiting: BinaryHeap<Waiter>,
    next_seq: u64,
}

#[derive(Debug)]
struct Waiter {
    priority: u8,
    seq: u64,
    job: String,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Waiter {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Waiter {}
impl PartialOrd for Waiter {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Waiter {
    /// Higher priority first, then the earlier request.
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Counts of the gate, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateCounts {
    /// Segments admitted and not yet done.
    pub admitted: usize,
    /// Segments waiting for admission.
    pub waiting: usize,
    /// The window.
    pub window: usize,
}

impl PublishGate {
    /// A gate admitting at most `window` segments at once (at least 1).
    pub fn new(window: usize) -> Arc<Self> {
        Arc::new(PublishGate {
            window: window.max(1),
            state: Mutex::new(GateState::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until one segment of `job` may be published. Dropping the future gives up the
    /// place in line.
    pub async fn admit(&self, job: &str, priority: u8) {
        let rx = {
            let mut s = self.lock();
            if s.admitted < self.window && s.waiting.is_empty() {
                s.admitted += 1;
                *s.held.entry(job.to_string()).or_default() += 1;
                return;
            }
            let (wake, rx) = oneshot::channel();
            let seq = s.next_seq;
            s.next_seq += 1;
            s.waiting.push(Waiter {
                priority,
                seq,
                job: job.to_string(),
                wake,
            });
            self.grant(&mut s);
            rx
        };
        // The sender is dropped only with the gate.
        let _ = rx.await;
    }

    /// One admitted segment of `job` is done: its place goes to the next in line.
    pub fn release(&self, job: &str) {
        let mut s = self.lock();
        let held = s.held.get(job).copied().unwrap_or(0);
        if held > 0 {
            s.admitted -= 1;
            if held == 1 {
                s.held.remove(job);
            } else {
                s.held.insert(job.to_string(), held - 1);
            }
        }
        self.grant(&mut s);
    }

    /// `job` ended: every place it holds is freed.
    pub fn release_job(&self, job: &str) {
        let mut s = self.lock();
        if let Some(n) = s.held.remove(job) {
            s.admitted -= n;
        }
        self.grant(&mut s);
    }

    /// Current counts.
    pub fn counts(&self) -> GateCounts {
        let s = self.lock();
        GateCounts {
            admitted: s.admitted,
            waiting: s.waiting.iter().filter(|w| !w.wake.is_closed()).count(),
            window: self.window,
        }
    }

    /// Admits waiters while the window has room; waiters that gave up are skipped.
    fn grant(&self, s: &mut GateState) {
        while s.admitted < self.window {
            let Some(w) = s.waiting.pop() else { return };
            if w.wake.is_closed() {
                continue;
            }
            s.admitted += 1;
            *s.held.entry(w.job.clone()).or_default() += 1;
            if w.wake.send(()).is_err() {
                // Gave up between the check and the send: undo.
                s.admitted -= 1;
                if let Some(n) = s.held.get_mut(&w.job) {
                    *n -= 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn admitted_within(gate: &PublishGate, job: &str, prio: u8, ms: u64) -> bool {
        tokio::time::timeout(Duration::from_millis(ms), gate.admit(job, prio))
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn the_window_bounds_admissions_and_releases_free_places() {
        let gate = PublishGate::new(2);
        assert!(admitted_within(&gate, "a", 5, 50).await);
        assert!(admitted_within(&gate, "a", 5, 50).await);
        assert!(!admitted_within(&gate, "a", 5, 50).await);
        gate.release("a");
        assert!(admitted_within(&gate, "a", 5, 50).await);
        assert_eq!(gate.counts().admitted, 2);
        gate.release_job("a");
        assert_eq!(gate.counts().admitted, 0);
        // Releasing what a job does not hold changes nothing.
        gate.release("nobody");
        assert_eq!(gate.counts().admitted, 0);
    }

    #[tokio::test]
    async fn higher_priority_goes_first_then_the_oldest() {
        let gate = PublishGate::new(1);
        gate.admit("busy", 5).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (job, prio) in [("low1", 1), ("low2", 1), ("high", 9), ("mid", 5)] {
            let (gate, order) = (gate.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                gate.admit(job, prio).await;
                order.lock().unwrap().push(job);
            }));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(gate.counts().waiting, 4);
        let mut holder = "busy".to_string();
        for _ in 0..4 {
            gate.release(&holder);
            tokio::time::sleep(Duration::from_millis(20)).await;
            holder = order.lock().unwrap().last().unwrap().to_string();
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["high", "mid", "low1", "low2"]);
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_does_not_take_a_place() {
        let gate = PublishGate::new(1);
        gate.admit("a", 5).await;
        assert!(!admitted_within(&gate, "gone", 9, 30).await);
        let g = gate.clone();
        let waiting = tokio::spawn(async move { g.admit("b", 1).await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        gate.release_job("a");
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("b admitted")
            .unwrap();
        let c = gate.counts();
        assert_eq!((c.admitted, c.waiting), (1, 0));
    }
}
