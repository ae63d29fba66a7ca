//! What happens to a task attempt that failed: retried with backoff, given back as a fresh
//! message when the fault is not the task's (S3 unreachable, a GPU without a free session),
//! or reported as failed and settled (acked for input errors, dead-lettered at the limit).
//!
//! Why apart: the retry policy is the subtle part of a worker; keeping it in one place keeps
//! the task runners readable.

use std::time::Duration;

use tessera_farm::model::{encode_message, SegmentOutcome, TaskRef, QUEUE_EVENTS};
use tessera_farm::queue::Delivery;
use tessera_farm::{ErrorClass, FarmError};

use crate::segment::SegmentRunner;

impl SegmentRunner {
    pub(crate) async fn fail(
        &self,
        job: &str,
        task: TaskRef,
        origin: &str,
        delivery: Delivery,
        err: FarmError,
    ) {
        self.config.metrics.failed();
        let attempt = delivery.redeliveries + 1;
        let last = attempt >= self.config.delivery_limit;
        tracing::warn!(
            job, %task, attempt, code = %err.code(), error = %err, "task attempt failed"
        );
        if matches!(err, FarmError::StoreUnavailable { .. }) {
            // S3 is down or overloaded: not the task's fault. Wait until it answers again,
            // then give the task back as a fresh message (its deliveries are not spent).
            self.wait_for_store(job).await;
            self.republish(delivery, origin).await;
            return;
        }
        if crate::gpu_task::is_gpu_busy(&err) {
            // No session, a busy or faulted card: not the segment's fault. It goes back as a
            // fresh message (its delivery count starts again) after a pause; the card's
            // budget was already lowered or the card marked unhealthy.
            tokio::time::sleep(self.config.retry_backoff).await;
            self.republish(delivery, origin).await;
            return;
        }
        if err.class() == ErrorClass::Retry && !last {
            let backoff = self
                .config
                .retry_backoff
                .saturating_mul(1 << delivery.redeliveries.min(6))
                .min(Duration::from_secs(30));
            tokio::time::sleep(backoff).await;
            let _ = delivery.acker.nack(true).await;
            return;
        }
        let event = self.event(
            job,
            task,
            SegmentOutcome::Failed {
                code: err.code(),
                class: err.class(),
                message: err.to_string(),
            },
        );
        if let Err(e) = self
            .queue
            .publish(QUEUE_EVENTS, encode_message(&event))
            .await
        {
            tracing::error!(error = %e, "failure event not published; task requeued");
            let _ = delivery.acker.nack(true).await;
            return;
        }
        // Input errors are final: ack (the failure is recorded); retries exhausted: dead-letter.
        if err.class() == ErrorClass::Abort {
            let _ = delivery.acker.ack().await;
        } else {
            let _ = delivery.acker.nack(false).await;
        }
    }

    /// Publishes a copy of the task to `queue` and acks the delivery (requeues it when the
    /// publish fails): a retry that does not count against the delivery limit.
    async fn republish(&self, delivery: Delivery, queue: &str) {
        match self.queue.publish(queue, delivery.body.clone()).await {
            Ok(()) => {
                let _ = delivery.acker.ack().await;
            }
            Err(_) => {
                let _ = delivery.acker.nack(true).await;
            }
        }
    }

    /// Returns once the store answers again (checked every 1 s, 2 s, then 4 s: a probe is
    /// cheap, and the worker should resume within seconds of the store's return).
    async fn wait_for_store(&self, job: &str) {
        let mut backoff = Duration::from_secs(1);
        loop {
            tokio::time::sleep(backoff).await;
            match self
                .store
                .exists(&tessera_farm::model::keys::ended(job))
                .await
            {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?backoff, "store still unavailable");
                    backoff = (backoff * 2).min(Duration::from_secs(4));
                }
            }
        }
    }
}
