//! Reading a job's task events, turning a task's failure into the job's error, and judging
//! a silence of the job's tasks.
//!
//! Why a module of its own: both the collect stage (segment events) and the stitch step
//! (stitch events) read the same event stream and wait on the same deadline; here neither
//! has to import the other.

use std::time::Duration;

use tessera_farm::queue::{Consumer, Delivery, Queue};
use tessera_farm::FarmError;
use tessera_model::error_code::{ErrorClass, ErrorCode};
use tessera_model::wire::{decode_message, SegmentOutcome, TaskEvent, TaskRef};
use tokio::time::Instant;

/// How many times a job republishes tasks it heard nothing of before it fails `task_lost`.
pub const MAX_REPUBLISH: u32 = 2;

/// The clock of a job's silence: restarted by every event of the job; once it passes the
/// deadline the outstanding tasks are republished (a copy that was lost without being
/// dead-lettered: a purged or deleted queue, a broker that lost its data).
pub(crate) struct Silence {
    deadline: Duration,
    since: Instant,
    republished: u32,
}

impl Silence {
    /// A clock started now.
    pub(crate) fn new(deadline: Duration) -> Self {
        Silence {
            deadline: deadline.max(Duration::from_millis(100)),
            since: Instant::now(),
            republished: 0,
        }
    }

    /// An event of the job arrived.
    pub(crate) fn heard(&mut self) {
        self.since = Instant::now();
    }

    /// Returns once the job has been silent for the deadline.
    pub(crate) async fn passed(&self) {
        tokio::time::sleep_until(self.since + self.deadline).await;
    }

    /// After a silence: whether to republish `outstanding` (on `queue_name`) now. Not while
    /// no worker consumes the queue (a farm scaled to zero is waiting, not losing), nor
    /// without outstanding tasks; `task_lost` after [`MAX_REPUBLISH`] republishes.
    pub(crate) async fn republish_due(
        &mut self,
        queue: &dyn Queue,
        queue_name: &str,
        outstanding: &[TaskRef],
    ) -> Result<bool, FarmError> {
        self.since = Instant::now();
        if outstanding.is_empty() {
            return Ok(false);
        }
        if let Ok(0) = queue.consumers(queue_name).await {
            tracing::warn!(
                queue = queue_name,
                "no worker consumes the queue; the job waits"
            );
            return Ok(false);
        }
        let list = outstanding
            .iter()
            .take(8)
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        if self.republished >= MAX_REPUBLISH {
            return Err(FarmError::Media {
                code: ErrorCode::TaskLost,
                class: ErrorClass::Abort,
                message: format!(
                    "{list}{}: no result after {} silences of {} s, republished {} times \
                     (lost from {queue_name}?)",
                    if outstanding.len() > 8 { ", ..." } else { "" },
                    MAX_REPUBLISH + 1,
                    self.deadline.as_secs(),
                    self.republished
                ),
            });
        }
        self.republished += 1;
        tracing::warn!(queue = queue_name, tasks = %list, count = outstanding.len(),
            "no event within the task deadline: republishing the outstanding tasks");
        Ok(true)
    }
}

/// The next event of plan `plan` of job `job`; unreadable events are dead-lettered, other
/// jobs' and other plans' (tasks of an earlier plan of the job, still queued when the
/// dispatcher restarted with other settings) acked away. An event without a plan (0) is
/// dropped too (every task carries its plan and workers echo it; no release sent events
/// without plans), except a `task_lost` failure: the dead-letter consumer builds it from a
/// task so mangled that its plan cannot be read, and the job must still fail with the reason
/// rather than wait for a task no worker can run.
pub(crate) async fn next_event(
    job: &str,
    plan: u64,
    events: &mut dyn Consumer,
) -> Result<(TaskEvent, Delivery), FarmError> {
    loop {
        let delivery = events.next().await?.ok_or_else(|| FarmError::Queue {
            queue: "events".into(),
            reason: "closed before the job finished".into(),
        })?;
        match decode_message::<TaskEvent>(&delivery.body) {
            Ok(event) if event.job_id == job && event.plan != plan && !unplanned_loss(&event) => {
                tracing::info!(job, task = %event.task, plan = event.plan, expected = plan,
                    "event of another plan (or of none) dropped");
                let _ = delivery.acker.ack().await;
            }
            Ok(event) if event.job_id == job => return Ok((event, delivery)),
            Ok(event) => {
                tracing::warn!(job = %event.job_id, "event for another job ignored");
                let _ = delivery.acker.ack().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "unreadable event dropped");
                let _ = delivery.acker.reject(false).await;
            }
        }
    }
}

/// A `task_lost` failure of a task whose plan could not be read (see [`next_event`]).
fn unplanned_loss(event: &TaskEvent) -> bool {
    event.plan == 0
        && matches!(
            &event.outcome,
            SegmentOutcome::Failed { code, .. } if *code == ErrorCode::TaskLost
        )
}

/// The job's error for a task's failure event.
pub(crate) fn task_failed(
    task: TaskRef,
    code: ErrorCode,
    class: ErrorClass,
    message: &str,
) -> FarmError {
    FarmError::Media {
        code,
        class,
        message: format!("{task}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_farm::queue::MemoryQueue;
    use tessera_model::wire::{encode_message, WIRE_VERSION};

    fn event(job: &str, plan: u64, segment: u32) -> Vec<u8> {
        encode_message(&TaskEvent {
            v: WIRE_VERSION,
            job_id: job.into(),
            plan,
            task: TaskRef::Segment(segment),
            worker: "w".into(),
            outcome: SegmentOutcome::Failed {
                code: ErrorCode::EncodeFailed,
                class: ErrorClass::Abort,
                message: "x".into(),
            },
        })
    }

    #[tokio::test]
    async fn events_of_other_jobs_and_earlier_plans_are_dropped() {
        let q = MemoryQueue::new(3);
        q.declare("events").await.unwrap();
        for body in [
            event("other", 2, 0),
            event("j", 1, 1), // an earlier plan's task, still queued at the restart
            event("j", 2, 2),
            event("j", 2, 3),
        ] {
            q.publish("events", body).await.unwrap();
        }
        let mut c = q.consume("events", 8).await.unwrap();
        let (first, d) = next_event("j", 2, c.as_mut()).await.unwrap();
        d.acker.ack().await.unwrap();
        let (second, d) = next_event("j", 2, c.as_mut()).await.unwrap();
        d.acker.ack().await.unwrap();
        assert_eq!(
            (first.task, second.task),
            (TaskRef::Segment(2), TaskRef::Segment(3))
        );
        // The dropped ones were settled: nothing comes back.
        assert_eq!(q.ready_len("events"), 0);
        assert_eq!(q.ready_len("events.dead"), 0);
    }

    /// Every task the dispatcher publishes carries its plan, and so does every event a worker
    /// or the dead-letter reader builds from one: an event without a plan is forged or
    /// mangled, and must not count as any task's result.
    #[tokio::test]
    async fn events_without_a_plan_are_dropped() {
        let q = MemoryQueue::new(3);
        q.declare("events").await.unwrap();
        q.publish("events", event("j", 0, 1)).await.unwrap();
        q.publish("events", event("j", 2, 2)).await.unwrap();
        let mut c = q.consume("events", 8).await.unwrap();
        let (first, d) = next_event("j", 2, c.as_mut()).await.unwrap();
        d.acker.ack().await.unwrap();
        assert_eq!((first.task, first.plan), (TaskRef::Segment(2), 2));
        assert_eq!(q.ready_len("events"), 0);
        assert_eq!(q.ready_len("events.dead"), 0);
    }

    #[tokio::test]
    async fn a_lost_task_whose_plan_could_not_be_read_still_fails_its_job() {
        // The dead-letter consumer's event for a mangled task has no plan: taken, so the job
        // fails with the reason (farm_lost_tasks' garbled and newer-release tasks).
        let q = MemoryQueue::new(3);
        q.declare("events").await.unwrap();
        let mut lost: TaskEvent = decode_message(&event("j", 0, 1)).unwrap();
        lost.outcome = SegmentOutcome::Failed {
            code: ErrorCode::TaskLost,
            class: ErrorClass::Abort,
            message: "segment 1 was refused by a worker as unreadable".into(),
        };
        q.publish("events", encode_message(&lost)).await.unwrap();
        let mut c = q.consume("events", 8).await.unwrap();
        let (got, d) = next_event("j", 2, c.as_mut()).await.unwrap();
        d.acker.ack().await.unwrap();
        assert_eq!((got.task, got.plan), (TaskRef::Segment(1), 0));
    }
}
