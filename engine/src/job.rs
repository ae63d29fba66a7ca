//! One job from input to output, its stages in order: prepare (probe, plan, resolve the
//! request, start the publish stage) gives `Prepared`; collect waits for the segments and
//! gives `Collected`; on a GPU condition both run once more on the CPU path; the finish step
//! stitches, measures, packages and delivers and gives `Finished`; the report is built from
//! the three (report.rs). The caller then records the outcome and ends the job.

use std::path::Path;
use std::time::Instant;

use tessera_farm::queue::Consumer;
use tessera_farm::store::Store;
use tessera_farm::FarmError;
use tessera_model::wire::Hardware;
use tokio_util::sync::CancellationToken;

use crate::cancel::or_cancel;
use crate::collect::{collect, Collected};
use crate::finish::finish;
use crate::prepare::{prepare, Prepared};
use crate::report::Clock;
use crate::request::{DispatchContext, JobReport, JobRequest};
use crate::PublishGate;

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
    let (mut prepared, collected, prepare_s) =
        prepare_and_collect(ctx, req, &staging, events, &cancel).await?;
    let clock = Clock {
        started,
        prepare_s,
        collected_at: started.elapsed().as_secs_f64(),
    };
    let finished = finish(ctx, &mut prepared, &collected, &staging, events, &cancel).await?;
    Ok(JobReport::new(&prepared, &collected, &finished, &clock))
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

/// Prepares the job and collects its segments; when the GPU path cannot do it (see
/// [`falls_back_to_cpu`]), prepares and collects it once more, whole, on the CPU path. Also
/// gives the seconds spent preparing, summed over both runs (the encodes run between
/// preparing and collecting).
async fn prepare_and_collect(
    ctx: &DispatchContext,
    req: &JobRequest,
    staging: &Path,
    events: &mut dyn Consumer,
    cancel: &CancellationToken,
) -> Result<(Prepared, Collected, f64), FarmError> {
    let job = req.id.as_str();
    let mut prepare_s = 0.0;
    // The request a fallback prepares again: as the first run resolved it (rungs joined).
    let mut first_run: Option<JobRequest> = None;
    let mut hardware = req.hardware;
    loop {
        let source = first_run.as_ref().unwrap_or(req);
        let preparing = Instant::now();
        let preparation = prepare(ctx, source, hardware, staging);
        let mut prepared = or_cancel(cancel, job, preparation).await?;
        prepare_s += preparing.elapsed().as_secs_f64();
        // A whole-input run waits for its one task (whole.rs), a split one for its segments.
        let collected = match &prepared.whole {
            Some(task) => {
                let whole = crate::collect::collect_whole(ctx, &prepared.plan, task, events);
                or_cancel(cancel, job, whole).await
            }
            None => or_cancel(cancel, job, collect(ctx, &mut prepared, events)).await,
        };
        let e = match collected {
            Ok(collected) => return Ok((prepared, collected, prepare_s)),
            Err(e) => e,
        };
        prepared.audio.abort();
        let plan = &prepared.plan;
        if !falls_back_to_cpu(plan.req.hardware, plan.on_gpu(ctx), e.code()) {
            return Err(e);
        }
        tracing::warn!(
            job, error = %e,
            "the GPU path cannot do this job: running it again on the CPU path"
        );
        first_run = Some(prepared.into_request());
        hardware = Hardware::Cpu;
    }
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
        use crate::planning::path_salt;
        assert_ne!(path_salt(Hardware::Cpu), path_salt(Hardware::Any));
        assert_eq!(path_salt(Hardware::Any), path_salt(Hardware::Gpu));
    }
}
