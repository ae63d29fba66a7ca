//! What happens to a task attempt that failed: retried with backoff as a fresh copy that
//! counts the failure (attempts.rs), given back as a fresh message when the fault is not the
//! task's (S3 unreachable, a GPU without a free session), or reported as failed and settled
//! (acked for input errors, dead-lettered at the limit).
//!
//! Why apart: the retry policy is the subtle part of a worker; keeping it in one place keeps
//! the task runners readable.

use std::time::Duration;

use tessera_farm::backoff::Backoff;
use tessera_farm::queue::{Delivery, Queue};
use tessera_farm::FarmError;
use tessera_model::error_code::ErrorClass;
use tessera_model::wire::{encode_message, SegmentOutcome, QUEUE_EVENTS};

use crate::attempts::Attempts;
use crate::segment::{SegmentRunner, Ticket};

impl SegmentRunner {
    /// Settles an attempt that ended in `err`: see the module's documentation.
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
        let attempts = Attempts::of(&delivery);
        // Counted by the task (attempts.rs): the same on every broker version.
        let attempt = attempts.failed + 1;
        tracing::warn!(
            job, %task, attempt, lost = attempts.lost, code = %err.code(), error = %err,
            "task attempt failed"
        );
        if let FarmError::WorkerUnfit {
            reason,
            pause: true,
        } = &err
        {
            // A full disk: this worker takes no work until space returns.
            self.fitness.pause(reason);
        }
        match verdict(&err, &attempts, self.config.delivery_limit) {
            Verdict::Bounce => {
                self.before_bounce(job, &err).await;
                republish(&*self.queue, delivery, origin, attempts.bounced()).await;
            }
            Verdict::Retry => {
                let backoff = self
                    .config
                    .retry_backoff
                    .saturating_mul(1 << attempts.failed.min(6))
                    .min(Duration::from_secs(30));
                tokio::time::sleep(backoff).await;
                republish(&*self.queue, delivery, origin, attempts.failed_once()).await;
            }
            Verdict::Final { recorded } => {
                let failed = SegmentOutcome::Failed {
                    code: err.code(),
                    class: err.class(),
                    message: err.to_string(),
                };
                self.report_final(ticket, delivery, failed, recorded).await;
            }
        }
    }

    /// What a give-back for a fault not the task's waits for: the store to answer again, a
    /// pause for a busy card (its budget was already lowered or the card marked unhealthy),
    /// or a pause on an unfit worker (another worker takes the task).
    async fn before_bounce(&self, job: &str, err: &FarmError) {
        if matches!(err, FarmError::StoreUnavailable { .. }) {
            self.wait_for_store(job).await;
            return;
        }
        tokio::time::sleep(self.config.retry_backoff).await;
    }

    /// Publishes a task's final failure and settles its delivery: acked when `recorded`
    /// (an input error, a task worn out by others' faults: the event says it all), else
    /// dead-lettered (its attempts ran out). A failure event that cannot be published
    /// requeues the delivery.
    pub(crate) async fn report_final(
        &self,
        ticket: Ticket<'_>,
        delivery: Delivery,
        failed: SegmentOutcome,
        recorded: bool,
    ) {
        let event = self.event(ticket, failed);
        if let Err(e) = self
            .queue
            .publish(QUEUE_EVENTS, encode_message(&event))
            .await
        {
            tracing::error!(error = %e, "failure event not published; task requeued");
            let _ = delivery.acker.reject(true).await;
            return;
        }
        if recorded {
            let _ = delivery.acker.ack().await;
        } else {
            let _ = delivery.acker.reject(false).await;
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

/// What becomes of a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Given back for a fault not the task's: a copy with one more bounce.
    Bounce,
    /// Tried again: a copy with one more failed attempt.
    Retry,
    /// The task fails its job; `recorded`: acked (an input error, or worn out by others'
    /// faults), else dead-lettered (its own attempts ran out).
    Final {
        /// Whether the failure event is the whole record (acked) rather than a dead letter.
        recorded: bool,
    },
}

/// The verdict on an attempt that failed with `err`, after `attempts`, with `delivery_limit`
/// own attempts allowed. Faults that are not the task's (the store down, no GPU session, an
/// unfit worker) give it back up to [`crate::attempts::MAX_BOUNCES`] times; a retryable error
/// of its own retries until its attempts reach the limit; the rest fail the job.
pub(crate) fn verdict(err: &FarmError, attempts: &Attempts, delivery_limit: u32) -> Verdict {
    let worn_out = attempts.worn_out();
    let not_its_fault = matches!(err, FarmError::StoreUnavailable { .. })
        || crate::gpu_task::is_gpu_busy(err)
        || matches!(err, FarmError::WorkerUnfit { .. });
    if not_its_fault && !worn_out {
        return Verdict::Bounce;
    }
    let last = attempts.failed.saturating_add(1) >= delivery_limit;
    if err.class() == ErrorClass::Retry && !last && !worn_out {
        return Verdict::Retry;
    }
    Verdict::Final {
        recorded: err.class() == ErrorClass::Abort || worn_out,
    }
}

/// Publishes a copy of the task to `queue` with the counters `next`, and acks the delivery
/// (requeues it when the publish fails): a retry that never depends on how the broker counts
/// returns. The copy goes to the back of the queue.
pub(crate) async fn republish(broker: &dyn Queue, delivery: Delivery, queue: &str, next: Attempts) {
    match broker.publish(queue, next.written(&delivery.body)).await {
        Ok(()) => {
            let _ = delivery.acker.ack().await;
        }
        Err(_) => {
            let _ = delivery.acker.reject(true).await;
        }
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
}

#[cfg(test)]
mod counting_tests;
