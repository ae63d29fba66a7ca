//! The `tessera-worker` service: settings, connections to RabbitMQ and S3, the consume loop
//! with reconnects, and a graceful drain on SIGTERM.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tessera_farm::backoff::Backoff;
use tessera_farm::config::{read_config_file, ServiceArgs, ServiceConfig, ServiceFile, Setting};
use tessera_farm::queue::{Queue, RabbitConfig, RabbitQueue};
use tessera_farm::sandbox::{Confinement, Limits, Sandbox};
use tessera_farm::store::S3Client;
use tessera_farm::FarmError;
use tessera_model::wire::{
    QUEUE_CUT_CPU, QUEUE_ENCODE_CPU, QUEUE_ENCODE_GPU, QUEUE_STITCH, QUEUE_WHOLE_CPU,
};
use tokio_util::sync::CancellationToken;

use crate::drain::DrainReason;
use crate::gpu::{GpuMode, GpuSettings};
use crate::spot::{SpotMode, SpotSettings};
use crate::WorkerConfig;

mod http;

/// `tessera-worker` flags; each has a `TESSERA_*` variable and a key in the config file.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "tessera-worker", version, about = "tessera segment worker")]
pub struct WorkerArgs {
    /// TOML config file with `[service]` and `[worker]` tables.
    #[arg(long, env = "TESSERA_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log filter.
    #[arg(long, env = "TESSERA_LOG", default_value = "info")]
    pub log: String,
    /// Log lines as `text`, or `json`: one object a line with the job, plan, segment and
    /// worker ids of the work it is about (docs/operations.md, "JSON logs").
    #[arg(long, env = "TESSERA_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: tessera_farm::signals::LogFormat,
    /// Broker and store.
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Worker name in events [default: host name and pid].
    #[arg(long, env = "TESSERA_WORKER_ID")]
    pub id: Option<String>,
    /// Local staging directory (fast local disk) [default: /var/tmp/tessera-worker].
    #[arg(long, env = "TESSERA_STAGING_DIR")]
    pub staging_dir: Option<PathBuf>,
    /// Segments encoded at once [default: 1].
    #[arg(long, env = "TESSERA_SLOTS")]
    pub slots: Option<usize>,
    /// Threads per segment [default: CPU count / slots].
    #[arg(long, env = "TESSERA_THREADS_PER_SLOT")]
    pub threads_per_slot: Option<usize>,
    /// Seconds in-flight segments get after SIGTERM [default: 100].
    #[arg(long, env = "TESSERA_GRACE_SECONDS")]
    pub grace_seconds: Option<u64>,
    /// Free MiB staging must keep; below it segments are requeued [default: 2048].
    #[arg(long, env = "TESSERA_MIN_FREE_MIB")]
    pub min_free_mib: Option<u64>,
    /// Seconds one segment encode may take [default: 1200].
    #[arg(long, env = "TESSERA_SEGMENT_TIMEOUT")]
    pub segment_timeout: Option<u64>,
    /// Address-space limit of each media child in MiB [default: 8192].
    #[arg(long, env = "TESSERA_CHILD_MEMORY_MIB")]
    pub child_memory_mib: Option<u64>,
    /// Use NVIDIA GPUs: auto (when NVML finds cards with NVENC), off, or require (exit with
    /// an error when no card can encode: GPU pods) [default: auto].
    #[arg(long, env = "TESSERA_GPU", value_parser = ["auto", "off", "require"])]
    pub gpu: Option<String>,
    /// A GPU worker also takes CPU-queue segments (software encode) with its CPU slots.
    #[arg(long, env = "TESSERA_DRAIN_CPU_QUEUE")]
    pub drain_cpu_queue: Option<bool>,
    /// Address of the worker's /metrics, /healthz and /readyz (off when unset), e.g.
    /// 0.0.0.0:9464.
    #[arg(long, env = "TESSERA_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Exit (code 0) after this many seconds with no task running or arriving [default: never].
    #[arg(long, env = "TESSERA_EXIT_WHEN_IDLE")]
    pub exit_when_idle: Option<u64>,
    /// Spot notices from the instance metadata service: auto, off, aws, gcp, azure
    /// [default: auto].
    #[arg(long, env = "TESSERA_SPOT_NOTICE")]
    pub spot_notice: Option<String>,
    /// Base URL of the instance metadata service [default: the provider's own].
    #[arg(long, env = "TESSERA_SPOT_METADATA_URL")]
    pub spot_metadata_url: Option<String>,
    /// Seconds between spot-notice polls [default: 5].
    #[arg(long, env = "TESSERA_SPOT_POLL_SECONDS")]
    pub spot_poll_seconds: Option<u64>,
    /// Instead of serving: a one-off command.
    #[command(subcommand)]
    pub command: Option<WorkerCommand>,
}

/// `tessera-worker`'s one-off commands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum WorkerCommand {
    /// GET /healthz of this worker's --metrics-listen address (on loopback when it is a
    /// wildcard); exit 0 on 200. For container HEALTHCHECKs.
    Health(tessera_farm::health::HealthArgs),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkerFile {
    id: Option<String>,
    staging_dir: Option<PathBuf>,
    slots: Option<usize>,
    threads_per_slot: Option<usize>,
    grace_seconds: Option<u64>,
    min_free_mib: Option<u64>,
    segment_timeout: Option<u64>,
    child_memory_mib: Option<u64>,
    metrics_listen: Option<std::net::SocketAddr>,
    exit_when_idle: Option<u64>,
    spot_notice: Option<String>,
    spot_metadata_url: Option<String>,
    spot_poll_seconds: Option<u64>,
    #[serde(default)]
    gpu: GpuSettings,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    service: ServiceFile,
    #[serde(default)]
    worker: WorkerFile,
}

/// Everything the worker service needs, resolved.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    /// Broker, store, work bucket.
    pub service: ServiceConfig,
    /// The segment loop's settings.
    pub worker: WorkerConfig,
    /// GPU use (cards are found when the service starts).
    pub gpu: GpuSettings,
    /// Where /metrics is served, if anywhere.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Where spot notices come from.
    pub spot: SpotSettings,
}

impl ServiceSettings {
    /// Defaults, then the file, then env and flags.
    pub fn resolve(args: &WorkerArgs) -> Result<Self, String> {
        let file: FileConfig = read_config_file(args.config.as_deref())?;
        let service = ServiceConfig::resolve(&args.service, &file.service)?;
        let w = &file.worker;
        let worker = worker_config(args, w, &service.rabbit);
        let spot_notice = Setting::layered(
            "spot_notice",
            args.spot_notice.clone(),
            w.spot_notice.clone(),
        );
        let spot = SpotSettings {
            mode: match spot_notice.optional() {
                Some(m) => m.parse::<SpotMode>()?,
                None => SpotMode::default(),
            },
            metadata_url: Setting::layered(
                "spot_metadata_url",
                args.spot_metadata_url.clone(),
                w.spot_metadata_url.clone(),
            )
            .optional(),
            every: Setting::layered(
                "spot_poll_seconds",
                args.spot_poll_seconds,
                w.spot_poll_seconds,
            )
            .optional()
            .map(|s| Duration::from_secs(s.max(1))),
        };
        // The `[worker.gpu]` table, with `--gpu` and `--drain-cpu-queue` over it.
        let mut gpu = w.gpu.clone();
        match args.gpu.as_deref() {
            Some("off") => gpu.enabled = GpuMode::Off,
            Some("require") => gpu.enabled = GpuMode::Require,
            Some(_) => gpu.enabled = GpuMode::Auto,
            None => {}
        }
        if let Some(d) = args.drain_cpu_queue {
            gpu.drain_cpu_queue = d;
        }
        Ok(ServiceSettings {
            service,
            worker,
            gpu,
            metrics_listen: metrics_listen(args, w),
            spot,
        })
    }

    /// Only the address of /metrics and /healthz, layered as [`ServiceSettings::resolve`]
    /// does: what `tessera-worker health` asks, with no broker or store settings needed.
    pub fn resolve_metrics_listen(args: &WorkerArgs) -> Result<std::net::SocketAddr, String> {
        let file: FileConfig = read_config_file(args.config.as_deref())?;
        metrics_listen(args, &file.worker).ok_or_else(|| {
            "tessera-worker health: this worker serves no /healthz: set --metrics-listen, \
             TESSERA_METRICS_LISTEN or metrics_listen in [worker]"
                .to_string()
        })
    }
}

fn metrics_listen(args: &WorkerArgs, w: &WorkerFile) -> Option<std::net::SocketAddr> {
    Setting::layered("metrics_listen", args.metrics_listen, w.metrics_listen).optional()
}

/// The segment loop's settings from the flags over the `[worker]` table over the defaults.
fn worker_config(args: &WorkerArgs, w: &WorkerFile, rabbit: &RabbitConfig) -> WorkerConfig {
    let slots = Setting::layered("slots", args.slots, w.slots)
        .or(1)
        .get()
        .max(1);
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let segment_timeout =
        Setting::layered("segment_timeout", args.segment_timeout, w.segment_timeout);
    let child_memory_mib = Setting::layered(
        "child_memory_mib",
        args.child_memory_mib,
        w.child_memory_mib,
    );
    let grace_seconds = Setting::layered("grace_seconds", args.grace_seconds, w.grace_seconds);
    WorkerConfig {
        id: Setting::layered("id", args.id.clone(), w.id.clone())
            .or_else(default_id)
            .get(),
        slots,
        threads_per_slot: Setting::layered(
            "threads_per_slot",
            args.threads_per_slot,
            w.threads_per_slot,
        )
        .or((cpus / slots).max(1))
        .get(),
        lend_idle_cores: None,
        staging_dir: Setting::layered(
            "staging_dir",
            args.staging_dir.clone(),
            w.staging_dir.clone(),
        )
        .or_else(|| PathBuf::from("/var/tmp/tessera-worker"))
        .get(),
        queue: QUEUE_ENCODE_CPU.to_string(),
        gpu_queue: QUEUE_ENCODE_GPU.to_string(),
        gpus: None,
        metrics: Default::default(),
        stitch_queue: Some(QUEUE_STITCH.to_string()),
        whole_queue: Some(QUEUE_WHOLE_CPU.to_string()),
        cut_queue: Some(QUEUE_CUT_CPU.to_string()),
        delivery_limit: rabbit.delivery_limit,
        lost_limit: rabbit.lost_limit,
        limits: Limits {
            timeout: Duration::from_secs(segment_timeout.or(1200).get()),
            memory_bytes: child_memory_mib.or(8192).get() << 20,
            ..Limits::default()
        },
        retry_backoff: Duration::from_secs(1),
        grace: Duration::from_secs(grace_seconds.or(100).get()),
        min_free_bytes: Setting::layered("min_free_mib", args.min_free_mib, w.min_free_mib)
            .or(2048)
            .get()
            << 20,
        exit_when_idle: Setting::layered("exit_when_idle", args.exit_when_idle, w.exit_when_idle)
            .optional()
            .map(Duration::from_secs),
        drain: Default::default(),
        status_every: Some(Duration::from_secs(
            tessera_model::wire::STATUS_EVERY_SECONDS,
        )),
    }
}

fn default_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "worker".into());
    format!("{host}-{}", std::process::id())
}

/// Runs the worker service until `shutdown`; reconnects to the broker after outages.
pub async fn serve(
    settings: ServiceSettings,
    shutdown: CancellationToken,
) -> Result<(), FarmError> {
    let mut settings = settings;
    let sandbox = open_media(&mut settings, &shutdown).await?;
    let metrics = settings.worker.metrics.clone();
    let drain = settings.worker.drain.clone();
    // The endpoint outlives the drain: /readyz says 503 while in-flight work finishes, and
    // /healthz stays 200 so the drain is not cut short by a liveness probe.
    let http_stop = CancellationToken::new();
    let _http_stop = http_stop.clone().drop_guard();
    if let Some(addr) = settings.metrics_listen {
        http::serve(
            addr,
            metrics.clone(),
            settings.worker.gpus.clone(),
            drain.clone(),
            http_stop.clone(),
        )
        .await?;
    }
    {
        let (drain, shutdown) = (drain.clone(), shutdown.clone());
        tokio::spawn(async move {
            shutdown.cancelled().await;
            drain.begin(DrainReason::Shutdown, None);
        });
    }
    crate::spot::spawn(settings.spot.clone(), drain.clone(), http_stop.clone());
    let drained = drain.stopped();
    let s3 = S3Client::new(settings.service.s3.clone()).await?;
    let store = Arc::new(s3.store(&settings.service.work_bucket));
    // At most 5 s: a broker back from a failover should see its workers within seconds (a
    // connect attempt is cheap, and the waits are jittered).
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(5)).jittered();
    let mut quick_failures = 0u32;
    tracing::info!(worker = %settings.worker.id, slots = settings.worker.slots, "worker starting");
    while !shutdown.is_cancelled() && !drain.is_draining() {
        let queue = match connect(&settings).await {
            Ok(q) => q,
            // The broker answers but refuses a queue as declared: waiting will not change it.
            Err(e @ FarmError::QueueRefused { .. }) => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff.current(), "broker unavailable");
                let delay = backoff.next_delay();
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = drained.cancelled() => break,
                    _ = tokio::time::sleep(delay) => {}
                }
                continue;
            }
        };
        backoff.reset();
        let started = std::time::Instant::now();
        let result = crate::run(
            settings.worker.clone(),
            queue.clone(),
            store.clone(),
            sandbox.clone(),
            None,
            shutdown.clone(),
        )
        .await;
        if drain.is_draining() {
            break;
        }
        if let Err(e) = result {
            // A run that worked a while lost its broker: reconnect at once. One that fails
            // right after connecting (consume refused, queue deleted) must not reconnect in a
            // hot loop: it waits, longer each time in a row.
            if started.elapsed() > Duration::from_secs(10) {
                quick_failures = 0;
                tracing::warn!(error = %e, "consumer lost; reconnecting");
                continue;
            }
            let wait = Duration::from_secs(1 << quick_failures.min(5));
            quick_failures += 1;
            tracing::warn!(error = %e, retry_in = ?wait, "consumer failed at once; reconnecting later");
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = drained.cancelled() => break,
                _ = tokio::time::sleep(tessera_farm::queue::jittered(wait)) => {}
            }
        }
    }
    tracing::info!(
        reason = drain.reason().map(|r| r.as_str()),
        "worker stopped"
    );
    Ok(())
}

/// The media children's sandbox, and the GPUs this worker encodes on (set in `settings`,
/// refreshed every 5 s until `shutdown`). Why before anything else: a worker whose media
/// child cannot answer (or that requires a GPU it cannot use) does not start.
async fn open_media(
    settings: &mut ServiceSettings,
    shutdown: &CancellationToken,
) -> Result<Sandbox, FarmError> {
    // One spare child for the worker's own operations (capabilities, the GPU probe); a job's
    // cuts, encodes, audio and stitch run in its warm slots (`SegmentRunner::job_op`). Its
    // children write only in the staging directory, where every input and output lies, and
    // in this worker's CUDA kernel cache beside it (kept across its jobs).
    let root = &settings.worker.staging_dir;
    let cache = root.join(crate::staging::cuda_cache_name(&settings.worker.id));
    let confinement = Confinement::default().writing(root).cuda_cache(cache);
    let sandbox = Sandbox::current()?
        .confined(confinement)
        .with_spares(1, settings.worker.limits);
    // What the media child's FFmpeg offers; a worker whose child cannot answer does not start.
    let caps = sandbox.capabilities().await?;
    let probe = crate::gpu::probe_in_child(sandbox.clone(), !settings.gpu.software_encode);
    settings.worker.gpus = crate::gpu::for_worker(&settings.gpu, &caps.hw, probe.clone()).await?;
    if let Some(gpus) = &settings.worker.gpus {
        gpus.spawn_refresh(Duration::from_secs(5), shutdown.clone(), probe);
    }
    Ok(sandbox)
}

async fn connect(settings: &ServiceSettings) -> Result<Arc<dyn Queue>, FarmError> {
    let queue = RabbitQueue::connect(settings.service.rabbit.clone()).await?;
    tessera_farm::queue::declare_farm_queues(&queue).await?;
    Ok(Arc::new(queue))
}
