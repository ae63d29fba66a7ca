//! Finishing a job: collect the segments' events, have workers stitch every output, check,
//! measure, deliver.

use std::path::Path;
use std::time::Instant;

use tessera_farm::model::{decode_message, SegmentOutcome, TaskEvent, TaskRef};
use tessera_farm::queue::{Consumer, Delivery};
use tessera_farm::FarmError;
use tessera_media::ErrorClass;

use crate::job::{DispatchContext, JobReport, JobRequest, JobStage, OutputReport};
use crate::prepare::{published, Prepared, Publisher};
use crate::stitching;

struct Collected {
    frames: u64,
    overheads: Vec<f64>,
    peak_segment_rss: u64,
}

pub(crate) async fn finish(
    ctx: &DispatchContext,
    req: &JobRequest,
    staging: &Path,
    mut prepared: Prepared,
    events: &mut dyn Consumer,
    started: Instant,
) -> Result<JobReport, FarmError> {
    let total = prepared.plans.len();
    let collected = match collect(
        ctx,
        req,
        total,
        &prepared.reused,
        &mut prepared.publisher,
        events,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            prepared.audio.abort();
            return Err(e);
        }
    };
    (ctx.on_stage)(&JobStage::Stitching);
    let audio = prepared.audio.await.map_err(|e| FarmError::ChildCrashed {
        what: "audio".into(),
        detail: e.to_string(),
    })??;
    let (audio_tracks, audio_rss) = match &audio {
        Some((result, stats)) => (Some(result.tracks.as_slice()), stats.peak_rss_bytes),
        None => (None, 0),
    };
    let tasks = stitching::stitch_tasks(
        req,
        &prepared.info,
        &prepared.plans,
        prepared.bias,
        audio_tracks,
        collected.frames,
    );
    let stitch_rss = stitching::stitch_all(ctx, req, &tasks, events).await?;
    let mut quality = Vec::with_capacity(tasks.len());
    for task in &tasks {
        quality.push(if req.measure_quality {
            Some(stitching::measure(ctx, req, task, staging).await?)
        } else {
            None
        });
    }
    let sizes = stitching::deliver_all(ctx, req, &tasks).await?;

    let wall_s = started.elapsed().as_secs_f64();
    let mut overheads = collected.overheads;
    overheads.sort_by(f64::total_cmp);
    let outputs: Vec<OutputReport> = req
        .outputs
        .iter()
        .zip(sizes)
        .zip(quality)
        .map(|((o, bytes), quality)| OutputReport {
            destination: o.destination.to_string(),
            rendition: o.rendition.name.clone(),
            bytes,
            quality,
        })
        .collect();
    Ok(JobReport {
        job_id: req.id.clone(),
        frames: collected.frames,
        source_frames: prepared.info.video.frames,
        segments: prepared.plans.len() as u32,
        audio_tracks: audio_tracks.map_or(0, <[_]>::len),
        bytes: outputs.iter().map(|o| o.bytes).sum(),
        wall_s,
        encode_fps: collected.frames as f64 / wall_s.max(1e-9),
        peak_child_rss_bytes: [
            prepared.peak_rss_bytes,
            collected.peak_segment_rss,
            audio_rss,
            stitch_rss,
        ]
        .into_iter()
        .max()
        .unwrap_or(0),
        peak_segment_rss_bytes: collected.peak_segment_rss,
        median_segment_overhead_s: overheads.get(overheads.len() / 2).copied().unwrap_or(0.0),
        quality: outputs.first().and_then(|o| o.quality.clone()),
        outputs,
    })
}

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
    code: String,
    class: ErrorClass,
    message: &str,
) -> FarmError {
    FarmError::Media {
        code,
        class,
        message: format!("{task}: {message}"),
    }
}

/// Waits for every segment's event; the first failure fails the job with its reason.
async fn collect(
    ctx: &DispatchContext,
    req: &JobRequest,
    total: usize,
    reused: &[(u32, u64)],
    publisher: &mut Option<Publisher>,
    events: &mut dyn Consumer,
) -> Result<Collected, FarmError> {
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
