//! Tasks a drain cuts off go back to their queue as fresh messages, without spending one of
//! their deliveries.
//!
//! Why: a drain (SIGTERM, a spot notice) is the machine's fault, never the task's. A task
//! aborted with its delivery unsettled would be requeued by the broker, which counts that
//! against the queue's delivery limit, so a long segment on a busy spot pool could be
//! dead-lettered and fail its job. Like store and unfit faults (retry.rs), a cut-off task is
//! published again with its `bounces` counted up and the old delivery acked; past
//! [`MAX_BOUNCES`](crate::attempts::MAX_BOUNCES) give-backs it is requeued as before, so a task that somehow causes every
//! drain still ends at the delivery limit.
//!
//! How: every delivery the consume loop starts is held here through a wrapping acker, which
//! records whether the task settled it. The task itself is not changed; when the drain's
//! grace is over and the tasks are aborted, what they left unsettled is given back here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use tessera_farm::queue::{Acker, Delivery, Queue};
use tessera_farm::FarmError;

use crate::attempts::Attempts;

/// A delivery's own acker, and whether the task settled it.
struct Held {
    acker: Box<dyn Acker>,
    settled: AtomicBool,
}

/// The acker a task gets: settles the held delivery and records that it did.
struct HeldAcker(Arc<Held>);

#[async_trait]
impl Acker for HeldAcker {
    async fn ack(&self) -> Result<(), FarmError> {
        self.0.settled.store(true, Ordering::SeqCst);
        self.0.acker.ack().await
    }

    async fn reject(&self, requeue: bool) -> Result<(), FarmError> {
        self.0.settled.store(true, Ordering::SeqCst);
        self.0.acker.reject(requeue).await
    }
}

/// A started task's delivery: its body, counters and queue, to publish it again.
struct Tracked {
    held: Arc<Held>,
    body: Vec<u8>,
    attempts: Attempts,
    queue: String,
}

/// The deliveries of the tasks running now.
pub(crate) struct GiveBack {
    queue: Arc<dyn Queue>,
    tracked: Vec<Tracked>,
}

impl GiveBack {
    /// Nothing held yet; copies are published to `queue`.
    pub(crate) fn new(queue: Arc<dyn Queue>) -> Self {
        GiveBack {
            queue,
            tracked: Vec::new(),
        }
    }

    /// Holds `delivery` (from `queue`) and returns it with the acker its task must use.
    pub(crate) fn track(&mut self, delivery: Delivery, queue: &str) -> Delivery {
        self.prune();
        let attempts = Attempts::of(&delivery);
        let held = Arc::new(Held {
            acker: delivery.acker,
            settled: AtomicBool::new(false),
        });
        self.tracked.push(Tracked {
            held: held.clone(),
            body: delivery.body.clone(),
            attempts,
            queue: queue.to_string(),
        });
        Delivery {
            acker: Box::new(HeldAcker(held)),
            ..delivery
        }
    }

    /// Forgets the deliveries settled, and those whose task ended without settling them
    /// (dropping the own acker requeues them, as it did before this module).
    pub(crate) fn prune(&mut self) {
        self.tracked
            .retain(|t| !t.held.settled.load(Ordering::SeqCst) && Arc::strong_count(&t.held) > 1);
    }

    /// Gives back every delivery still unsettled: call once the tasks are aborted.
    pub(crate) async fn give_back_all(&mut self) {
        for t in std::mem::take(&mut self.tracked) {
            if t.held.settled.load(Ordering::SeqCst) {
                continue;
            }
            give_back(&*self.queue, &t.queue, &t.body, t.attempts, &*t.held.acker).await;
        }
    }

    /// Gives back a delivery no task started (it waited in the loop's channel).
    pub(crate) async fn give_back_unstarted(&self, delivery: Delivery, queue: &str) {
        let attempts = Attempts::of(&delivery);
        give_back(
            &*self.queue,
            queue,
            &delivery.body,
            attempts,
            &*delivery.acker,
        )
        .await;
    }
}

/// Publishes `body` to `queue` again, bounce-counted (its other counters carried on), and
/// acks the old delivery; requeues it (spending a delivery) when it was given back
/// [`MAX_BOUNCES`](crate::attempts::MAX_BOUNCES) times or the publish fails.
async fn give_back(
    queue: &dyn Queue,
    name: &str,
    body: &[u8],
    attempts: Attempts,
    acker: &dyn Acker,
) {
    if !attempts.worn_out() {
        let next = attempts.bounced();
        match queue.publish(name, next.written(body)).await {
            Ok(()) => {
                tracing::info!(
                    queue = name,
                    bounces = next.bounces,
                    "drained task given back"
                );
                let _ = acker.ack().await;
                return;
            }
            Err(e) => tracing::warn!(queue = name, error = %e, "drained task requeued"),
        }
    }
    let _ = acker.reject(true).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attempts::MAX_BOUNCES;
    use tessera_farm::queue::MemoryQueue;

    async fn next(queue: &MemoryQueue) -> Delivery {
        let mut c = queue.consume("w", 1).await.unwrap();
        c.next().await.unwrap().unwrap()
    }

    #[tokio::test]
    async fn an_aborted_task_goes_back_without_spending_a_delivery() {
        let queue = Arc::new(MemoryQueue::new(5));
        queue
            .publish("w", br#"{"job":"j"}"#.to_vec())
            .await
            .unwrap();
        let mut held = GiveBack::new(queue.clone());
        let d = held.track(next(&queue).await, "w");
        // The task holds its delivery until the drain aborts it.
        let task = tokio::spawn(async move {
            let _d = d;
            std::future::pending::<()>().await
        });
        task.abort();
        let _ = task.await;
        held.give_back_all().await;
        let again = next(&queue).await;
        assert_eq!(again.redeliveries, 0, "the give-back spent a delivery");
        assert_eq!(Attempts::in_body(&again.body).bounces, 1);
        again.acker.ack().await.unwrap();
        assert_eq!(queue.ready_len("w"), 0);
    }

    #[tokio::test]
    async fn a_settled_delivery_is_not_given_back_and_the_cap_requeues() {
        let queue = Arc::new(MemoryQueue::new(50));
        queue.publish("w", b"{}".to_vec()).await.unwrap();
        let mut held = GiveBack::new(queue.clone());
        let d = held.track(next(&queue).await, "w");
        d.acker.ack().await.unwrap();
        held.give_back_all().await;
        assert_eq!(queue.ready_len("w"), 0, "an acked task came back");
        // Given back MAX_BOUNCES times already: requeued, its delivery spent.
        let worn = format!(r#"{{"bounces":{MAX_BOUNCES}}}"#);
        queue.publish("w", worn.into_bytes()).await.unwrap();
        let d = next(&queue).await;
        held.give_back_unstarted(d, "w").await;
        let again = next(&queue).await;
        assert_eq!(again.redeliveries, 1);
        assert_eq!(Attempts::in_body(&again.body).bounces, MAX_BOUNCES);
    }
}
