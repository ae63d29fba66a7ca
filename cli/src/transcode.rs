//! The one-process farm: dispatcher logic and N workers over the embedded queue and a local
//! store, in this process (media work in sandboxed children). This file checks the paths and
//! runs the job through the engine; local_farm.rs starts and stops the farm around it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use tessera_engine::{
    run_job, Destination, DispatchContext, JobOutput, JobReport, JobRequest, JobStage, PackageJob,
};
use tessera_farm::sandbox::Limits;
use tessera_model::wire::{QUEUE_ENCODE_CPU, QUEUE_EVENTS, QUEUE_STITCH};
use tokio_util::sync::CancellationToken;

use crate::config::TranscodeConfig;
use crate::local_farm::{detect_gpus, Farm, LocalWorkers, WorkerSettings};
use crate::progress::Progress;

/// Runs one transcode; returns its report. `shutdown` cancels it (nothing left at the output).
pub async fn transcode(
    cfg: TranscodeConfig,
    shutdown: CancellationToken,
) -> anyhow::Result<JobReport> {
    let input = cfg.input.clone();
    if !input.exists() {
        bail!("{}: no such file", input.display());
    }
    if let Some(output) = &cfg.output {
        if let (Ok(a), Ok(b)) = (input.canonicalize(), output.canonicalize()) {
            if a == b {
                bail!("{}: output would overwrite the input", output.display());
            }
        }
    }
    let targets = cfg
        .output
        .iter()
        .chain(cfg.package.iter().map(|(_, dir)| dir));
    for target in targets {
        let out_dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !out_dir.is_dir() {
            bail!("{}: output directory does not exist", out_dir.display());
        }
    }

    let job_id = uuid::Uuid::new_v4().simple().to_string();
    let root = cfg.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    let work = root.join(format!("tessera-{job_id}"));
    std::fs::create_dir_all(&work)
        .with_context(|| format!("{}: cannot create work directory", work.display()))?;
    let result = run_farm(&cfg, &job_id, &work, shutdown).await;
    let _ = tokio::fs::remove_dir_all(&work).await;
    result
}

/// The farm's steps: open it, find the cards, start the workers, run the job through the
/// engine, then stop the workers and the progress line.
async fn run_farm(
    cfg: &TranscodeConfig,
    job_id: &str,
    work: &Path,
    shutdown: CancellationToken,
) -> anyhow::Result<JobReport> {
    let farm = Farm::open(cfg, work).await?;
    let gpus = detect_gpus(cfg.gpu, &farm.sandbox, &shutdown).await?;

    let progress = Progress::new(cfg.progress);
    let stop_ticker = CancellationToken::new();
    let ticker = tokio::spawn(progress.clone().tick(stop_ticker.clone()));

    let mut workers = LocalWorkers::new(&farm, &progress);
    let settings = WorkerSettings {
        cfg,
        work,
        limits: farm.limits,
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
    };
    workers.start(&settings, gpus.as_ref()).await;
    // A task that runs out of deliveries fails the job with the reason, as in the farm.
    tessera_engine::dead_letters::spawn_forwarders(&farm.shared, &workers.stop);
    let ctx = dispatch_context(cfg, work, &farm, &progress);
    let request = job_request(cfg, job_id, gpus.is_some());
    let mut events = farm.shared.consume(QUEUE_EVENTS, 64).await?;
    let result = run_job(&ctx, &request, events.as_mut(), shutdown).await;
    // Nothing records the outcome here: the job ends at once.
    tessera_engine::end_job(&*ctx.store, None, &ctx.staging_dir, &request.id).await;

    workers.stop(&farm.queue).await;
    stop_ticker.cancel();
    let _ = ticker.await;
    progress.finish();
    Ok(result?)
}

/// The engine's context for the job: the farm's queues, store and sandbox, the dispatcher's
/// staging directory, and the job's stages shown on the progress line.
fn dispatch_context(
    cfg: &TranscodeConfig,
    work: &Path,
    farm: &Farm,
    progress: &Progress,
) -> DispatchContext {
    let p = progress.clone();
    DispatchContext {
        queue: farm.shared.clone(),
        store: farm.store.clone(),
        sandbox: farm.sandbox.clone(),
        staging_dir: work.join("dispatcher"),
        encode_queue: QUEUE_ENCODE_CPU.to_string(),
        gpu_queue: tessera_model::wire::QUEUE_ENCODE_GPU.to_string(),
        stitch_queue: QUEUE_STITCH.to_string(),
        // One job at a time: no other work keeps the workers busy, so every input splits.
        whole_queue: None,
        whole_max_seconds: 0.0,
        cut_queue: None,
        sink: None,
        gate: None,
        limits: Limits {
            timeout: Duration::from_secs(6 * 3600),
            ..farm.limits
        },
        max_decode_error_share: cfg.max_decode_error_share,
        max_input_frames: None,
        task_deadline: tessera_engine::DEFAULT_TASK_DEADLINE,
        on_stage: Arc::new(move |stage: &JobStage| {
            match stage {
                JobStage::Planned {
                    frames, segments, ..
                } => p.planned(*frames, *segments),
                JobStage::Published => {}
                JobStage::SegmentDone {
                    segment, frames, ..
                } => p.segment_done(*segment, *frames),
                JobStage::Stitching | JobStage::Delivering => p.stitching(),
            }
            Ok(())
        }),
    }
}

/// The job: the input, the output file and any extra outputs, the package, on the GPU queue
/// when the farm has a GPU worker.
fn job_request(cfg: &TranscodeConfig, job_id: &str, gpu: bool) -> JobRequest {
    JobRequest {
        id: job_id.to_string(),
        input: cfg.input.clone(),
        outputs: (cfg.output.iter().map(|output| JobOutput {
            rendition: cfg.rendition.clone(),
            container: cfg.container,
            destination: Destination::File(output.clone()),
        }))
        .chain(cfg.extra_outputs.iter().map(|(r, c, p)| JobOutput {
            rendition: r.clone(),
            container: *c,
            destination: Destination::File(p.clone()),
        }))
        .collect(),
        segment_seconds: cfg.segment_seconds,
        parallelism: cfg.workers,
        priority: 0,
        hardware: if gpu {
            tessera_model::wire::Hardware::Gpu
        } else {
            tessera_model::wire::Hardware::Cpu
        },
        first_audio_only: cfg.first_audio_only,
        stereo_downmix: cfg.stereo_downmix,
        measure_quality: cfg.quality,
        resume: None,
        package: cfg.package.as_ref().map(|(spec, dir)| PackageJob {
            spec: spec.clone(),
            destination: Destination::File(dir.clone()),
        }),
    }
}
