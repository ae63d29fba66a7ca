//! Dead-lettered tasks end their job: a task whose deliveries ran out, or that a worker (or
//! the dispatcher, for an event) could not read, comes back as a `task_lost` failure event
//! of its job, with the reason.
//!
//! Why: the retry design assumes every task ends with a done or a failed event. A worker
//! killed on the last delivery (SIGKILL, out of memory, a spot reclaim), a broker consumer
//! timeout on the last delivery, or a wire-version mismatch ends it with neither; its job
//! would wait forever and hold its priority-gate places, and after a few such tasks no job on
//! the farm would move. The dead-letter queues are durable, so a dispatcher that was down
//! reads what was dead-lettered meanwhile when it comes back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tessera_farm::backoff::Backoff;
use tessera_farm::queue::{dead_letter_queue, Delivery, Queue};
use tessera_model::error_code::{ErrorClass, ErrorCode};
use tessera_model::wire::{
    encode_message, newer_wire_version, task_identity, SegmentOutcome, TaskEvent, TaskRef,
    QUEUE_EVENTS, WIRE_VERSION,
};
use tokio_util::sync::CancellationToken;

/// The queues whose dead letters end a job: both encode queues and the cut queue, the
/// stitch queue, the whole-input queue, and the events queue (an event the dispatcher could
/// not read).
pub const DEAD_LETTER_SOURCES: [&str; 6] = tessera_farm::queue::FARM_QUEUES;

/// The failure event for a message dead-lettered from `source`, or `None` when the message
/// names no job and task (nothing waits for it).
pub fn lost_event(source: &str, dead: &Delivery) -> Option<TaskEvent> {
    let (job_id, plan, task) = task_identity(&dead.body)?;
    let reason = dead.dead_reason.as_deref().unwrap_or("unknown");
    let message = if source == QUEUE_EVENTS {
        format!(
            "the result of {task} could not be read by the dispatcher ({reason}; a wire-version \
             mismatch between workers and dispatcher?)"
        )
    } else {
        match reason {
            "delivery_limit" if newer_wire_version(&dead.body).is_some() => format!(
                "{task} was lost: it is wire version {}, from a newer release, and no worker \
                 that took it could read it (upgrade the workers before the dispatcher: \
                 docs/deploy.md, Upgrades)",
                newer_wire_version(&dead.body).unwrap_or_default()
            ),
            "delivery_limit" => format!(
                "{task} was lost: its deliveries ran out and no attempt finished (each worker \
                 holding it stopped: killed, out of memory, reclaimed, or past the broker's \
                 consumer timeout)"
            ),
            "rejected" => format!(
                "{task} was refused by a worker as unreadable (a wire-version mismatch between \
                 the dispatcher and the workers?)"
            ),
            other => format!("{task} was lost: dead-lettered from {source} ({other})"),
        }
    };
    Some(TaskEvent {
        v: WIRE_VERSION,
        job_id,
        plan,
        task,
        worker: "dispatcher".into(),
        outcome: SegmentOutcome::Failed {
            code: ErrorCode::TaskLost,
            class: ErrorClass::Abort,
            message,
        },
    })
}

/// Dead letters that named a job (its job was sent their failure) since the process started.
pub static NAMED_JOB: AtomicU64 = AtomicU64::new(0);
/// Dead letters that named no job (not JSON, an impossible job id): logged and dropped.
pub static DROPPED: AtomicU64 = AtomicU64::new(0);

/// The first 120 characters of a body, escaped, for a log line that lets an operator find
/// where a poison message came from (never a whole, possibly huge, body).
fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(480)]);
    text.chars()
        .take(120)
        .collect::<String>()
        .escape_debug()
        .to_string()
}

/// Starts one [`forward_dead_letters`] per queue of [`DEAD_LETTER_SOURCES`].
pub fn spawn_forwarders(queue: &Arc<dyn Queue>, shutdown: &CancellationToken) {
    for source in DEAD_LETTER_SOURCES {
        tokio::spawn(forward_dead_letters(
            queue.clone(),
            source.to_string(),
            shutdown.clone(),
        ));
    }
}

/// Reads `source`'s dead-letter queue until `shutdown` and publishes each message's
/// [`lost_event`] to the events queue; the dead letter is acked only once the event is
/// confirmed (a dead letter without a job is logged and acked). Survives broker outages.
pub async fn forward_dead_letters(
    queue: Arc<dyn Queue>,
    source: String,
    shutdown: CancellationToken,
) {
    let dead = dead_letter_queue(&source);
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
    while !shutdown.is_cancelled() {
        let consumer = match queue.declare(&source).await {
            Ok(()) => queue.consume(&dead, 16).await,
            Err(e) => Err(e),
        };
        let mut consumer = match consumer {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(queue = %dead, error = %e, "dead-letter queue unavailable");
                if !backoff.wait(&shutdown).await {
                    return;
                }
                continue;
            }
        };
        backoff.reset();
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => return,
                n = consumer.next() => n,
            };
            let delivery = match next {
                Ok(Some(d)) => d,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(queue = %dead, error = %e, "dead-letter consumer lost");
                    break;
                }
            };
            forward_one(&*queue, &source, delivery, &shutdown).await;
        }
    }
}

/// Publishes one dead letter's failure event (retrying until the broker confirms it or
/// `shutdown`; an unsettled delivery goes back to the queue) and acks it.
async fn forward_one(
    queue: &dyn Queue,
    source: &str,
    dead: Delivery,
    shutdown: &CancellationToken,
) {
    let Some(event) = lost_event(source, &dead) else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            queue = source,
            bytes = dead.body.len(),
            reason = dead.dead_reason.as_deref().unwrap_or("unknown"),
            start = %preview(&dead.body),
            "dead letter naming no job dropped"
        );
        let _ = dead.acker.ack().await;
        return;
    };
    NAMED_JOB.fetch_add(1, Ordering::Relaxed);
    let task: TaskRef = event.task;
    tracing::warn!(job = %event.job_id, %task, queue = source,
        reason = dead.dead_reason.as_deref().unwrap_or("unknown"), "task dead-lettered: its job fails");
    let body = encode_message(&event);
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
    loop {
        match queue.publish(QUEUE_EVENTS, body.clone()).await {
            Ok(()) => {
                let _ = dead.acker.ack().await;
                return;
            }
            Err(e) => tracing::warn!(error = %e, "lost-task event not published; retrying"),
        }
        if !backoff.wait(shutdown).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_farm::queue::MemoryQueue;
    use tessera_model::wire::{
        QUEUE_CUT_CPU, QUEUE_ENCODE_CPU, QUEUE_ENCODE_GPU, QUEUE_STITCH, QUEUE_WHOLE_CPU,
    };

    async fn dead_letter(q: &MemoryQueue, queue: &str, body: &[u8], requeue: bool) {
        q.declare(queue).await.unwrap();
        q.publish(queue, body.to_vec()).await.unwrap();
        let mut c = q.consume(queue, 1).await.unwrap();
        let d = c.next().await.unwrap().unwrap();
        d.acker.reject(requeue).await.unwrap();
    }

    #[tokio::test]
    async fn dead_letters_become_failure_events_of_their_job() {
        let q = MemoryQueue::new(1);
        q.declare(QUEUE_EVENTS).await.unwrap();
        // A task whose one delivery ran out, and a task of a newer wire version refused.
        let seg = br#"{"v":1,"job_id":"j1","segment":3,"chunk_key":"k"}"#;
        dead_letter(&q, QUEUE_ENCODE_CPU, seg, true).await;
        let cut = br#"{"v":1,"job_id":"j4","plan":5,"segment":1,"chunk_key":"k","cut":{}}"#;
        dead_letter(&q, QUEUE_CUT_CPU, cut, true).await;
        let newer = br#"{"v":9,"job_id":"j2","output":0}"#;
        dead_letter(&q, QUEUE_STITCH, newer, false).await;
        dead_letter(&q, QUEUE_ENCODE_GPU, b"garbage", false).await;
        // A whole-input task whose worker died with it.
        let whole = br#"{"v":1,"job_id":"j3","plan":7,"source_key":"k","stitch_tasks":[]}"#;
        dead_letter(&q, QUEUE_WHOLE_CPU, whole, true).await;
        let shared: Arc<dyn Queue> = Arc::new(q.clone());
        let stop = CancellationToken::new();
        spawn_forwarders(&shared, &stop);
        let mut events = shared.consume(QUEUE_EVENTS, 8).await.unwrap();
        let mut got = Vec::new();
        for _ in 0..4 {
            let d = tokio::time::timeout(Duration::from_secs(5), events.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            got.push(tessera_model::wire::decode_message::<TaskEvent>(&d.body).unwrap());
        }
        stop.cancel();
        got.sort_by(|a, b| a.job_id.cmp(&b.job_id));
        let failure = |e: &TaskEvent| match &e.outcome {
            SegmentOutcome::Failed { code, message, .. } => (code.clone(), message.clone()),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (got[0].job_id.as_str(), got[0].task),
            ("j1", TaskRef::Segment(3))
        );
        let (code, message) = failure(&got[0]);
        assert_eq!(code, ErrorCode::TaskLost);
        assert!(
            message.contains("segment 3") && message.contains("deliveries ran out"),
            "{message}"
        );
        assert_eq!(
            (got[1].job_id.as_str(), got[1].task),
            ("j2", TaskRef::Stitch(0))
        );
        assert!(failure(&got[1]).1.contains("unreadable"), "{:?}", got[1]);
        assert_eq!(
            (got[2].job_id.as_str(), got[2].plan, got[2].task),
            ("j3", 7, TaskRef::Whole)
        );
        assert!(
            failure(&got[2]).1.contains("whole-input task was lost"),
            "{:?}",
            got[2]
        );
        // A cut task is a segment task to its job.
        assert_eq!(
            (got[3].job_id.as_str(), got[3].plan, got[3].task),
            ("j4", 5, TaskRef::Segment(1))
        );
        assert!(failure(&got[3]).1.contains("segment 1"), "{:?}", got[3]);
        // Every dead letter was settled, the one without a job too.
        for source in [
            QUEUE_ENCODE_CPU,
            QUEUE_CUT_CPU,
            QUEUE_STITCH,
            QUEUE_ENCODE_GPU,
            QUEUE_WHOLE_CPU,
        ] {
            assert_eq!(q.ready_len(&dead_letter_queue(source)), 0, "{source}");
        }
    }
}
