//! Finishing a job: collect worker events, then stitch the segments and the audio.

use std::path::Path;
use std::time::Instant;

use tessera_farm::model::{decode_message, keys, SegmentEvent, SegmentOutcome};
use tessera_farm::queue::Consumer;
use tessera_farm::sandbox::MediaOp;
use tessera_farm::FarmError;
use tessera_media::{ErrorClass, QualityReport, StitchRequest, StitchResult};

use crate::job::{DispatchContext, JobReport, JobRequest, JobStage};
use crate::prepare::Prepared;

struct Collected {
    frames: u64,
    overheads: Vec<f64>,
    peak_segment_rss: u64,
}

pub(crate) async fn finish(
    ctx: &DispatchContext,
    req: &JobRequest,
    staging: &Path,
    prepared: Prepared,
    events: &mut dyn Consumer,
    started: Instant,
) -> Result<JobReport, FarmError> {
    let collected = match collect(ctx, req, prepared.plans.len(), &prepared.reused, events).await {
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

    let enc_dir = staging.join("encoded");
    tokio::fs::create_dir_all(&enc_dir)
        .await
        .map_err(|e| FarmError::io(&enc_dir, e))?;
    let mut segments = Vec::with_capacity(prepared.plans.len());
    for plan in &prepared.plans {
        let path = enc_dir.join(format!("{:06}.nut", plan.index));
        ctx.store
            .get_file(
                &keys::encoded(&req.id, &req.rendition.name, plan.index),
                &path,
            )
            .await?;
        segments.push(path);
    }
    let (audio_path, audio_tracks, audio_rss) = match audio {
        Some((result, stats)) => {
            let path = staging.join("audio.nut");
            ctx.store.get_file(&keys::audio(&req.id), &path).await?;
            (Some(path), result.tracks, stats.peak_rss_bytes)
        }
        None => (None, Vec::new(), 0),
    };
    let video = &prepared.info.video;
    let stitch = StitchRequest {
        segments,
        video_bias: prepared.bias,
        video_time_base: video.time_base,
        audio: audio_path,
        audio_tracks: audio_tracks.clone(),
        start_seconds: prepared.info.start_seconds,
        display_matrix: video.display_matrix.clone(),
        frame_rate: video.avg_frame_rate,
        container: req.container,
        output: req.output.clone(),
    };
    let (stitched, stitch_stats): (StitchResult, _) = ctx
        .sandbox
        .run(&MediaOp::Stitch(stitch), ctx.limits, &mut |_| {})
        .await?;
    if stitched.frames != collected.frames {
        let _ = tokio::fs::remove_file(&req.output).await;
        return Err(FarmError::Media {
            code: "frame_count_mismatch".into(),
            class: ErrorClass::Retry,
            message: format!(
                "stitched {} frames but the segments reported {}",
                stitched.frames, collected.frames
            ),
        });
    }
    let quality = if req.measure_quality {
        let op = MediaOp::Quality {
            output: req.output.clone(),
            source: req.input.clone(),
        };
        let (q, _): (QualityReport, _) = ctx.sandbox.run(&op, ctx.limits, &mut |_| {}).await?;
        Some(q)
    } else {
        None
    };
    let wall_s = started.elapsed().as_secs_f64();
    let mut overheads = collected.overheads;
    overheads.sort_by(f64::total_cmp);
    Ok(JobReport {
        job_id: req.id.clone(),
        output: req.output.clone(),
        frames: stitched.frames,
        source_frames: video.frames,
        segments: prepared.plans.len() as u32,
        audio_tracks: audio_tracks.len(),
        bytes: stitched.bytes,
        wall_s,
        encode_fps: stitched.frames as f64 / wall_s.max(1e-9),
        peak_child_rss_bytes: [
            prepared.peak_rss_bytes,
            collected.peak_segment_rss,
            audio_rss,
            stitch_stats.peak_rss_bytes,
        ]
        .into_iter()
        .max()
        .unwrap_or(0),
        peak_segment_rss_bytes: collected.peak_segment_rss,
        median_segment_overhead_s: overheads.get(overheads.len() / 2).copied().unwrap_or(0.0),
        quality,
    })
}

/// Waits for every segment's event; the first failure fails the job with its reason.
async fn collect(
    ctx: &DispatchContext,
    req: &JobRequest,
    total: usize,
    reused: &[(u32, u64)],
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
        let delivery = events.next().await?.ok_or_else(|| FarmError::Queue {
            queue: "events".into(),
            reason: "closed before the job finished".into(),
        })?;
        let event: SegmentEvent = match decode_message(&delivery.body) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "unreadable event dropped");
                let _ = delivery.acker.nack(false).await;
                continue;
            }
        };
        if event.job_id != req.id {
            tracing::warn!(job = %event.job_id, "event for another job ignored");
            let _ = delivery.acker.ack().await;
            continue;
        }
        match event.outcome {
            SegmentOutcome::Done {
                frames,
                overhead_seconds,
                peak_rss_bytes,
                ..
            } => {
                let i = event.segment as usize;
                // A redelivered segment may report twice; count it once.
                if i < total && !done[i] {
                    done[i] = true;
                    remaining -= 1;
                    c.frames += frames;
                    c.overheads.push(overhead_seconds);
                    c.peak_segment_rss = c.peak_segment_rss.max(peak_rss_bytes);
                    // Recorded (for a restart) before the event is acked.
                    (ctx.on_stage)(&JobStage::SegmentDone {
                        segment: event.segment,
                        frames,
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
                return Err(FarmError::Media {
                    code,
                    class,
                    message: format!("segment {}: {message}", event.segment),
                });
            }
        }
    }
    Ok(c)
}
