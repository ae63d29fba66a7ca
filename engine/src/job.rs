//! One job from input to output, its stages in order: prepare (probe, plan, split, publish)
//! gives `Prepared`; collect waits for the segments and gives `Collected`; the stitch step
//! (stitching.rs) stitches, measures and delivers every output; this module writes the
//! report and cleans up.

use std::path::Path;
use std::time::Instant;

use tessera_farm::queue::Consumer;
use tessera_farm::store::Store;
use tessera_farm::FarmError;
use tessera_model::wire::Hardware;
use tokio_util::sync::CancellationToken;

use crate::collect::{collect, judge_decode_errors};
use crate::prepare::prepare;
use crate::request::{Destination, DispatchContext, JobReport, JobRequest, JobStage, OutputReport};
use crate::PublishGate;
use crate::{packaging, stitching};

/// Runs one job's stages to its outcome. The caller records the outcome durably and only
/// then calls [`end_job`]: the end marker tells workers to drop the job's tasks, so a job
/// whose marker exists must never be left unfinished in the caller's records (a restart would
/// resume it and wait forever for tasks the workers drop).
pub async fn run_job(
    ctx: &DispatchContext,
    req: &JobRequest,
    events: &mut dyn Consumer,
    cancel: CancellationToken,
) -> Result<JobReport, FarmError> {
    let started = Instant::now();
    let staging = ctx.staging_dir.join(&req.id);
    run_stages(ctx, req, &staging, events, started, &cancel).await
}

/// `work`, or `Cancelled` as soon as `cancel` fires (dropping `work`).
async fn or_cancel<T>(
    cancel: &CancellationToken,
    job: &str,
    work: impl std::future::Future<Output = Result<T, FarmError>>,
) -> Result<T, FarmError> {
    tokio::select! {
        r = work => r,
        _ = cancel.cancelled() => Err(FarmError::Cancelled { job: job.to_string() }),
    }
}

/// Ends a job whose outcome is recorded: tells workers it is over (they drop its queued
/// tasks and abort running ones), frees its priority-gate places, and removes its work area
/// and its staging under `staging_dir`. Idempotent: a restarted dispatcher runs it again for
/// jobs whose end it did not finish.
pub async fn end_job(store: &dyn Store, gate: Option<&PublishGate>, staging_dir: &Path, job: &str) {
    mark_ended(store, staging_dir, job).await;
    if let Some(gate) = gate {
        gate.release_job(job);
    }
    let _ = store
        .delete_prefix(&tessera_model::wire::keys::job_prefix(job))
        .await;
    let _ = tokio::fs::remove_dir_all(staging_dir.join(job)).await;
}

/// The stages in order, then the report.
async fn run_stages(
    ctx: &DispatchContext,
    req: &JobRequest,
    staging: &Path,
    events: &mut dyn Consumer,
    started: Instant,
    cancel: &CancellationToken,
) -> Result<JobReport, FarmError> {
    let job = req.id.as_str();
    let mut req = std::borrow::Cow::Borrowed(req);
    // Seconds spent preparing (probe, plan, split up to the first publish), summed over a
    // CPU fallback's second preparation: the encodes run between preparing and collecting.
    let mut prepare_s = 0.0;
    let (mut prepared, collected) = loop {
        let preparing = Instant::now();
        let mut prepared = or_cancel(cancel, job, prepare(ctx, &req, staging)).await?;
        prepare_s += preparing.elapsed().as_secs_f64();
        // A package's rungs joined the outputs once the probe knew the source.
        if prepared.outputs != req.outputs {
            req = std::borrow::Cow::Owned(JobRequest {
                outputs: prepared.outputs.clone(),
                ..req.into_owned()
            });
        }
        match or_cancel(cancel, job, collect(ctx, &req, &mut prepared, events)).await {
            Ok(c) => break (prepared, c),
            Err(e) => {
                prepared.audio.abort();
                let on_gpu = prepared.encode_queue == ctx.gpu_queue;
                if !falls_back_to_cpu(req.hardware, on_gpu, e.code()) {
                    return Err(e);
                }
                tracing::warn!(
                    job, error = %e,
                    "the GPU path cannot do this job: running it again on the CPU path"
                );
                req = std::borrow::Cow::Owned(JobRequest {
                    hardware: Hardware::Cpu,
                    ..req.into_owned()
                });
            }
        }
    };
    let req: &JobRequest = &req;
    let collected_at = started.elapsed().as_secs_f64();
    let mut warnings: Vec<String> = (prepared.info.ignored.iter())
        .map(|s| format!("{s}: left out of the outputs"))
        .chain(prepared.info.warnings.iter().cloned())
        .collect();
    match judge_decode_errors(
        &req.input,
        collected.decode_errors,
        collected.frames,
        ctx.max_decode_error_share,
    ) {
        Ok(warning) => warnings.extend(warning),
        Err(e) => {
            prepared.audio.abort();
            return Err(e);
        }
    }
    crate::patience::recorded(&ctx.on_stage, &JobStage::Stitching).await;
    let audio_done = async {
        prepared
            .audio
            .finish()
            .await
            .map_err(|e| FarmError::ChildCrashed {
                what: "audio".into(),
                detail: e.to_string(),
            })?
    };
    let audio = or_cancel(cancel, job, audio_done).await?;
    let (audio_tracks, audio_rss) = match &audio {
        Some((result, stats)) => (Some(result.tracks.as_slice()), stats.peak_rss_bytes),
        None => (None, 0),
    };
    let tasks = stitching::stitch_tasks(
        req,
        prepared.fingerprint,
        &prepared.info,
        &prepared.plans,
        prepared.bias,
        audio_tracks,
        collected.frames,
    );
    let stitched = or_cancel(cancel, job, stitching::stitch_all(ctx, req, &tasks, events)).await?;
    let mut quality = Vec::with_capacity(tasks.len());
    for task in &tasks {
        quality.push(if req.measure_quality {
            Some(or_cancel(cancel, job, stitching::measure(ctx, req, task, staging)).await?)
        } else {
            None
        });
    }
    let package = or_cancel(
        cancel,
        job,
        packaging::build(ctx, req, &prepared, &tasks, staging),
    )
    .await?;
    if let Some(built) = &package {
        warnings.extend(built.warnings.iter().cloned());
    }
    // The point of no return: from here a cancel cannot leave some outputs delivered and
    // others not; a job cancelled before it is refused delivery.
    if cancel.is_cancelled() {
        return Err(FarmError::Cancelled { job: job.into() });
    }
    crate::patience::recorded_unless_cancelled(&ctx.on_stage, &JobStage::Delivering).await?;
    let sizes = stitching::deliver_all(ctx, req, &tasks).await?;
    if let Some(built) = &package {
        if let Err(e) = packaging::deliver(ctx, req, prepared.fingerprint, built).await {
            packaging::undeliver(ctx, req, built).await;
            stitching::undeliver_all(ctx, req).await;
            return Err(e);
        }
    }

    let wall_s = started.elapsed().as_secs_f64();
    let mut overheads = collected.overheads;
    overheads.sort_by(f64::total_cmp);
    let mut outputs: Vec<OutputReport> = req
        .outputs
        .iter()
        .zip(sizes)
        .zip(quality)
        .filter(|((o, _), _)| o.destination != Destination::Rung)
        .map(|((o, bytes), quality)| OutputReport {
            destination: o.destination.to_string(),
            rendition: o.rendition.name.clone(),
            bytes,
            quality,
        })
        .collect();
    if let (Some(p), Some(built)) = (&req.package, &package) {
        outputs.push(OutputReport {
            destination: p.destination.to_string(),
            rendition: "package".into(),
            bytes: built.bytes,
            quality: None,
        });
    }
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
            stitched.peak_rss_bytes,
        ]
        .into_iter()
        .max()
        .unwrap_or(0),
        peak_segment_rss_bytes: collected.peak_segment_rss,
        median_segment_overhead_s: overheads.get(overheads.len() / 2).copied().unwrap_or(0.0),
        quality: outputs.first().and_then(|o| o.quality.clone()),
        outputs,
        decode_errors: collected.decode_errors,
        warnings,
        prepare_s,
        finish_s: wall_s - collected_at,
        fixed_overhead_s: prepare_s + (wall_s - collected_at),
        qc_s: stitched.check_seconds,
    })
}

/// Whether a job whose segments failed on the GPU path runs again, whole, on the CPU path:
/// only a job that may run anywhere (`hardware: any`) and went to the GPU queue, and only
/// for GPU conditions (a request the card's NVENC refuses, no usable card, sessions or a
/// fault that outlasted the bounce limit). A job asking for the GPU fails with the reason.
fn falls_back_to_cpu(
    hardware: Hardware,
    on_gpu_queue: bool,
    code: tessera_model::error_code::ErrorCode,
) -> bool {
    use tessera_model::error_code::ErrorCode as C;
    hardware == Hardware::Any
        && on_gpu_queue
        && matches!(
            code,
            C::GpuRequestUnsupported
                | C::GpuUnavailable
                | C::GpuSessionUnavailable
                | C::GpuDeviceFault
                | C::GpuNoSession
        )
}

async fn mark_ended(store: &dyn Store, staging_dir: &Path, job: &str) {
    let marker = staging_dir.join(job).with_extension("ended");
    let written = async {
        tokio::fs::create_dir_all(staging_dir)
            .await
            .map_err(|e| FarmError::io(staging_dir, e))?;
        tokio::fs::write(&marker, b"")
            .await
            .map_err(|e| FarmError::io(&marker, e))?;
        let key = tessera_model::wire::keys::ended(job);
        crate::patience::patiently("mark job ended", || store.put_file(&key, &marker)).await
    }
    .await;
    if let Err(e) = written {
        tracing::warn!(job, error = %e, "end-of-job marker not written");
    }
    let _ = tokio::fs::remove_file(&marker).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::error_code::ErrorCode as C;

    #[test]
    fn only_gpu_conditions_of_anywhere_jobs_on_the_gpu_queue_fall_back() {
        for code in [
            C::GpuRequestUnsupported,
            C::GpuUnavailable,
            C::GpuSessionUnavailable,
            C::GpuDeviceFault,
            C::GpuNoSession,
        ] {
            assert!(
                falls_back_to_cpu(Hardware::Any, true, code.clone()),
                "{code:?}"
            );
            assert!(
                !falls_back_to_cpu(Hardware::Gpu, true, code.clone()),
                "{code:?}"
            );
            assert!(
                !falls_back_to_cpu(Hardware::Any, false, code.clone()),
                "{code:?}"
            );
            assert!(
                !falls_back_to_cpu(Hardware::Cpu, false, code.clone()),
                "{code:?}"
            );
        }
        for code in [C::DecodeFailed, C::QcFailed, C::EncodeFailed, C::TaskLost] {
            assert!(
                !falls_back_to_cpu(Hardware::Any, true, code.clone()),
                "{code:?}"
            );
        }
    }

    #[test]
    fn a_cpu_run_of_a_plan_has_its_own_keys() {
        use crate::prepare::path_salt;
        assert_ne!(path_salt(Hardware::Cpu), path_salt(Hardware::Any));
        assert_eq!(path_salt(Hardware::Any), path_salt(Hardware::Gpu));
    }
}
