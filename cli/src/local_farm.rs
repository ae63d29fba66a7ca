//! The one-process farm's parts: the embedded queue, the local store and the sandbox, the
//! cards when asked for, and the workers that run beside the engine in this process.
//!
//! Why apart from transcode.rs: setting the farm up and tearing it down is not the job; the
//! transcode runs one job through the engine on what this module starts.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use tessera_farm::queue::{MemoryQueue, Queue};
use tessera_farm::sandbox::{Confinement, Limits, Sandbox};
use tessera_farm::store::LocalStore;
use tessera_farm::FarmError;
use tessera_model::wire::{QUEUE_ENCODE_CPU, QUEUE_ENCODE_GPU, QUEUE_STITCH};
use tessera_worker::cores::CoreShare;
use tessera_worker::{GpuSettings, Gpus, ProgressFn, WorkerConfig};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::args::GpuChoice;
use crate::config::TranscodeConfig;
use crate::progress::Progress;

/// Delivery limit of the embedded queue: a segment gets three attempts.
const DELIVERY_LIMIT: u32 = 3;

/// The farm's shared parts: the embedded queue with the farm's queues declared, the local
/// store in the work directory, and the sandbox the workers and the dispatcher share.
pub(crate) struct Farm {
    /// The queue itself, closed to stop the workers.
    pub(crate) queue: MemoryQueue,
    /// The same queue as workers and the engine take it.
    pub(crate) shared: Arc<dyn Queue>,
    pub(crate) store: Arc<LocalStore>,
    pub(crate) sandbox: Sandbox,
    /// Limits for each media child of a segment.
    pub(crate) limits: Limits,
}

impl Farm {
    /// Declares the queues, opens the store in `work` and starts the sandbox's warm children.
    pub(crate) async fn open(cfg: &TranscodeConfig, work: &Path) -> anyhow::Result<Farm> {
        let queue = MemoryQueue::new(DELIVERY_LIMIT);
        let shared: Arc<dyn Queue> = Arc::new(queue.clone());
        tessera_farm::queue::declare_farm_queues(&*shared).await?;
        let store = Arc::new(LocalStore::new(work.join("store"))?);
        let limits = Limits {
            timeout: Duration::from_secs(cfg.segment_timeout),
            memory_bytes: cfg.child_memory_bytes,
            ..Limits::default()
        };
        // One process, one job: the probe, split, audio, encodes and stitch share one warm
        // child per worker (started now, beside the rest of the set-up) instead of starting
        // one each.
        // Children read the input and write only in the work directory.
        let confinement = Confinement::default().reading(&cfg.input).writing(work);
        let sandbox = Sandbox::current()?
            .confined(confinement)
            .reusing_children(cfg.workers, limits);
        Ok(Farm {
            queue,
            shared,
            store,
            sandbox,
            limits,
        })
    }
}

/// A GPU worker beside the CPU ones when a card with NVENC is found (`--gpu` not off): the
/// job's segments then go to the GPU queue. `require` and `decode` fail without a card.
pub(crate) async fn detect_gpus(
    choice: GpuChoice,
    sandbox: &Sandbox,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<Arc<Gpus>>> {
    if choice == GpuChoice::Off {
        return Ok(None);
    }
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
        let encode = !settings.software_encode;
        let probe = tessera_worker::gpu::probe_in_child(Sandbox::current()?, encode);
        g.spawn_refresh(Duration::from_secs(5), shutdown.clone(), probe);
    }
    Ok(found)
}

/// What each of the farm's workers is set up from.
pub(crate) struct WorkerSettings<'a> {
    pub(crate) cfg: &'a TranscodeConfig,
    pub(crate) work: &'a Path,
    pub(crate) limits: Limits,
    /// The cores of this machine, shared among the workers.
    pub(crate) cpus: usize,
}

impl WorkerSettings<'_> {
    /// The settings of CPU worker `i`.
    fn cpu(&self, i: usize) -> WorkerConfig {
        let (cfg, cpus) = (self.cfg, self.cpus);
        WorkerConfig {
            id: format!("local-{i}"),
            slots: 1,
            // One thread per worker's share of the cores: short inputs are split into one
            // segment per worker, so every core has an encode. Giving every encode all the
            // cores was measured too: no gain on the 5 s clip (ratio 1.176 against 1.178),
            // 23% more x264 CPU per frame and a 1080p segment child over 250 MiB on the 60 s
            // file.
            threads_per_slot: (cpus / cfg.workers).max(1),
            // ... except when the job has fewer segments than workers (a short clip in one
            // package segment): then the idle workers' cores go to the encodes that run.
            lend_idle_cores: Some(CoreShare {
                cpus,
                slots: cfg.workers,
            }),
            staging_dir: self.work.join(format!("worker-{i}")),
            queue: QUEUE_ENCODE_CPU.to_string(),
            stitch_queue: Some(QUEUE_STITCH.to_string()),
            // One job at a time: the fleet is never busy with others, so inputs split.
            whole_queue: None,
            cut_queue: None,
            gpu_queue: QUEUE_ENCODE_GPU.to_string(),
            gpus: None,
            metrics: Default::default(),
            delivery_limit: DELIVERY_LIMIT,
            // In one process a delivery is lost only with a task that panicked: as few.
            lost_limit: DELIVERY_LIMIT,
            limits: self.limits,
            retry_backoff: Duration::from_millis(500),
            // The one-process farm only stops when its job is over or cancelled.
            grace: Duration::ZERO,
            min_free_bytes: 256 << 20,
            exit_when_idle: None,
            drain: Default::default(),
            status_every: None,
        }
    }

    /// The settings of the GPU worker: the first CPU worker's, with the cards.
    fn gpu(&self, gpus: &Arc<Gpus>) -> WorkerConfig {
        WorkerConfig {
            id: "local-gpu".into(),
            gpus: Some(gpus.clone()),
            staging_dir: self.work.join("worker-gpu"),
            ..self.cpu(0)
        }
    }
}

/// The farm's running workers and what they share.
pub(crate) struct LocalWorkers {
    queue: Arc<dyn Queue>,
    store: Arc<LocalStore>,
    sandbox: Sandbox,
    /// Each segment's frames, to the progress line.
    on_frames: ProgressFn,
    /// Cancels the workers (and the dead-letter forwarders).
    pub(crate) stop: CancellationToken,
    running: Vec<JoinHandle<Result<(), FarmError>>>,
}

impl LocalWorkers {
    /// No workers yet; they will share the farm's parts and report frames to `progress`.
    pub(crate) fn new(farm: &Farm, progress: &Progress) -> LocalWorkers {
        let p = progress.clone();
        LocalWorkers {
            queue: farm.shared.clone(),
            store: farm.store.clone(),
            sandbox: farm.sandbox.clone(),
            on_frames: Arc::new(move |_job, seg, n| p.segment_frames(seg, n)),
            stop: CancellationToken::new(),
            running: Vec::new(),
        }
    }

    /// Starts `cfg.workers` CPU workers, and the GPU worker when there are cards: it consumes
    /// before any segment is published.
    pub(crate) async fn start(&mut self, settings: &WorkerSettings<'_>, gpus: Option<&Arc<Gpus>>) {
        for i in 0..settings.cfg.workers {
            self.spawn(settings.cpu(i));
        }
        if let Some(gpus) = gpus {
            self.spawn(settings.gpu(gpus));
            while self.queue.consumers(QUEUE_ENCODE_GPU).await.unwrap_or(0) == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// Runs one worker in a task of its own.
    fn spawn(&mut self, config: WorkerConfig) {
        self.running.push(tokio::spawn(tessera_worker::run(
            config,
            self.queue.clone(),
            self.store.clone(),
            self.sandbox.clone(),
            Some(self.on_frames.clone()),
            self.stop.clone(),
        )));
    }

    /// Stops the workers: closes the queue so idle ones return, cancels the rest, waits.
    pub(crate) async fn stop(self, queue: &MemoryQueue) {
        queue.close(QUEUE_ENCODE_CPU);
        queue.close(QUEUE_ENCODE_GPU);
        queue.close(QUEUE_STITCH);
        self.stop.cancel();
        for w in self.running {
            let _ = w.await;
        }
    }
}
