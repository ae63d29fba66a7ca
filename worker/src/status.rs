//! The worker's status report: every few seconds, what it holds now (its slots, the tasks in
//! hand, whether it drains or holds back, each card's sessions against its budget, use and
//! health) goes to the status queue for the dispatcher's dashboard (wire `status.rs`).
//!
//! Why pushed over the broker rather than read from `/metrics`: the dispatcher cannot address
//! pods and spot machines, but every worker reaches the broker. The book of tasks in hand is
//! kept here, by the consume loop, so the report says which job each slot serves.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tessera_farm::queue::Queue;
use tessera_model::wire::{encode_message, TaskInHand, WorkerStatus, QUEUE_STATUS, WIRE_VERSION};
use tokio_util::sync::CancellationToken;

use crate::WorkerConfig;

/// The tasks a worker runs now, by a number of its own.
#[derive(Default)]
pub(crate) struct Book {
    next: AtomicU64,
    tasks: Mutex<HashMap<u64, Entry>>,
}

struct Entry {
    job_id: String,
    task: tessera_model::wire::TaskRef,
    queue: String,
    started: Instant,
}

/// A task's place in the book, given up when the task ends (however it ends: done, failed,
/// aborted by a drain).
pub(crate) struct InHand {
    book: Arc<Book>,
    id: u64,
}

impl Drop for InHand {
    fn drop(&mut self) {
        self.book.lock().remove(&self.id);
    }
}

impl Book {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enters the task of the message `body`, from `queue`, until the returned place drops.
    /// A message whose job and task cannot be read is not entered (the task fails it soon).
    pub(crate) fn enter(self: &Arc<Self>, body: &[u8], queue: &str) -> Option<InHand> {
        let (job_id, _plan, task) = tessera_model::wire::task_identity(body)?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let entry = Entry {
            job_id,
            task,
            queue: queue.to_string(),
            started: Instant::now(),
        };
        self.lock().insert(id, entry);
        Some(InHand {
            book: self.clone(),
            id,
        })
    }

    /// The tasks in hand, oldest first.
    fn in_hand(&self) -> Vec<TaskInHand> {
        let now = Instant::now();
        let mut tasks: Vec<(Instant, TaskInHand)> = self
            .lock()
            .values()
            .map(|e| {
                let t = TaskInHand {
                    job_id: e.job_id.clone(),
                    task: e.task,
                    queue: e.queue.clone(),
                    running_s: now.duration_since(e.started).as_secs(),
                };
                (e.started, t)
            })
            .collect();
        tasks.sort_by_key(|(started, _)| *started);
        tasks.into_iter().map(|(_, t)| t).collect()
    }
}

/// The report of `config`'s worker now.
pub(crate) fn report(
    config: &WorkerConfig,
    book: &Book,
    primary_queue: &str,
    unfit: Option<String>,
) -> WorkerStatus {
    WorkerStatus {
        v: WIRE_VERSION,
        worker: config.id.clone(),
        release: env!("CARGO_PKG_VERSION").to_string(),
        queue: primary_queue.to_string(),
        slots: u32::try_from(config.slots).unwrap_or(u32::MAX),
        draining: config.drain.reason().map(|r| r.as_str().to_string()),
        unfit,
        tasks: book.in_hand(),
        cards: config
            .gpus
            .as_ref()
            .map(|g| g.card_status())
            .unwrap_or_default(),
    }
}

/// Sends a report every `every` until `stop`, and a last one then (draining, with what is
/// still in hand). A report the broker does not take is skipped (the next one says it again)
/// and the queue declared again, in case a broker restart deleted it.
pub(crate) async fn report_every(
    every: Duration,
    queue: Arc<dyn Queue>,
    make: impl Fn() -> WorkerStatus + Send,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let last = tokio::select! {
            _ = tick.tick() => false,
            _ = stop.cancelled() => true,
        };
        let body = encode_message(&make());
        if let Err(e) = queue.publish(QUEUE_STATUS, body).await {
            // The queue may be gone (deleted, or transient before a restart): declared again.
            tracing::debug!(error = %e, "status report not sent");
            let _ = tessera_farm::queue::declare_status_queue(&*queue).await;
        }
        if last {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::wire::TaskRef;

    #[test]
    fn a_task_is_in_hand_until_its_place_drops() {
        let book = Arc::new(Book::default());
        let seg = br#"{"v":1,"job_id":"j1","plan":7,"segment":3}"#;
        let stitch = br#"{"v":1,"job_id":"j2","plan":7,"output":0}"#;
        let a = book.enter(seg, "tessera.encode.cpu").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let b = book.enter(stitch, "tessera.stitch").unwrap();
        assert!(book.enter(b"not json", "tessera.encode.cpu").is_none());
        let now = book.in_hand();
        let seen: Vec<(&str, TaskRef, &str)> = now
            .iter()
            .map(|t| (t.job_id.as_str(), t.task, t.queue.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("j1", TaskRef::Segment(3), "tessera.encode.cpu"),
                ("j2", TaskRef::Stitch(0), "tessera.stitch")
            ]
        );
        drop(a);
        let left = book.in_hand();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].job_id, "j2");
        drop(b);
        assert!(book.in_hand().is_empty());
    }

    #[tokio::test]
    async fn reports_go_out_on_each_tick_and_once_more_at_the_stop() {
        use tessera_farm::queue::MemoryQueue;
        let mem = MemoryQueue::new(5);
        let queue: Arc<dyn Queue> = Arc::new(mem.clone());
        tessera_farm::queue::declare_farm_queues(&*queue)
            .await
            .unwrap();
        let stop = CancellationToken::new();
        let sent = Arc::new(AtomicU64::new(0));
        let counted = sent.clone();
        let make = move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            WorkerStatus {
                v: WIRE_VERSION,
                worker: format!("w{n}"),
                release: "t".into(),
                queue: "q".into(),
                slots: 1,
                draining: None,
                unfit: None,
                tasks: vec![],
                cards: vec![],
            }
        };
        let task = tokio::spawn(report_every(
            Duration::from_millis(20),
            queue,
            make,
            stop.clone(),
        ));
        tokio::time::sleep(Duration::from_millis(110)).await;
        stop.cancel();
        task.await.unwrap();
        let bodies = mem.drain(QUEUE_STATUS);
        let n = sent.load(Ordering::SeqCst) as usize;
        assert!(n >= 3, "{n} reports in 110 ms at 20 ms");
        assert_eq!(bodies.len(), n, "every report made was published");
        let last = WorkerStatus::decode(bodies.last().unwrap()).unwrap();
        assert_eq!(last.worker, format!("w{}", n - 1));
    }
}
