//! What happens to a task attempt that failed: retried with backoff, given back as a fresh
//! message when the fault is not the task's (S3 unreachable, a GPU without a free session),
//! or reported as failed and settled (acked for input errors, dead-lettered at the limit).
//!
//! Why apart: the retry policy is the subtle part of a worker; keeping it in one place keeps
//! the task runners readable.

use std::time::Duration;

use tessera_farm::backoff::Backoff;
use tessera_farm::queue::Delivery;
use tessera_farm::FarmError;
use tessera_model::error_code::ErrorClass;
use tessera_model::wire::{encode_message, SegmentOutcome, QUEUE_EVENTS};

use crate::segment::{SegmentRunner, Ticket};

/// How many times a task may go back as a fresh message for a fault not its own (store
/// down, no GPU session, an unfit worker) before it fails with that fault. Why a cap: a
/// need no worker can meet (a codec no worker has, more sessions than any card) would
/// otherwise circle forever and its job never end.
pub(crate) const MAX_BOUNCES: u64 = 20;

/// How many times the task in `body` was given back (its `bounces` field; 0 when absent).
pub(crate) fn bounces(body: &[u8]) -> u64 {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("bounces").and_then(serde_json::Value::as_u64))
        .unwrap_or(0)
}

/// `body` with its `bounces` field counted up (unchanged when it is not a JSON object).
pub(crate) fn bounced(body: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(mut task)) => {
            let n = task.get("bounces").and_then(serde_json::Value::as_u64);
            task.insert("bounces".into(), (n.unwrap_or(0) + 1).into());
            serde_json::to_vec(&task).unwrap_or_else(|_| body.to_vec())
        }
        _ => body.to_vec(),
    }
}

impl SegmentRunner {
    pub(crate) async fn fail(
        &self,
        ticket: Ticket<'_>,
        origin: &str,
        delivery: Delivery,
        err: FarmError,
    ) {
        let (job, task) = (ticket.job, ticket.task);
        let err = crate::fitness::disk_full_is_unfit(err);
        self.config.metrics.failed();
        let attempt = delivery.redeliveries + 1;
        let last = attempt >= self.config.delivery_limit;
        tracing::warn!(
            job, %task, attempt, code = %err.code(), error = %err, "task attempt failed"
        );
        // Faults that are not the task's give it back as a fresh message (its deliveries
        // are not spent), up to MAX_BOUNCES times; past that it fails with the last fault.
        let worn_out = bounces(&delivery.body) >= MAX_BOUNCES;
        if matches!(err, FarmError::StoreUnavailable { .. }) && !worn_out {
            // S3 is down or overloaded: wait until it answers again.
            self.wait_for_store(job).await;
            self.republish(delivery, origin).await;
            return;
        }
        if crate::gpu_task::is_gpu_busy(&err) && !worn_out {
            // No session, a busy or faulted card: after a pause; the card's budget was
            // already lowered or the card marked unhealthy.
            tokio::time::sleep(self.config.retry_backoff).await;
            self.republish(delivery, origin).await;
            return;
        }
        if let FarmError::WorkerUnfit { reason, pause } = &err {
            // This worker's own fault (a full disk, a missing encoder): another worker takes
            // the task, and a full disk pauses this one until space returns.
            if *pause {
                self.fitness.pause(reason);
            }
            if !worn_out {
                tokio::time::sleep(self.config.retry_backoff).await;
                self.republish(delivery, origin).await;
                return;
            }
        }
        if err.class() == ErrorClass::Retry && !last && !worn_out {
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
            ticket,
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
        if err.class() == ErrorClass::Abort || worn_out {
            let _ = delivery.acker.ack().await;
        } else {
            let _ = delivery.acker.nack(false).await;
        }
    }

    /// Publishes a copy of the task to `queue`, its `bounces` counted up, and acks the
    /// delivery (requeues it when the publish fails): a retry that does not count against
    /// the delivery limit.
    async fn republish(&self, delivery: Delivery, queue: &str) {
        match self.queue.publish(queue, bounced(&delivery.body)).await {
            Ok(()) => {
                let _ = delivery.acker.ack().await;
            }
            Err(_) => {
                let _ = delivery.acker.nack(true).await;
            }
        }
    }

    /// Returns once the store answers again, or after [`STORE_WAIT`]: the delivery is held
    /// meanwhile, and must be settled well inside the broker's 30-minute consumer timeout
    /// (the task is then given back, bounce-counted).
    async fn wait_for_store(&self, job: &str) {
        let marker = tessera_model::wire::keys::ended(job);
        until_store_answers(STORE_WAIT, || self.store.exists(&marker)).await;
    }
}

/// How long a worker holds a task while its store is unavailable.
const STORE_WAIT: Duration = Duration::from_secs(15 * 60);

/// The waits between store probes: 1 s, 2 s, then 4 s, jittered.
fn store_backoff() -> Backoff {
    Backoff::new(Duration::from_secs(1), Duration::from_secs(4)).jittered()
}

/// Probes with `probe` until it answers (true) or `patience` has passed (false), waiting about
/// 1 s, 2 s, then 4 s before each probe: a probe is cheap, and the worker should resume within
/// seconds of the store's return. Each wait is moved by up to half of itself (and cut at the
/// deadline). Why the jitter: a store answering 503 SlowDown is overloaded, and a fleet of
/// workers probing on the same beat keeps it so.
async fn until_store_answers<T, F, Fut>(patience: Duration, mut probe: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, FarmError>>,
{
    let deadline = tokio::time::Instant::now() + patience;
    let mut backoff = store_backoff();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        tokio::time::sleep(backoff.next_delay().min(left)).await;
        match probe().await {
            Ok(_) => return true,
            Err(e) => {
                let retry_in = backoff.current();
                tracing::warn!(error = %e, ?retry_in, "store still unavailable");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn down() -> FarmError {
        FarmError::StoreUnavailable {
            key: "ended/j".into(),
            reason: "head: SlowDown (HTTP 503)".into(),
        }
    }

    #[test]
    fn the_store_waits_are_jittered_within_half_either_way() {
        let mut backoff = store_backoff();
        let waits: Vec<_> = (0..12).map(|_| backoff.next_delay()).collect();
        let nominal = [1u64, 2, 4].into_iter().chain(std::iter::repeat(4));
        for (wait, n) in waits.iter().zip(nominal) {
            let n = Duration::from_secs(n);
            assert!(
                *wait >= n / 2 && *wait < n * 3 / 2,
                "wait {wait:?} for {n:?}"
            );
        }
        let mut capped: Vec<_> = waits.iter().skip(2).collect();
        capped.dedup();
        assert!(
            capped.len() > 1,
            "every wait the same, a fleet in step: {waits:?}"
        );
    }

    #[tokio::test]
    async fn a_store_that_never_answers_is_given_up_at_the_deadline() {
        // The first wait (0.5 to 1.5 s) is cut at the 200 ms patience.
        let started = tokio::time::Instant::now();
        let patience = Duration::from_millis(200);
        let answered = until_store_answers(patience, || async { Err::<(), _>(down()) }).await;
        let took = started.elapsed();
        assert!(!answered);
        assert!(
            took >= patience && took < Duration::from_millis(480),
            "{took:?}"
        );
    }

    #[test]
    fn a_given_back_task_counts_its_bounces_and_keeps_everything_else() {
        let task = br#"{"v":1,"job_id":"j","segment":2,"renditions":[]}"#;
        assert_eq!(bounces(task), 0);
        let once = bounced(task);
        let twice = bounced(&once);
        assert_eq!((bounces(&once), bounces(&twice)), (1, 2));
        let v: serde_json::Value = serde_json::from_slice(&twice).unwrap();
        assert_eq!(
            (v["job_id"].as_str(), v["segment"].as_u64()),
            (Some("j"), Some(2))
        );
        assert_eq!(bounced(b"not json"), b"not json".to_vec());
    }
}
