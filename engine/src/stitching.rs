//! The stitch step: one stitch task per output on the stitch queue, run by a worker; then the
//! dispatcher checks the frame counts, measures quality when asked, and delivers every
//! output, all of them or none.

mod stored;
mod taken;

use std::path::Path;

use tessera_farm::queue::Consumer;
use tessera_farm::sandbox::MediaOp;
use tessera_farm::store::Delivered;
use tessera_farm::FarmError;
use tessera_model::audio::AudioTrackResult;
use tessera_model::probe::{ProbeInfo, SegmentPlan};
use tessera_model::stitch::{OutputExpectation, QualityReport};
use tessera_model::wire::keys;
use tessera_model::wire::{encode_message, SegmentOutcome, StitchTask, TaskRef, WIRE_VERSION};

use crate::patience::patiently;
use crate::request::{Destination, DispatchContext, JobPlan, JobRequest};
use crate::rollback::Rollback;
use crate::task_events::{next_event, task_failed, Silence, MAX_REPUBLISH};
pub(crate) use stored::{at_stored_keys, Stitched};
use taken::Taken;

/// The stitch tasks of a job, one per output: `frames` each, with the audio step's tracks.
pub(crate) fn stitch_tasks(
    plan: &JobPlan,
    audio: Option<&[AudioTrackResult]>,
    frames: u64,
) -> Vec<StitchTask> {
    let (req, fingerprint, info) = (&plan.req, plan.fingerprint, &plan.info);
    let (plans, bias) = (&plan.segments, plan.bias);
    let video = &info.video;
    req.outputs
        .iter()
        .enumerate()
        .map(|(i, out)| StitchTask {
            v: WIRE_VERSION,
            job_id: req.id.clone(),
            plan: fingerprint,
            output: i as u32,
            segment_keys: plans
                .iter()
                .map(|p| keys::encoded(&req.id, fingerprint, &out.rendition.name, p.index))
                .collect(),
            audio_key: audio.map(|_| keys::audio(&req.id, fingerprint)),
            audio_tracks: audio.map(<[_]>::to_vec).unwrap_or_default(),
            video_bias: bias,
            video_time_base: video.time_base,
            start_seconds: info.start_seconds,
            display_matrix: video.display_matrix.clone(),
            frame_rate: video.avg_frame_rate,
            container: out.container,
            result_key: keys::output(&req.id, fingerprint, i as u32, out.container.extension()),
            expected_frames: frames,
            chapters: info.chapters.clone(),
            title: info.title.clone(),
            subtitles: info.subtitles.clone(),
            expect: Some(expectation(
                format!("output {i} ({})", out.destination),
                info,
                plans,
                audio.map_or(0, <[_]>::len),
            )),
            heartbeats: true,
            attempt_keys: true,
        })
        .collect()
}

/// What the QC gate checks the stitched output against: the plan's frames and the first and
/// last shown frame, moved to the output's zero, within one source frame.
fn expectation(
    label: String,
    info: &ProbeInfo,
    plans: &[SegmentPlan],
    audio_tracks: usize,
) -> OutputExpectation {
    let video = &info.video;
    let start = video.time_base.ticks(info.start_seconds);
    let rate = [video.avg_frame_rate, video.frame_rate]
        .into_iter()
        .find(|r| r.num > 0 && r.den > 0);
    OutputExpectation {
        label,
        frames: plans.iter().map(|p| p.frames).sum(),
        first_pts: plans.iter().find_map(|p| p.first_frame_pts).unwrap_or(0) - start,
        last_pts: plans
            .iter()
            .rev()
            .find_map(|p| p.last_frame_pts)
            .unwrap_or(0)
            - start,
        time_base: video.time_base,
        tolerance_seconds: rate.map_or(0.05, |r| f64::from(r.den) / f64::from(r.num)),
        audio_tracks,
    }
}

/// Publishes the stitch tasks and waits until every output is stitched; returns what they
/// cost. A frame count other than the segments' fails the job.
pub(crate) async fn stitch_all(
    ctx: &DispatchContext,
    req: &JobRequest,
    tasks: &[StitchTask],
    events: &mut dyn Consumer,
) -> Result<Stitched, FarmError> {
    for task in tasks {
        crate::patience::publish_patiently(&*ctx.queue, &ctx.stitch_queue, &encode_message(task))
            .await?;
    }
    let mut done = vec![false; tasks.len()];
    let mut stitched = Stitched::default();
    let mut silence = Silence::new(ctx.task_deadline);
    let lapse = std::time::Duration::from_secs(tessera_model::wire::STITCH_LAPSE_SECONDS);
    let mut taken = Taken::new(tasks.len(), lapse);
    while done.iter().any(|d| !d) {
        let (event, delivery) = tokio::select! {
            e = next_event(&req.id, tasks.first().map_or(0, |t| t.plan), events) => e?,
            i = taken.lapsed() => {
                taken.republish(i, MAX_REPUBLISH)?;
                if let Err(e) = ctx.queue.publish(&ctx.stitch_queue, encode_message(&tasks[i])).await {
                    tracing::warn!(job = %req.id, output = i, error = %e, "republish failed");
                }
                continue;
            }
            () = silence.passed() => {
                let outstanding: Vec<TaskRef> = (0..tasks.len())
                    .filter(|&i| !done[i])
                    .map(|i| TaskRef::Stitch(i as u32))
                    .collect();
                if silence.republish_due(&*ctx.queue, &ctx.stitch_queue, &outstanding).await? {
                    for task in tasks.iter().filter(|t| !done[t.output as usize]) {
                        if let Err(e) = ctx.queue.publish(&ctx.stitch_queue, encode_message(task)).await {
                            tracing::warn!(job = %req.id, output = task.output, error = %e, "republish failed");
                        }
                    }
                }
                continue;
            }
        };
        silence.heard();
        let index = match event.task {
            TaskRef::Stitch(i) if (i as usize) < tasks.len() => i as usize,
            // Late duplicates of segment events, or nonsense: nothing to wait for.
            _ => {
                let _ = delivery.acker.ack().await;
                continue;
            }
        };
        let _ = delivery.acker.ack().await;
        match event.outcome {
            // A worker took the stitch and runs it (a late heartbeat of a done one is moot).
            SegmentOutcome::Running if !done[index] => taken.heard(index),
            SegmentOutcome::Running => {}
            // A copy of the task (delivered twice, republished) finished after the first:
            // the first result stands, and this one's object goes with the work area.
            SegmentOutcome::Done { .. } if done[index] => {
                tracing::info!(job = %req.id, output = index,
                    "a copy of a stitch finished after the first; the first is delivered");
            }
            SegmentOutcome::Done {
                frames,
                peak_rss_bytes,
                check_seconds,
                etags,
                keys,
                ..
            } => {
                let expected = tasks[index].expected_frames;
                if frames != expected {
                    return Err(FarmError::frame_count_mismatch(
                        index as u32,
                        frames,
                        expected,
                    ));
                }
                done[index] = true;
                taken.forget(index);
                let (etag, key) = (etags.into_iter().next(), keys.into_iter().next());
                stitched.record(tasks.len(), index, etag.flatten(), key.flatten());
                stitched.peak_rss_bytes = stitched.peak_rss_bytes.max(peak_rss_bytes);
                stitched.check_seconds += check_seconds;
            }
            // A copy of a stitch that already has its result failed: the result stands.
            SegmentOutcome::Failed { .. } if done[index] => {}
            SegmentOutcome::Failed {
                code,
                class,
                message,
            } => return Err(task_failed(event.task, code, class, &message)),
        }
    }
    Ok(stitched)
}

/// PSNR/SSIM and VMAF (per segment of `segments`' frame counts too) of one stitched output
/// against the source (fetched from the work area into staging for the measurement, removed
/// after).
pub(crate) async fn measure(
    ctx: &DispatchContext,
    req: &JobRequest,
    (task, segments): (&StitchTask, &[u64]),
    staging: &Path,
) -> Result<QualityReport, FarmError> {
    let local = staging.join(format!(
        "quality-{:02}.{}",
        task.output,
        task.container.extension()
    ));
    patiently("fetch output", || {
        ctx.store.get_file(&task.result_key, &local)
    })
    .await?;
    let op = MediaOp::Quality {
        output: local.clone(),
        source: req.input.clone(),
        segments: segments.to_vec(),
    };
    let measured = ctx.sandbox.run(&op, ctx.limits, &mut |_| {}).await;
    let _ = tokio::fs::remove_file(&local).await;
    Ok(measured?.0)
}

/// Delivers every output to its destination; returns their sizes. If one fails, the ones
/// already delivered are removed again: a failed job leaves nothing at its destinations.
pub(crate) async fn deliver_all(
    ctx: &DispatchContext,
    req: &JobRequest,
    tasks: &[StitchTask],
    etags: &[Option<String>],
) -> Result<Vec<u64>, FarmError> {
    let mut sizes = Vec::with_capacity(tasks.len());
    for (i, (out, task)) in req.outputs.iter().zip(tasks).enumerate() {
        let etag = etags.get(i).and_then(|e| e.as_deref());
        match deliver(ctx, &task.result_key, etag, &out.destination).await {
            Ok(Delivered { size, earlier }) => {
                // A rung goes on to its package (delivered, and logged, with it).
                if !matches!(out.destination, Destination::Rung) {
                    let destination = out.destination.to_string();
                    if earlier {
                        tracing::info!(job = %req.id, %destination, bytes = size,
                            "output already at its destination: the run before the restart copied it");
                    } else {
                        tracing::info!(job = %req.id, %destination, bytes = size, "output delivered");
                    }
                }
                sizes.push(size)
            }
            Err(e) => {
                let mut rollback = Rollback::default();
                for done in req.outputs.iter().take(sizes.len()) {
                    undeliver(ctx, &done.destination, &mut rollback).await;
                }
                return Err(rollback.fail(e));
            }
        }
    }
    Ok(sizes)
}

/// Removes every delivered output of `req` again (its package failed to deliver); what
/// stays is noted in `rollback`.
pub(crate) async fn undeliver_all(
    ctx: &DispatchContext,
    req: &JobRequest,
    rollback: &mut Rollback,
) {
    for out in &req.outputs {
        undeliver(ctx, &out.destination, rollback).await;
    }
}

/// Delivers the work object `key` to `dest`; `etag`, when known, is the object the stitch
/// stored after its QC gate, and only that one is copied.
async fn deliver(
    ctx: &DispatchContext,
    key: &str,
    etag: Option<&str>,
    dest: &Destination,
) -> Result<Delivered, FarmError> {
    let fresh = |size| Delivered {
        size,
        earlier: false,
    };
    match dest {
        Destination::File(path) => patiently("deliver", || ctx.store.get_file(key, path))
            .await
            .map(fresh),
        Destination::Object { bucket, key: dest } => match &ctx.sink {
            Some(sink) => patiently("deliver", || sink.deliver(key, etag, bucket, dest)).await,
            None => Err(FarmError::Store {
                key: dest.clone(),
                reason: "this farm cannot deliver to object destinations".into(),
            }),
        },
        // A rung is packaged, not delivered alone (see packaging.rs).
        Destination::Rung => Ok(fresh(0)),
    }
}

async fn undeliver(ctx: &DispatchContext, dest: &Destination, rollback: &mut Rollback) {
    match dest {
        Destination::File(path) => rollback.remove_file(path).await,
        Destination::Object { bucket, key } => {
            if let Some(sink) = &ctx.sink {
                rollback
                    .remove_objects(sink, bucket, vec![key.clone()])
                    .await;
            }
        }
        Destination::Rung => {}
    }
}
