//! A stitch's delivery is acked when the stitch begins, and the stitch is heard from by
//! heartbeats instead.
//!
//! Why: a stitch copies and decodes a whole output; its child may run 60 s + frames/50 (about
//! 2.4 h for a 2-hour 60 fps output), past RabbitMQ's consumer timeout (30 min by default,
//! global in RabbitMQ 3.10 and not settable on a managed broker). A delivery held that long is
//! taken back by the broker (its channel closed) and redelivered, so the stitch ran again
//! until its deliveries ran out (`task_lost`). Acked at once, nothing is held; a
//! [`SegmentOutcome::Running`] event every [`STITCH_HEARTBEAT_SECONDS`] tells the dispatcher
//! the stitch is alive, and it republishes the stitch when they stop (the worker died).
//!
//! After the ack, the task's own settling goes through [`TakenAcker`]: an ack is moot, a
//! dead-letter is moot too (the failure event was published first), and a requeue (a
//! result that could not be reported) publishes a copy that counts the delivery as lost
//! (attempts.rs); a failed attempt is retried by its own copy (retry.rs), as any task's.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tessera_farm::queue::{Acker, Delivery, Queue};
use tessera_farm::FarmError;
use tessera_model::wire::{encode_message, SegmentOutcome, QUEUE_EVENTS, STITCH_HEARTBEAT_SECONDS};

use crate::attempts::Attempts;
use crate::segment::{SegmentRunner, Ticket};

/// The settling of a stitch delivery already acked (see the module's documentation).
struct TakenAcker {
    queue: Arc<dyn Queue>,
    origin: String,
    body: Vec<u8>,
    attempts: Attempts,
}

#[async_trait]
impl Acker for TakenAcker {
    async fn ack(&self) -> Result<(), FarmError> {
        Ok(())
    }

    async fn reject(&self, requeue: bool) -> Result<(), FarmError> {
        if !requeue {
            // The failure event went first; the broker forgot the task when it was taken.
            return Ok(());
        }
        let copy = self.attempts.lost_once().written(&self.body);
        self.queue.publish(&self.origin, copy).await
    }
}

impl SegmentRunner {
    /// Acks `delivery` now and returns it with a [`TakenAcker`]; `None` when the ack failed
    /// (the broker still holds the task and will redeliver it, so it is not run here).
    pub(super) async fn take(&self, delivery: Delivery, origin: &str) -> Option<Delivery> {
        if let Err(e) = delivery.acker.ack().await {
            tracing::warn!(error = %e, "stitch delivery not acked; left to the broker");
            return None;
        }
        Some(Delivery {
            acker: Box::new(TakenAcker {
                queue: self.queue.clone(),
                origin: origin.to_string(),
                body: delivery.body.clone(),
                attempts: Attempts::of(&delivery),
            }),
            ..delivery
        })
    }

    /// Sends a `running` event for `ticket` now and every [`STITCH_HEARTBEAT_SECONDS`], for
    /// as long as it is polled (a failed publish is logged; the next one may pass).
    pub(super) async fn heartbeats(&self, ticket: Ticket<'_>) -> std::convert::Infallible {
        let every = Duration::from_secs(STITCH_HEARTBEAT_SECONDS);
        loop {
            let event = self.event(ticket, SegmentOutcome::Running);
            if let Err(e) = self
                .queue
                .publish(QUEUE_EVENTS, encode_message(&event))
                .await
            {
                tracing::warn!(job = ticket.job, error = %e, "stitch heartbeat not published");
            }
            tokio::time::sleep(every).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_farm::queue::MemoryQueue;

    #[tokio::test]
    async fn a_requeued_taken_task_goes_back_as_a_copy_that_counts_it_lost() {
        let queue = Arc::new(MemoryQueue::new(5));
        let body = br#"{"job_id":"j","output":0,"retries":1}"#.to_vec();
        let acker = TakenAcker {
            queue: queue.clone(),
            origin: "stitch".into(),
            body: body.clone(),
            attempts: Attempts::in_body(&body),
        };
        acker.ack().await.unwrap();
        acker.reject(false).await.unwrap();
        assert_eq!(queue.ready_len("stitch"), 0, "ack and dead-letter are moot");
        acker.reject(true).await.unwrap();
        let copy = queue.drain("stitch").pop().unwrap();
        let counted = Attempts::in_body(&copy);
        assert_eq!((counted.failed, counted.lost), (1, 1));
        let v: serde_json::Value = serde_json::from_slice(&copy).unwrap();
        assert_eq!(v["job_id"], "j");
    }
}
