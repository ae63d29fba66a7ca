//! The collect stage: waits for every segment's event while the publisher runs on, and
//! sums what the segments report.
//!
//! Why a stage of its own: it takes what prepare handed forward (the plan, the segments an
//! earlier run finished, the publisher) and hands `Collected` on to the finish step.

use tessera_farm::queue::{Consumer, Delivery};
use tessera_farm::FarmError;
use tessera_model::encode::TargetResult;
use tessera_model::wire::{encode_message, SegmentOutcome, TaskEvent, TaskRef, WholeTask};

use crate::audio_step::AudioTask;
use crate::patience::recorded;
use crate::prepare::Prepared;
use crate::publish::{published, segment_task};
use crate::request::{DispatchContext, DoneSegment, JobPlan, JobStage};
use crate::stitching::Stitched;
use crate::task_events::{next_event, task_failed, Silence};

/// What the segments reported, handed to the stitch step and the report.
pub(crate) struct Collected {
    /// Frames of all segments together.
    pub frames: u64,
    /// Seconds each segment spent in the worker outside decode/encode.
    pub overheads: Vec<f64>,
    /// Largest peak RSS of a segment encode child.
    pub peak_segment_rss: u64,
    /// Decoder errors the segments reported (segments an earlier run finished count 0).
    pub decode_errors: u64,
    /// What the stitches cost, when a whole-input task (whole.rs) already stitched and
    /// checked every output: the finish step then stitches nothing.
    pub stitched: Option<Stitched>,
    /// Per segment, per rendition in output order: how a target-quality rendition found
    /// its rate factor (empty for a segment with no target or one an earlier run collected).
    pub targets: Vec<Vec<Option<TargetResult>>>,
}

/// Which segments are in, and what they reported so far.
struct Tally {
    done: Vec<bool>,
    remaining: usize,
    collected: Collected,
}

impl Tally {
    /// Nothing in yet but the segments an earlier run of this job already collected (and
    /// the searches they reported).
    fn new(total: usize, reused: &[DoneSegment]) -> Self {
        let mut tally = Tally {
            done: vec![false; total],
            remaining: total,
            collected: Collected {
                frames: 0,
                overheads: Vec::new(),
                peak_segment_rss: 0,
                decode_errors: 0,
                stitched: None,
                targets: vec![Vec::new(); total],
            },
        };
        for seg in reused {
            let i = seg.index as usize;
            if let Some(slot) = tally.done.get_mut(i).filter(|d| !**d) {
                *slot = true;
                tally.remaining -= 1;
                tally.collected.frames += seg.frames;
                tally.collected.targets[i].clone_from(&seg.targets);
            }
        }
        tally
    }

    /// Whether segment `i` already has its result.
    fn is_done(&self, i: usize) -> bool {
        self.done.get(i).copied().unwrap_or(false)
    }
}

/// Waits for every segment's event; the first failure fails the job with its reason.
/// Segments an earlier run finished (`prepared.reused`) count without waiting; the
/// publisher is polled alongside and dropped once it has published every segment.
pub(crate) async fn collect(
    ctx: &DispatchContext,
    prepared: &mut Prepared,
    events: &mut dyn Consumer,
) -> Result<Collected, FarmError> {
    let plan = &prepared.plan;
    let publisher = &mut prepared.publisher;
    let mut tally = Tally::new(plan.segments.len(), &prepared.reused);
    for seg in &prepared.reused {
        plan.leads.record(seg.index, &seg.targets);
    }
    prepared.audio.segments_left(tally.remaining);
    let mut silence = Silence::new(ctx.task_deadline);
    while tally.remaining > 0 {
        let (event, delivery) = tokio::select! {
            e = next_event(&plan.req.id, plan.fingerprint, events) => e?,
            p = published(publisher) => {
                p?;
                *publisher = None;
                continue;
            }
            () = silence.passed() => {
                republish_silent(ctx, plan, &tally.done, &mut silence).await?;
                continue;
            }
        };
        silence.heard();
        on_event(
            (ctx, plan, &mut prepared.audio),
            &mut tally,
            event,
            delivery,
        )
        .await?;
    }
    Ok(tally.collected)
}

/// The collect stage of a whole-input run: waits for its task's event (republishing it
/// after a silence); what it reports, with what its stitches cost.
pub(crate) async fn collect_whole(
    ctx: &DispatchContext,
    plan: &JobPlan,
    task: &WholeTask,
    events: &mut dyn Consumer,
) -> Result<Collected, FarmError> {
    let queue = ctx.whole_queue.as_deref().unwrap_or_default();
    let mut silence = Silence::new(ctx.task_deadline);
    loop {
        let (event, delivery) = tokio::select! {
            e = next_event(&plan.req.id, plan.fingerprint, events) => e?,
            () = silence.passed() => {
                if silence.republish_due(&*ctx.queue, queue, &[TaskRef::Whole]).await? {
                    if let Err(e) = ctx.queue.publish(queue, encode_message(task)).await {
                        tracing::warn!(job = %plan.req.id, error = %e, "republish failed");
                    }
                }
                continue;
            }
        };
        silence.heard();
        if event.task != TaskRef::Whole {
            let _ = delivery.acker.ack().await;
            continue;
        }
        let stage = segment_done(0, &event);
        let outcome = match event.outcome {
            SegmentOutcome::Running => None,
            SegmentOutcome::Done {
                frames,
                overhead_seconds,
                peak_rss_bytes,
                decode_errors,
                check_seconds,
                etags,
                keys,
                ..
            } => {
                if let Some(stage) = &stage {
                    recorded(&ctx.on_stage, stage).await;
                }
                Some(Ok(Collected {
                    frames,
                    overheads: vec![overhead_seconds],
                    peak_segment_rss: peak_rss_bytes,
                    decode_errors,
                    stitched: Some(Stitched {
                        peak_rss_bytes,
                        check_seconds,
                        etags,
                        keys,
                    }),
                    // A whole input is one task: no segment searched on its own.
                    targets: Vec::new(),
                }))
            }
            SegmentOutcome::Failed {
                code,
                class,
                message,
            } => Some(Err(task_failed(TaskRef::Whole, code, class, &message))),
        };
        let _ = delivery.acker.ack().await;
        if let Some(outcome) = outcome {
            return outcome;
        }
    }
}

/// Counts one event of the job: a segment done (once, however often it is redelivered), a
/// failure that fails the job, or an event of no concern acked away.
async fn on_event(
    (ctx, plan, audio): (&DispatchContext, &JobPlan, &mut AudioTask),
    tally: &mut Tally,
    event: TaskEvent,
    delivery: Delivery,
) -> Result<(), FarmError> {
    let TaskRef::Segment(segment) = event.task else {
        // A stitch event from an earlier run of this job: it is republished later.
        let _ = delivery.acker.ack().await;
        return Ok(());
    };
    let i = segment as usize;
    let stage = segment_done(segment, &event);
    match event.outcome {
        SegmentOutcome::Done {
            frames,
            overhead_seconds,
            peak_rss_bytes,
            decode_errors,
            targets,
            ..
        } => {
            // A redelivered segment may report twice; count it once.
            if i < tally.done.len() && !tally.done[i] {
                // Recorded (for a restart) before the event is acked.
                if let Some(stage) = &stage {
                    recorded(&ctx.on_stage, stage).await;
                }
                tally.done[i] = true;
                tally.remaining -= 1;
                audio.segments_left(tally.remaining);
                let c = &mut tally.collected;
                c.frames += frames;
                c.overheads.push(overhead_seconds);
                c.peak_segment_rss = c.peak_segment_rss.max(peak_rss_bytes);
                c.decode_errors += decode_errors;
                // Its followers (if it leads a scene) may be published now.
                plan.leads.record(segment, &targets);
                c.targets[i] = targets;
                if let Some(gate) = &ctx.gate {
                    gate.release(&plan.req.id);
                }
            }
            let _ = delivery.acker.ack().await;
        }
        // Only stitches send heartbeats.
        SegmentOutcome::Running => {
            let _ = delivery.acker.ack().await;
        }
        // A copy of a segment that already has its result failed (a republished or
        // dead-lettered duplicate): the result stands.
        SegmentOutcome::Failed { .. } if tally.is_done(i) => {
            tracing::info!(job = %plan.req.id, segment, "failure of a finished segment's copy ignored");
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
    Ok(())
}

/// After a silence of the job's segments: republishes the ones on the queue without a
/// result (a publish that fails is tried again at the next silence), or fails the job.
async fn republish_silent(
    ctx: &DispatchContext,
    plan: &JobPlan,
    done: &[bool],
    silence: &mut Silence,
) -> Result<(), FarmError> {
    let outstanding: Vec<TaskRef> = {
        let on_queue = plan.on_queue.lock().unwrap_or_else(|p| p.into_inner());
        (0..done.len())
            .filter(|&i| !done[i] && on_queue.get(i).copied().unwrap_or(false))
            .map(|i| TaskRef::Segment(i as u32))
            .collect()
    };
    let queue = plan.encode_queue.as_str();
    if !silence
        .republish_due(&*ctx.queue, queue, &outstanding)
        .await?
    {
        return Ok(());
    }
    for segment in outstanding.iter().filter_map(|t| match t {
        TaskRef::Segment(i) => plan.segments.get(*i as usize),
        TaskRef::Stitch(_) | TaskRef::Whole => None,
    }) {
        let task = segment_task(plan, segment);
        if let Err(e) = ctx.queue.publish(queue, encode_message(&task)).await {
            tracing::warn!(job = %plan.req.id, segment = segment.index, error = %e, "republish failed");
        }
    }
    Ok(())
}

/// Judges the source's decoder errors: more than `max_share` of its frames fails the job as
/// `source_corrupt` (nothing is stitched or delivered); fewer come back as a warning for the
/// report (`None` when there were none).
pub(crate) fn judge_decode_errors(
    input: &std::path::Path,
    errors: u64,
    frames: u64,
    max_share: f64,
) -> Result<Option<String>, FarmError> {
    if errors == 0 {
        return Ok(None);
    }
    let share = errors as f64 / frames.max(1) as f64;
    let what = format!(
        "{errors} of {frames} source frames could not be decoded cleanly ({:.2}%)",
        share * 100.0
    );
    if share > max_share {
        return Err(FarmError::Media {
            code: tessera_model::error_code::ErrorCode::SourceCorrupt,
            class: tessera_model::error_code::ErrorClass::Abort,
            message: format!(
                "{}: source is corrupt: {what}, more than the {:.2}% allowed",
                input.display(),
                max_share * 100.0
            ),
        });
    }
    Ok(Some(format!(
        "{}: {what}; delivered with the decoder's concealment",
        input.display()
    )))
}

/// The stage a done event of `segment` records (`None` for any other outcome): its figures
/// and who did it, for the resume state, the metrics and the dashboard's timeline.
fn segment_done(segment: u32, event: &TaskEvent) -> Option<JobStage> {
    let SegmentOutcome::Done {
        frames,
        media_seconds,
        overhead_seconds,
        attempt,
        card,
        ref targets,
        ..
    } = event.outcome
    else {
        return None;
    };
    Some(JobStage::SegmentDone {
        segment,
        frames,
        media_seconds,
        overhead_seconds,
        worker: event.worker.clone(),
        attempt,
        card,
        targets: targets.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::judge_decode_errors;
    use std::path::Path;
    use tessera_model::error_code::ErrorCode;

    #[test]
    fn decode_errors_are_judged_against_the_share() {
        let input = Path::new("upload.mkv");
        assert_eq!(judge_decode_errors(input, 0, 1000, 0.01).unwrap(), None);
        let warning = judge_decode_errors(input, 10, 1000, 0.01).unwrap().unwrap();
        assert!(
            warning.contains("upload.mkv") && warning.contains("10 of 1000"),
            "{warning}"
        );
        let err = judge_decode_errors(input, 11, 1000, 0.01).unwrap_err();
        assert_eq!(err.code(), ErrorCode::SourceCorrupt);
        let text = err.to_string();
        assert!(
            text.contains("upload.mkv") && text.contains("1.10%"),
            "{text}"
        );
        // A zero share refuses any damage; frames 0 does not divide by zero.
        assert!(judge_decode_errors(input, 1, 1000, 0.0).is_err());
        assert!(judge_decode_errors(input, 1, 0, 0.5).is_err());
    }
}
