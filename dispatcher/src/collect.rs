//! The collect stage: waits for every segment's event while the publisher runs on, and
//! sums what the segments report.
//!
//! Why a stage of its own: it takes what prepare handed forward (the plan, the segments an
//! earlier run finished, the publisher) and hands `Collected` on to the stitch step.

use tessera_farm::model::{SegmentOutcome, TaskRef};
use tessera_farm::queue::Consumer;
use tessera_farm::FarmError;

use crate::prepare::{published, Prepared};
use crate::request::{DispatchContext, JobRequest, JobStage};
use crate::task_events::{next_event, task_failed};

/// What the segments reported, handed to the stitch step and the report.
pub(crate) struct Collected {
    /// Frames of all segments together.
    pub frames: u64,
    /// Seconds each segment spent in the worker outside decode/encode.
    pub overheads: Vec<f64>,
    /// Largest peak RSS of a segment encode child.
    pub peak_segment_rss: u64,
}

/// Waits for every segment's event; the first failure fails the job with its reason.
/// Segments an earlier run finished (`prepared.reused`) count without waiting; the
/// publisher is polled alongside and dropped once it has published every segment.
pub(crate) async fn collect(
    ctx: &DispatchContext,
    req: &JobRequest,
    prepared: &mut Prepared,
    events: &mut dyn Consumer,
) -> Result<Collected, FarmError> {
    let total = prepared.plans.len();
    let reused = &prepared.reused;
    let publisher = &mut prepared.publisher;
    let mut done = vec![false; total];
    let mut remaining = total;
    let mut c = Collected {
        frames: 0,
        overheads: Vec::new(),
        peak_segment_rss: 0,
    };
    // Segments an earlier run of this job already collected.
    for &(seg, frames) in reused {
        if let Some(slot) = done.get_mut(seg as usize).filter(|d| !**d) {
            *slot = true;
            remaining -= 1;
            c.frames += frames;
        }
    }
    while remaining > 0 {
        let (event, delivery) = tokio::select! {
            e = next_event(&req.id, events) => e?,
            p = published(publisher) => {
                p?;
                *publisher = None;
                continue;
            }
        };
        let TaskRef::Segment(segment) = event.task else {
            // A stitch event from an earlier run of this job: it is republished later.
            let _ = delivery.acker.ack().await;
            continue;
        };
        match event.outcome {
            SegmentOutcome::Done {
                frames,
                media_seconds,
                overhead_seconds,
                peak_rss_bytes,
                ..
            } => {
                let i = segment as usize;
                // A redelivered segment may report twice; count it once.
                if i < total && !done[i] {
                    done[i] = true;
                    remaining -= 1;
                    c.frames += frames;
                    c.overheads.push(overhead_seconds);
                    c.peak_segment_rss = c.peak_segment_rss.max(peak_rss_bytes);
                    if let Some(gate) = &ctx.gate {
                        gate.release(&req.id);
                    }
                    // Recorded (for a restart) before the event is acked.
                    (ctx.on_stage)(&JobStage::SegmentDone {
                        segment,
                        frames,
                        media_seconds,
                        overhead_seconds,
                    });
                }
                let _ = delivery.acker.ack().await;
            }
            SegmentOutcome::Failed {
                code,
                class,
                message,
            } => {
                let _ = delivery.acker.ack().await;
                return Err(task_failed(event.task, code, class, &message));
            }
        }
    }
    Ok(c)
}
