//! The one-process farm: dispatcher logic and N workers over the embedded queue and a local
//! store, in this process (media work in sandboxed children).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use tessera_engine::{
    run_job, Destination, DispatchContext, JobOutput, JobReport, JobRequest, JobStage, PackageJob,
};
use tessera_farm::queue::{MemoryQueue, Queue};
use tessera_farm::sandbox::{Limits, Sandbox};
use tessera_farm::store::LocalStore;
use tessera_model::wire::{QUEUE_ENCODE_CPU, QUEUE_ENCODE_GPU, QUEUE_EVENTS, QUEUE_STITCH};
use tessera_worker::cores::CoreShare;
use tessera_worker::{GpuSettings, Gpus, WorkerConfig};
use tokio_util::sync::CancellationToken;

use crate::args::GpuChoice;
use crate::config::TranscodeConfig;
use crate::progress::Progress;

/// Delivery limit of the embedded queue: a segment gets three attempts.
const DELIVERY_LIMIT: u32 = 3;

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

async fn run_farm(
    cfg: &TranscodeConfig,
    job_id: &str,
    work: &std::path::Path,
    shutdown: CancellationToken,
) -> anyhow::Result<JobReport> {
    let queue = MemoryQueue::new(DELIVERY_LIMIT);
    let shared_queue: Arc<dyn Queue> = Arc::new(queue.clone());
    shared_queue.declare(QUEUE_ENCODE_CPU).await?;
    shared_queue.declare(QUEUE_ENCODE_GPU).await?;
    shared_queue.declare(QUEUE_STITCH).await?;
    shared_queue.declare(QUEUE_EVENTS).await?;
    let store = Arc::new(LocalStore::new(work.join("store"))?);
    let limits = Limits {
        timeout: Duration::from_secs(cfg.segment_timeout),
        memory_bytes: cfg.child_memory_bytes,
        ..Limits::default()
    };
    // One process, one job: the probe, split, audio, encodes and stitch share one warm child
    // per worker (started now, beside the rest of the set-up) instead of starting one each.
    let sandbox = Sandbox::current()?.reusing_children(cfg.workers, limits);

    // A GPU worker beside the CPU ones when a card with NVENC is found: the job's segments
    // then go to the GPU queue.
    let gpus = match cfg.gpu {
        GpuChoice::Off => None,
        choice => {
            let settings = GpuSettings {
                software_encode: choice == GpuChoice::Decode,
                ..GpuSettings::default()
            };
            let found = Gpus::detect(&settings, &sandbox.capabilities().await?.hw);
            if found.is_none() && choice == GpuChoice::Require {
                bail!("--gpu require: no NVIDIA GPU with a free NVENC session here");
            }
            if found.is_none() && choice == GpuChoice::Decode {
                bail!("--gpu decode: no NVIDIA GPU with NVDEC and the CUDA path here");
            }
            if let Some(g) = &found {
                // Foreign sessions, driver faults and probation, as in the worker service.
                let probe = tessera_worker::gpu::probe_in_child(Sandbox::current()?);
                g.spawn_refresh(Duration::from_secs(5), shutdown.clone(), probe);
            }
            found
        }
    };

    let progress = Progress::new(cfg.progress);
    let stop_ticker = CancellationToken::new();
    let ticker = tokio::spawn(progress.clone().tick(stop_ticker.clone()));

    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let workers_stop = CancellationToken::new();
    let mut workers = Vec::new();
    let p = progress.clone();
    let on_frames: tessera_worker::ProgressFn =
        Arc::new(move |_job, seg, n| p.segment_frames(seg, n));
    let worker_config = |i: usize| WorkerConfig {
        id: format!("local-{i}"),
        slots: 1,
        // One thread per worker's share of the cores: short inputs are split into one
        // segment per worker, so every core has an encode. Giving every encode all the cores
        // was measured too: no gain on the 5 s clip (ratio 1.176 against 1.178), 23% more x264
        // CPU per frame and a 1080p segment child over 250 MiB on the 60 s file.
        threads_per_slot: (cpus / cfg.workers).max(1),
        // ... except when the job has fewer segments than workers (a short clip in one
        // package segment): then the idle workers' cores go to the encodes that run.
        lend_idle_cores: Some(CoreShare {
            cpus,
            slots: cfg.workers,
        }),
        staging_dir: work.join(format!("worker-{i}")),
        queue: QUEUE_ENCODE_CPU.to_string(),
        stitch_queue: Some(QUEUE_STITCH.to_string()),
        gpu_queue: QUEUE_ENCODE_GPU.to_string(),
        gpus: None,
        metrics: Default::default(),
        delivery_limit: DELIVERY_LIMIT,
        limits,
        retry_backoff: Duration::from_millis(500),
        // The one-process farm only stops when its job is over or cancelled.
        grace: Duration::ZERO,
        min_free_bytes: 256 << 20,
        exit_when_idle: None,
        drain: Default::default(),
    };
    for i in 0..cfg.workers {
        workers.push(tokio::spawn(tessera_worker::run(
            worker_config(i),
            shared_queue.clone(),
            store.clone(),
            sandbox.clone(),
            Some(on_frames.clone()),
            workers_stop.clone(),
        )));
    }

    if let Some(gpus) = &gpus {
        let config = WorkerConfig {
            id: "local-gpu".into(),
            gpus: Some(gpus.clone()),
            staging_dir: work.join("worker-gpu"),
            ..worker_config(0)
        };
        workers.push(tokio::spawn(tessera_worker::run(
            config,
            shared_queue.clone(),
            store.clone(),
            sandbox.clone(),
            Some(on_frames.clone()),
            workers_stop.clone(),
        )));
        // The GPU worker consumes before any segment is published.
        while shared_queue.consumers(QUEUE_ENCODE_GPU).await.unwrap_or(0) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // A task that runs out of deliveries fails the job with the reason, as in the farm.
    tessera_engine::dead_letters::spawn_forwarders(&shared_queue, &workers_stop);
    let p = progress.clone();
    let ctx = DispatchContext {
        queue: shared_queue.clone(),
        store,
        sandbox,
        staging_dir: work.join("dispatcher"),
        encode_queue: QUEUE_ENCODE_CPU.to_string(),
        gpu_queue: tessera_model::wire::QUEUE_ENCODE_GPU.to_string(),
        stitch_queue: QUEUE_STITCH.to_string(),
        sink: None,
        gate: None,
        limits: Limits {
            timeout: Duration::from_secs(6 * 3600),
            ..limits
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
    };
    let request = JobRequest {
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
        hardware: if gpus.is_some() {
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
    };
    let mut events = shared_queue.consume(QUEUE_EVENTS, 64).await?;
    let result = run_job(&ctx, &request, events.as_mut(), shutdown).await;
    // Nothing records the outcome here: the job ends at once.
    tessera_engine::end_job(&*ctx.store, None, &ctx.staging_dir, &request.id).await;

    // Stop the workers: close the queue so idle ones return, cancel the rest.
    queue.close(QUEUE_ENCODE_CPU);
    queue.close(QUEUE_ENCODE_GPU);
    queue.close(QUEUE_STITCH);
    workers_stop.cancel();
    for w in workers {
        let _ = w.await;
    }
    stop_ticker.cancel();
    let _ = ticker.await;
    progress.finish();
    Ok(result?)
}
