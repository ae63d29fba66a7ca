//! Reading a job's task events and turning a task's failure into the job's error.
//!
//! Why a module of its own: both the collect stage (segment events) and the stitch step
//! (stitch events) read the same event stream; here neither has to import the other.

use tessera_farm::model::{decode_message, TaskEvent, TaskRef};
use tessera_farm::queue::{Consumer, Delivery};
use tessera_farm::FarmError;
use tessera_media::{ErrorClass, ErrorCode};

/// The next event of job `job`; unreadable events are dead-lettered, other jobs' acked away.
pub(crate) async fn next_event(
    job: &str,
    events: &mut dyn Consumer,
) -> Result<(TaskEvent, Delivery), FarmError> {
    loop {
        let delivery = events.next().await?.ok_or_else(|| FarmError::Queue {
            queue: "events".into(),
            reason: "closed before the job finished".into(),
        })?;
        match decode_message::<TaskEvent>(&delivery.body) {
            Ok(event) if event.job_id == job => return Ok((event, delivery)),
            Ok(event) => {
                tracing::warn!(job = %event.job_id, "event for another job ignored");
                let _ = delivery.acker.ack().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "unreadable event dropped");
                let _ = delivery.acker.nack(false).await;
            }
        }
    }
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
