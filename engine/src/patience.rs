//! Retrying store operations through an S3 outage, and progress records through a database
//! that cannot write.
//!
//! Why: an unreachable store (connection refused, timeouts, 5xx) says nothing about the job;
//! the dispatcher waits for it (as workers do) instead of failing a job that would succeed a
//! minute later. Other store errors (missing object, access denied) return at once. A job
//! whose progress cannot be recorded (a full disk) waits too: acking an event whose progress
//! is not stored would lose it on the next restart.

use std::future::Future;
use std::time::Duration;

use tessera_farm::backoff::Backoff;
use tessera_farm::FarmError;

use crate::request::{JobStage, StageRecorder};

/// How long one store operation may keep waiting for the store to come back.
pub const STORE_PATIENCE: Duration = Duration::from_secs(600);

/// Runs `op` until it succeeds, fails for another reason than an unreachable store, or
/// `STORE_PATIENCE` has passed; waits about 1 s, 2 s, then 4 s between tries, each moved by
/// up to half of itself. Why the jitter: against a store answering 503 SlowDown, a fleet of
/// dispatchers and workers retrying on the same beat keeps it overloaded.
pub async fn patiently<T, F, Fut>(what: &str, op: F) -> Result<T, FarmError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, FarmError>>,
{
    patiently_until(what, tokio::time::Instant::now() + STORE_PATIENCE, op).await
}

/// [`patiently`] with a deadline of the caller's: tries `op` at least once, and retries it
/// while the store is unavailable and the next try still fits before `deadline`. Why: a
/// rollback shares one deadline among all its deletes (see rollback.rs), so a store that
/// stays down costs the job one patience, not one per delivered object.
pub(crate) async fn patiently_until<T, F, Fut>(
    what: &str,
    deadline: tokio::time::Instant,
    mut op: F,
) -> Result<T, FarmError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, FarmError>>,
{
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(4)).jittered();
    loop {
        match op().await {
            // The un-jittered wait decides whether another try fits; the jittered one is
            // cut at the deadline, so the last try is never later than the patience.
            Err(e @ FarmError::StoreUnavailable { .. })
                if tokio::time::Instant::now() + backoff.current() < deadline =>
            {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let retry_in = backoff.next_delay().min(left);
                tracing::warn!(what, error = %e, ?retry_in, "store unavailable; waiting");
                tokio::time::sleep(retry_in).await;
            }
            other => return other,
        }
    }
}

/// Publishes `body` to `queue_name`, retrying (1 s doubling to 30 s) through broker outages
/// for up to [`STORE_PATIENCE`]. Why: a broker restart while a job publishes (which lasts its
/// whole encode phase, behind the priority gate) must not fail the job.
pub async fn publish_patiently(
    queue: &dyn tessera_farm::queue::Queue,
    queue_name: &str,
    body: &[u8],
) -> Result<(), FarmError> {
    let deadline = tokio::time::Instant::now() + STORE_PATIENCE;
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30)).jittered();
    loop {
        match queue.publish(queue_name, body.to_vec()).await {
            Err(e) if tokio::time::Instant::now() + backoff.current() < deadline => {
                let retry_in = backoff.current();
                tracing::warn!(queue = queue_name, error = %e, ?retry_in, "publish failed; retrying");
                tokio::time::sleep(backoff.next_delay()).await;
            }
            other => return other,
        }
    }
}

/// Records `stage` with `record` (the context's `on_stage`), retrying (1 s doubling to 30 s) until it is stored.
/// Why no limit: the caller holds the event that the record acknowledges; giving up would
/// either lose it or fail a job that resumes fine once the disk has room again.
pub(crate) async fn recorded(record: &StageRecorder, stage: &JobStage) {
    let _ = recorded_unless_cancelled(record, stage).await;
}

/// [`recorded`], except that a recorder answering `Cancelled` (the job was cancelled before
/// the stage could be entered) ends the wait with that error.
pub(crate) async fn recorded_unless_cancelled(
    record: &StageRecorder,
    stage: &JobStage,
) -> Result<(), FarmError> {
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
    loop {
        match record(stage) {
            Ok(()) => return Ok(()),
            Err(e @ FarmError::Cancelled { .. }) => return Err(e),
            Err(e) => {
                let retry_in = backoff.current();
                tracing::warn!(error = %e, ?retry_in, "progress not recorded; waiting")
            }
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn down() -> FarmError {
        FarmError::StoreUnavailable {
            key: "k".into(),
            reason: "connection refused".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn waits_through_unavailability_and_not_through_other_errors() {
        let tries = AtomicU32::new(0);
        let got = patiently("op", || async {
            if tries.fetch_add(1, Ordering::SeqCst) < 3 {
                Err(down())
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(got.unwrap(), 7);
        assert_eq!(tries.load(Ordering::SeqCst), 4);

        let tries = AtomicU32::new(0);
        let got: Result<(), _> = patiently("op", || async {
            tries.fetch_add(1, Ordering::SeqCst);
            Err(FarmError::Store {
                key: "k".into(),
                reason: "no such object".into(),
            })
        })
        .await;
        assert_eq!(got.unwrap_err().code(), "store_error");
        assert_eq!(tries.load(Ordering::SeqCst), 1);

        // A store that never comes back: gives up after the patience, with its error.
        let got: Result<(), _> = patiently("op", || async { Err(down()) }).await;
        assert_eq!(got.unwrap_err().code(), "store_unavailable");
    }

    /// Checks that the gaps between tries follow 1, 2, then 4 s, each jittered by up to half
    /// either way (the paused clock rounds sleeps up to the millisecond), and not in step.
    fn assert_jittered(gaps: &[Duration]) {
        let nominal = [1u64, 2, 4].into_iter().chain(std::iter::repeat(4));
        for (gap, n) in gaps.iter().zip(nominal) {
            let n = Duration::from_secs(n);
            let (low, high) = (n / 2, n * 3 / 2 + Duration::from_millis(1));
            assert!(
                *gap >= low && *gap <= high,
                "gap {gap:?} outside {low:?}..{high:?}"
            );
        }
        let mut capped: Vec<_> = gaps.iter().skip(2).collect();
        capped.dedup();
        assert!(
            capped.len() > 1,
            "every wait the same, a fleet in step: {gaps:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_waits_are_jittered_and_end_by_the_deadline() {
        let tries = std::sync::Mutex::new(Vec::new());
        let got = patiently("op", || {
            let mut t = tries.lock().unwrap();
            t.push(tokio::time::Instant::now());
            let n = t.len();
            async move {
                if n <= 10 {
                    Err(down())
                } else {
                    Ok(())
                }
            }
        })
        .await;
        assert!(got.is_ok());
        let at = tries.into_inner().unwrap();
        let gaps: Vec<_> = at.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps.len(), 10);
        assert_jittered(&gaps);

        // A store that never comes back: the last try is no later than the patience.
        let started = tokio::time::Instant::now();
        let last = std::sync::Mutex::new(started);
        let got: Result<(), _> = patiently("op", || {
            *last.lock().unwrap() = tokio::time::Instant::now();
            async { Err(down()) }
        })
        .await;
        assert_eq!(got.unwrap_err().code(), "store_unavailable");
        let last = *last.lock().unwrap() - started;
        assert!(last <= STORE_PATIENCE, "tried at {last:?}");
        assert!(
            last >= STORE_PATIENCE - Duration::from_secs(6),
            "gave up at {last:?}"
        );
    }

    /// The farm's in-memory queue, refusing its first `failures` publishes as a broker
    /// restarting would.
    struct FlakyQueue {
        inner: tessera_farm::queue::MemoryQueue,
        failures: AtomicU32,
        publishes: AtomicU32,
    }

    #[async_trait::async_trait]
    impl tessera_farm::queue::Queue for FlakyQueue {
        async fn declare(&self, queue: &str) -> Result<(), FarmError> {
            self.inner.declare(queue).await
        }

        async fn declare_reports(
            &self,
            queue: &str,
            max_len: u32,
            ttl: std::time::Duration,
        ) -> Result<(), FarmError> {
            self.inner.declare_reports(queue, max_len, ttl).await
        }

        async fn publish(&self, queue: &str, body: Vec<u8>) -> Result<(), FarmError> {
            self.publishes.fetch_add(1, Ordering::SeqCst);
            let failing = self.failures.load(Ordering::SeqCst);
            if failing > 0 {
                self.failures.store(failing - 1, Ordering::SeqCst);
                return Err(FarmError::Queue {
                    queue: queue.into(),
                    reason: "connection reset".into(),
                });
            }
            self.inner.publish(queue, body).await
        }

        async fn consume(
            &self,
            queue: &str,
            prefetch: u16,
        ) -> Result<Box<dyn tessera_farm::queue::Consumer>, FarmError> {
            self.inner.consume(queue, prefetch).await
        }

        async fn consumers(&self, queue: &str) -> Result<u32, FarmError> {
            self.inner.consumers(queue).await
        }
    }

    fn flaky(failures: u32) -> FlakyQueue {
        FlakyQueue {
            inner: tessera_farm::queue::MemoryQueue::new(5),
            failures: AtomicU32::new(failures),
            publishes: AtomicU32::new(0),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_publish_refused_twice_is_delivered_once() {
        let queue = flaky(2);
        tessera_farm::queue::Queue::declare(&queue, "q")
            .await
            .unwrap();
        publish_patiently(&queue, "q", b"task").await.unwrap();
        assert_eq!(queue.publishes.load(Ordering::SeqCst), 3);
        let mut consumer = tessera_farm::queue::Queue::consume(&queue, "q", 10)
            .await
            .unwrap();
        let first = consumer.next().await.unwrap().expect("the task");
        assert_eq!(first.body, b"task");
        let second = tokio::time::timeout(Duration::from_secs(60), consumer.next()).await;
        assert!(second.is_err(), "published twice: {second:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_broker_down_past_the_patience_fails_the_publish_with_its_error() {
        let queue = flaky(u32::MAX);
        let started = tokio::time::Instant::now();
        let got = publish_patiently(&queue, "q", b"task").await;
        let e = got.unwrap_err();
        assert_eq!(e.to_string(), "queue q: connection reset");
        let waited = started.elapsed();
        assert!(
            waited >= STORE_PATIENCE - Duration::from_secs(45),
            "{waited:?}"
        );
        assert!(
            waited <= STORE_PATIENCE + Duration::from_secs(45),
            "{waited:?}"
        );
        assert!(queue.publishes.load(Ordering::SeqCst) > 10);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stage_is_recorded_however_long_the_database_fails() {
        let tries = std::sync::Arc::new(AtomicU32::new(0));
        let counted = tries.clone();
        let record: StageRecorder = std::sync::Arc::new(move |_: &JobStage| {
            if counted.fetch_add(1, Ordering::SeqCst) < 20 {
                Err(FarmError::Io {
                    path: "job database".into(),
                    reason: "database or disk is full".into(),
                })
            } else {
                Ok(())
            }
        });
        let started = tokio::time::Instant::now();
        recorded(&record, &JobStage::Stitching).await;
        assert_eq!(tries.load(Ordering::SeqCst), 21);
        // Backoff 1, 2, 4, 8, 16, then 30 s: the record waited (for space), it did not give up.
        assert!(started.elapsed() >= Duration::from_secs(31 + 15 * 30));
    }
}
