//! The fleet as its workers report it: the newest status report of each worker (slots, tasks
//! in hand, draining, each card's sessions against its budget, use and health), for the
//! dashboard's workers page.
//!
//! Why in memory: a report is a few seconds' truth that the next one replaces; keeping them
//! would cost a database write per worker every five seconds for nothing. After a dispatcher
//! restart the page fills again within one report interval. Times are the dispatcher's own
//! clock at receipt, so no worker's clock skew shows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tessera_farm::backoff::Backoff;
use tessera_farm::queue::Queue;
use tessera_model::wire::{WorkerStatus, QUEUE_STATUS, STATUS_FORGET_SECONDS};
use tokio_util::sync::CancellationToken;

/// The most workers remembered. Why: reports come from anything that can publish to the
/// broker; a flood of made-up names must not grow the dispatcher without bound.
const MAX_WORKERS: usize = 10_000;

/// Prefetch of the status consumer.
const PREFETCH: u16 = 64;

/// The newest report of each worker heard from lately; cheap to clone (clones share it).
#[derive(Clone, Default)]
pub struct Fleet {
    inner: Arc<Mutex<HashMap<String, (WorkerStatus, Instant)>>>,
}

/// A worker's newest report and how long ago it came.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The report.
    pub status: WorkerStatus,
    /// Time since the dispatcher received it.
    pub age: Duration,
}

impl Fleet {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (WorkerStatus, Instant)>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `status` as its worker's newest report, received `at`.
    pub fn heard(&self, status: WorkerStatus, at: Instant) {
        let mut map = self.lock();
        if map.len() >= MAX_WORKERS && !map.contains_key(&status.worker) {
            // Full: make room by forgetting the silent ones (only then, not per report).
            let forget = Duration::from_secs(STATUS_FORGET_SECONDS);
            map.retain(|_, (_, t)| at.saturating_duration_since(*t) <= forget);
        }
        if map.len() >= MAX_WORKERS && !map.contains_key(&status.worker) {
            tracing::warn!(worker = %status.worker, "status report dropped: too many workers");
            return;
        }
        map.insert(status.worker.clone(), (status, at));
    }

    /// The workers heard from in the last [`STATUS_FORGET_SECONDS`] before `now`, by name.
    pub fn seen(&self, now: Instant) -> Vec<Seen> {
        let forget = Duration::from_secs(STATUS_FORGET_SECONDS);
        let mut all: Vec<Seen> = self
            .lock()
            .values()
            .map(|(s, at)| Seen {
                status: s.clone(),
                age: now.saturating_duration_since(*at),
            })
            .filter(|s| s.age <= forget)
            .collect();
        all.sort_by(|a, b| a.status.worker.cmp(&b.status.worker));
        all
    }
}

/// Reads the status queue into `fleet` until `shutdown`, declaring it and consuming again (1 s
/// doubling to 30 s) whenever the broker drops the consumer (a restart, a deleted queue). An
/// unreadable report is dropped and logged.
pub async fn listen(queue: Arc<dyn Queue>, fleet: Fleet, shutdown: CancellationToken) {
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30)).jittered();
    while !shutdown.is_cancelled() {
        // Declared before every consume: the queue may have been deleted meanwhile.
        let consumed = match tessera_farm::queue::declare_status_queue(&*queue).await {
            Ok(()) => queue.consume(QUEUE_STATUS, PREFETCH).await,
            Err(e) => Err(e),
        };
        match consumed {
            Ok(mut consumer) => loop {
                let next = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    next = consumer.next() => next,
                };
                let delivery = match next {
                    Ok(Some(d)) => d,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(error = %e, "status consumer lost");
                        break;
                    }
                };
                backoff.reset();
                match WorkerStatus::decode(&delivery.body) {
                    Ok(status) => fleet.heard(status, Instant::now()),
                    Err(e) => tracing::warn!(error = %e, "status report dropped"),
                }
                let _ = delivery.acker.ack().await;
            },
            Err(e) => tracing::debug!(error = %e, "status queue not consumed"),
        }
        if !backoff.wait(&shutdown).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_farm::queue::MemoryQueue;
    use tessera_model::wire::{encode_message, WIRE_VERSION};

    fn report(worker: &str) -> WorkerStatus {
        WorkerStatus {
            v: WIRE_VERSION,
            worker: worker.into(),
            release: "0.1.0".into(),
            queue: "tessera.encode.cpu".into(),
            slots: 2,
            draining: None,
            unfit: None,
            tasks: vec![],
            cards: vec![],
        }
    }

    #[test]
    fn the_newest_report_wins_and_silent_workers_are_forgotten() {
        let fleet = Fleet::default();
        let t0 = Instant::now();
        fleet.heard(report("b"), t0);
        let mut a = report("a");
        fleet.heard(a.clone(), t0);
        a.draining = Some("spot_interruption".into());
        fleet.heard(a, t0 + Duration::from_secs(5));
        let seen = fleet.seen(t0 + Duration::from_secs(10));
        let names: Vec<&str> = seen.iter().map(|s| s.status.worker.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            seen[0].status.draining.as_deref(),
            Some("spot_interruption")
        );
        assert_eq!(seen[0].age, Duration::from_secs(5));
        assert_eq!(seen[1].age, Duration::from_secs(10));
        let later = t0 + Duration::from_secs(STATUS_FORGET_SECONDS + 3);
        let names: Vec<String> = fleet
            .seen(later)
            .into_iter()
            .map(|s| s.status.worker)
            .collect();
        assert_eq!(names, ["a"], "b went silent past the forget time");
    }

    #[tokio::test]
    async fn listen_reads_reports_and_drops_unreadable_ones() {
        let mem = MemoryQueue::new(5);
        let queue: Arc<dyn Queue> = Arc::new(mem.clone());
        tessera_farm::queue::declare_farm_queues(&*queue)
            .await
            .unwrap();
        queue
            .publish(QUEUE_STATUS, b"garbage".to_vec())
            .await
            .unwrap();
        queue
            .publish(QUEUE_STATUS, encode_message(&report("w1")))
            .await
            .unwrap();
        let fleet = Fleet::default();
        let stop = CancellationToken::new();
        let task = tokio::spawn(listen(queue.clone(), fleet.clone(), stop.clone()));
        let deadline = Instant::now() + Duration::from_secs(5);
        while fleet.seen(Instant::now()).is_empty() {
            assert!(Instant::now() < deadline, "the report was not read");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(fleet.seen(Instant::now())[0].status.worker, "w1");
        assert_eq!(mem.ready_len(QUEUE_STATUS), 0, "both taken off the queue");
        stop.cancel();
        task.await.unwrap();
    }
}
