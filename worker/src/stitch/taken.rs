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
//! requeue publishes a copy with its `retries` counted up (the broker's delivery count no
//! longer counts them), and a dead-letter is moot too (the failure event was published first).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tessera_farm::queue::{Acker, Delivery, Queue};
use tessera_farm::FarmError;
use tessera_model::wire::{encode_message, SegmentOutcome, QUEUE_EVENTS, STITCH_HEARTBEAT_SECONDS};

use crate::segment::{SegmentRunner, Ticket};

/// The settling of a stitch delivery already acked (see the module's documentation).
struct TakenAcker {
    queue: Arc<dyn Queue>,
    origin: String,
    body: Vec<u8>,
}

#[async_trait]
impl Acker for TakenAcker {
    async fn ack(&self) -> Result<(), FarmError> {
        Ok(())
    }

    async fn nack(&self, requeue: bool) -> Result<(), FarmError> {
        if !requeue {
            // The failure event went first; the broker forgot the task when it was taken.
            return Ok(());
        }
        self.queue.publish(&self.origin, retried(&self.body)).await
    }
}

/// How many times the task in `body` was given back after being taken (its `retries` field;
/// 0 when absent).
pub(super) fn retries(body: &[u8]) -> u32 {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("retries").and_then(serde_json::Value::as_u64))
        .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// `body` with its `retries` field counted up (unchanged when it is not a JSON object).
fn retried(body: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(mut task)) => {
            task.insert("retries".into(), (u64::from(retries(body)) + 1).into());
            serde_json::to_vec(&task).unwrap_or_else(|_| body.to_vec())
        }
        _ => body.to_vec(),
    }
}

impl SegmentRunner {
    /// Acks `delivery` now and returns it with a [`TakenAcker`] and its retries counted as
    /// redeliveries; `None` when the ack failed (the broker still holds the task and will
    /// redeliver it, so it is not run here).
    pub(super) async fn take(&self, delivery: Delivery, origin: &str) -> Option<Delivery> {
        if let Err(e) = delivery.acker.ack().await {
            tracing::warn!(error = %e, "stitch delivery not acked; left to the broker");
            return None;
        }
        let redeliveries = delivery
            .redeliveries
            .saturating_add(retries(&delivery.body));
        Some(Delivery {
            acker: Box::new(TakenAcker {
                queue: self.queue.clone(),
                origin: origin.to_string(),
                body: delivery.body.clone(),
            }),
            redeliveries,
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

    #[test]
    fn a_requeued_taken_task_counts_its_retries_in_its_body() {
        let body = br#"{"job_id":"j","output":0}"#;
        assert_eq!(retries(body), 0);
        let once = retried(body);
        assert_eq!(retries(&once), 1);
        let twice = retried(&once);
        assert_eq!(retries(&twice), 2);
        let v: serde_json::Value = serde_json::from_slice(&twice).unwrap();
        assert_eq!(v["job_id"], "j");
        // Not an object: left as it is.
        assert_eq!(retried(b"[1]"), b"[1]".to_vec());
    }
}
