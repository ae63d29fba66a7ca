//! The collect stage: waits for every segment's event while the publisher runs on, and
//! sums what the segments report.
//!
//! Why a stage of its own: it takes what prepare handed forward (the plan, the segments an
//! earlier run finished, the publisher) and hands `Collected` on to the stitch step.

use tessera_farm::queue::Consumer;
use tessera_farm::FarmError;
use tessera_model::probe::{ProbeInfo, SegmentPlan};
use tessera_model::wire::{encode_message, SegmentOutcome, TaskRef};

use crate::patience::recorded;
use crate::prepare::{published, segment_task, OnQueue, Prepared};
use crate::request::{DispatchContext, JobRequest, JobStage};
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
        decode_errors: 0,
    };
    // Segments an earlier run of this job already collected.
    for &(seg, frames) in reused {
        if let Some(slot) = done.get_mut(seg as usize).filter(|d| !**d) {
            *slot = true;
            remaining -= 1;
            c.frames += frames;
        }
    }
    prepared.audio.segments_left(remaining);
    let view = PlanView {
        plans: &prepared.plans,
        info: &prepared.info,
        bias: prepared.bias,
        queue: &prepared.encode_queue,
        on_queue: &prepared.on_queue,
        fingerprint: prepared.fingerprint,
        media_starts: &prepared.media_starts,
        stills: prepared.thumbnails.as_ref().map_or(&[], |t| &t.stills),
    };
    let mut silence = Silence::new(ctx.task_deadline);
    while remaining > 0 {
        let (event, delivery) = tokio::select! {
            e = next_event(&req.id, prepared.fingerprint, events) => e?,
            p = published(publisher) => {
                p?;
                *publisher = None;
                continue;
            }
            () = silence.passed() => {
                republish_silent(ctx, req, &view, &done, &mut silence).await?;
                continue;
            }
        };
        silence.heard();
        let TaskRef::Segment(segment) = event.task else {
            // A stitch event from an earlier run of this job: it is republished later.
            let _ = delivery.acker.ack().await;
            continue;
        };
        let i = segment as usize;
        match event.outcome {
            SegmentOutcome::Done {
                frames,
                media_seconds,
                overhead_seconds,
                peak_rss_bytes,
                decode_errors,
                ..
            } => {
                // A redelivered segment may report twice; count it once.
                if i < total && !done[i] {
                    // Recorded (for a restart) before the event is acked.
                    recorded(
                        &ctx.on_stage,
                        &JobStage::SegmentDone {
                            segment,
                            frames,
                            media_seconds,
                            overhead_seconds,
                        },
                    )
                    .await;
                    done[i] = true;
                    remaining -= 1;
                    prepared.audio.segments_left(remaining);
                    c.frames += frames;
                    c.overheads.push(overhead_seconds);
                    c.peak_segment_rss = c.peak_segment_rss.max(peak_rss_bytes);
                    c.decode_errors += decode_errors;
                    if let Some(gate) = &ctx.gate {
                        gate.release(&req.id);
                    }
                }
                let _ = delivery.acker.ack().await;
            }
            // A copy of a segment that already has its result failed (a republished or
            // dead-lettered duplicate): the result stands.
            SegmentOutcome::Failed { .. } if done.get(i).copied().unwrap_or(false) => {
                tracing::info!(job = %req.id, segment, "failure of a finished segment's copy ignored");
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

/// What a republish needs of the prepared job (borrowed apart from its publisher).
struct PlanView<'a> {
    plans: &'a [SegmentPlan],
    info: &'a ProbeInfo,
    bias: i64,
    queue: &'a str,
    on_queue: &'a OnQueue,
    fingerprint: u64,
    media_starts: &'a [i64],
    stills: &'a [crate::planning::PlannedStill],
}

/// After a silence of the job's segments: republishes the ones on the queue without a
/// result (a publish that fails is tried again at the next silence), or fails the job.
async fn republish_silent(
    ctx: &DispatchContext,
    req: &JobRequest,
    view: &PlanView<'_>,
    done: &[bool],
    silence: &mut Silence,
) -> Result<(), FarmError> {
    let outstanding: Vec<TaskRef> = {
        let on_queue = view.on_queue.lock().unwrap_or_else(|p| p.into_inner());
        (0..done.len())
            .filter(|&i| !done[i] && on_queue.get(i).copied().unwrap_or(false))
            .map(|i| TaskRef::Segment(i as u32))
            .collect()
    };
    if !silence
        .republish_due(&*ctx.queue, view.queue, &outstanding)
        .await?
    {
        return Ok(());
    }
    for plan in outstanding.iter().filter_map(|t| match t {
        TaskRef::Segment(i) => view.plans.get(*i as usize),
        TaskRef::Stitch(_) => None,
    }) {
        let task = segment_task(
            req,
            view.fingerprint,
            (plan, view.plans.len()),
            view.info,
            (view.bias, view.media_starts, view.stills),
        );
        if let Err(e) = ctx.queue.publish(view.queue, encode_message(&task)).await {
            tracing::warn!(job = %req.id, segment = plan.index, error = %e, "republish failed");
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
