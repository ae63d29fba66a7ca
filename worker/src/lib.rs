//! tessera-worker: the segment execution loop.
//!
//! Why a library: the distributed worker binary (RabbitMQ + S3) and the one-process farm
//! (embedded queue + local store) run this same loop; only the queue and store differ.

pub mod cores;
mod cuda_ordinal;
pub mod drain;
mod fitness;
pub mod gpu;
mod gpu_task;
pub mod metrics;
mod qc;
mod retry;
mod segment;
#[cfg(feature = "service")]
pub mod service;
pub mod spot;
mod stills;
mod stitch;

pub use drain::{Drain, DrainReason};
pub use fitness::Fitness;
pub use gpu::{GpuSettings, Gpus};
pub use segment::{ProgressFn, SegmentRunner};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_farm::queue::{Consumer, Delivery, Queue};
use tessera_farm::sandbox::{Limits, Sandbox};
use tessera_farm::store::Store;
use tessera_farm::FarmError;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Settings of one worker.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Name in events and logs.
    pub id: String,
    /// Segments encoded at once (the consumer prefetch).
    pub slots: usize,
    /// Threads for each segment's decoder and encoder.
    pub threads_per_slot: usize,
    /// When set, a job of fewer segments than the process's slots gets the idle cores too
    /// (the one-process farm); `None`: always `threads_per_slot`.
    pub lend_idle_cores: Option<cores::CoreShare>,
    /// Local staging directory (NVMe on GPU nodes).
    pub staging_dir: PathBuf,
    /// The CPU segment queue to consume.
    pub queue: String,
    /// The GPU segment queue (consumed when `gpus` is set).
    pub gpu_queue: String,
    /// The cards, when this worker encodes on NVENC.
    pub gpus: Option<Arc<Gpus>>,
    /// Counters for `/metrics`.
    pub metrics: Arc<metrics::WorkerMetrics>,
    /// The stitch queue to consume too (one stitch at a time, beside the segment slots).
    pub stitch_queue: Option<String>,
    /// The queue's delivery limit: the last attempt reports failure instead of requeueing.
    pub delivery_limit: u32,
    /// Limits for each media child.
    pub limits: Limits,
    /// First retry backoff; doubled per attempt, capped at 30 s.
    pub retry_backoff: Duration,
    /// On shutdown, how long in-flight segments may run on before they are aborted and
    /// requeued (spot notices give 30 s to 2 min).
    pub grace: Duration,
    /// Free bytes the staging disk must keep; below it a segment is requeued, not started.
    pub min_free_bytes: u64,
    /// Stop (and exit, in the service) after this long with no task running or arriving:
    /// KEDA's ScaledJob runs one worker per Job and needs it to end when the queue is empty.
    pub exit_when_idle: Option<Duration>,
    /// Set when the worker must stop taking work (spot notice, idle); shared with `/readyz`.
    pub drain: Arc<Drain>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cpu,
    Gpu,
    Stitch,
}

enum Event {
    Work(Kind, Delivery),
    Ended(Kind),
    Failed(FarmError),
}

/// Where a forwarder consumes: the queue, and its prefetch (for the GPU queue, what the
/// cards can start now, checked every second).
struct Source {
    kind: Kind,
    queue: Arc<dyn Queue>,
    name: String,
    slots: u16,
    gpus: Option<Arc<Gpus>>,
}

impl Source {
    fn prefetch(&self) -> u16 {
        self.gpus.as_ref().map_or(self.slots, |g| g.prefetch())
    }
}

/// Moves one queue's deliveries into the worker's channel. While the worker is unfit (its
/// staging disk full), or for the GPU queue while no card can start anything and nothing
/// runs (every card unhealthy or its budget taken), it cancels its consumer, so the broker
/// hands the queue's tasks to other workers, and consumes again once it can take work.
fn forward(
    source: Source,
    mut consumer: Box<dyn Consumer>,
    tx: mpsc::UnboundedSender<Event>,
    fitness: Arc<Fitness>,
) -> tokio::task::JoinHandle<()> {
    let kind = source.kind;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut prefetch = source.prefetch();
        loop {
            if !fitness.is_fit() || source.prefetch() == 0 {
                drop(consumer);
                loop {
                    if !fitness.is_fit() {
                        fitness.wait_fit().await;
                    } else if source.prefetch() == 0 {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    } else {
                        break;
                    }
                }
                prefetch = source.prefetch();
                consumer = match source.queue.consume(&source.name, prefetch).await {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = tx.send(Event::Failed(e));
                        return;
                    }
                };
            }
            let next = tokio::select! {
                d = consumer.next() => d,
                _ = tick.tick() => {
                    let want = source.prefetch();
                    if want == 0 {
                        tracing::warn!("no GPU can take work: GPU queue left to other workers");
                        continue;
                    }
                    if source.gpus.is_some() && want != prefetch {
                        if let Err(e) = consumer.set_prefetch(want).await {
                            tracing::warn!(error = %e, "prefetch not changed");
                            continue;
                        }
                        tracing::debug!(prefetch = want, "GPU prefetch follows the budget");
                        prefetch = want;
                    }
                    continue;
                }
            };
            let event = match next {
                Ok(Some(d)) => Event::Work(kind, d),
                Ok(None) => Event::Ended(kind),
                Err(e) => Event::Failed(e),
            };
            let last = !matches!(event, Event::Work(..));
            if tx.send(event).is_err() || last {
                return;
            }
        }
    })
}

/// Sleeps until `at`, or forever when there is no `at` (the select arm is then disabled).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A worker id as one safe path component (`[A-Za-z0-9._-]`, no leading dot).
fn dir_name(id: &str) -> String {
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = safe.trim_start_matches('.');
    if safe.is_empty() {
        "worker".into()
    } else {
        safe.into()
    }
}

/// Holds `<root>/<id>.lock` for the worker's life; refused while another worker of the
/// same id uses the root.
fn lock_staging(root: &std::path::Path, id: &str) -> Result<std::fs::File, FarmError> {
    let path = root.join(format!("{id}.lock"));
    match tessera_farm::disk::try_lock_file(&path) {
        Ok(Some(file)) => Ok(file),
        Ok(None) => Err(FarmError::Io {
            path: path.display().to_string(),
            reason: format!("another worker with id '{id}' uses this staging directory"),
        }),
        Err(e) => Err(FarmError::io(&path, e)),
    }
}

/// Runs the worker until `shutdown` is cancelled or the queue closes. In-flight segments get
/// `config.grace` to finish; the rest are aborted, which returns their messages to the queue
/// (an unsettled delivery is requeued), and the staging directory is emptied. With GPUs it
/// consumes the GPU queue (and the CPU queue too when told to drain it), else the CPU queue.
pub async fn run(
    config: WorkerConfig,
    queue: Arc<dyn Queue>,
    store: Arc<dyn Store>,
    sandbox: Sandbox,
    progress: Option<ProgressFn>,
    shutdown: CancellationToken,
) -> Result<(), FarmError> {
    // The worker's own directory under the staging root: a killed predecessor of the same
    // id may have left files there, and nothing in it survives a restart. Other workers'
    // directories on the same disk are never touched, and a second worker of the same id is
    // refused (its lock file is held).
    let root = config.staging_dir.clone();
    std::fs::create_dir_all(&root).map_err(|e| FarmError::io(&root, e))?;
    let own = dir_name(&config.id);
    let _lock = lock_staging(&root, &own)?;
    let mut config = config;
    config.staging_dir = root.join(&own);
    let _ = std::fs::remove_dir_all(&config.staging_dir);
    std::fs::create_dir_all(&config.staging_dir)
        .map_err(|e| FarmError::io(&config.staging_dir, e))?;
    let runner = Arc::new(SegmentRunner::new(
        config.clone(),
        queue.clone(),
        store,
        sandbox,
        progress,
    ));
    let slots = u16::try_from(config.slots.max(1)).unwrap_or(u16::MAX);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut forwarders = Vec::new();
    let source = |kind, name: &str, slots, gpus| Source {
        kind,
        queue: queue.clone(),
        name: name.to_string(),
        slots,
        gpus,
    };
    let mut sources = Vec::new();
    let primary = match &config.gpus {
        Some(gpus) => {
            sources.push(source(
                Kind::Gpu,
                &config.gpu_queue,
                slots,
                Some(gpus.clone()),
            ));
            if gpus.drains_cpu_queue() {
                sources.push(source(Kind::Cpu, &config.queue, slots, None));
            }
            Kind::Gpu
        }
        None => {
            sources.push(source(Kind::Cpu, &config.queue, slots, None));
            Kind::Cpu
        }
    };
    if let Some(q) = &config.stitch_queue {
        sources.push(source(Kind::Stitch, q, 1, None));
    }
    for s in sources {
        let c = queue.consume(&s.name, s.prefetch()).await?;
        forwarders.push(forward(s, c, tx.clone(), runner.fitness.clone()));
    }
    if primary == Kind::Cpu && !runner.sandbox.reuses_children() {
        // Encode children start now, so the first segments find them ready.
        (runner.encoders).warm(None, usize::from(slots), config.limits);
    }
    drop(tx);
    let mut outcome = Ok(());
    let mut tasks = JoinSet::new();
    let drained = config.drain.stopped();
    let mut last_busy = Instant::now();
    loop {
        // The idle clock runs only while nothing runs.
        let idle_at = config
            .exit_when_idle
            .filter(|_| tasks.is_empty())
            .map(|idle| tokio::time::Instant::from_std(last_busy + idle));
        let event = tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = drained.cancelled() => break,
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                if let Err(e) = done {
                    tracing::error!(error = %e, "task panicked");
                }
                last_busy = Instant::now();
                continue;
            }
            _ = sleep_until(idle_at), if idle_at.is_some() => {
                tracing::info!(
                    idle_s = config.exit_when_idle.map(|d| d.as_secs()),
                    "no work for the idle time: stopping"
                );
                config.drain.begin(DrainReason::Idle, None);
                break;
            }
            e = rx.recv() => e,
        };
        let (kind, delivery) = match event {
            None => break,
            Some(Event::Work(kind, d)) => (kind, d),
            Some(Event::Ended(kind)) if kind == primary => break,
            Some(Event::Ended(_)) => continue,
            Some(Event::Failed(e)) => {
                outcome = Err(e);
                break;
            }
        };
        last_busy = Instant::now();
        let runner = runner.clone();
        let gpus = config.gpus.clone();
        tasks.spawn(async move {
            match (kind, gpus) {
                (Kind::Gpu, Some(gpus)) => runner.handle_gpu(delivery, gpus).await,
                (Kind::Stitch, _) => runner.handle_stitch(delivery).await,
                _ => runner.handle(delivery).await,
            }
        });
    }
    // Stop consuming; deliveries not started go back to their queues.
    for f in &forwarders {
        f.abort();
    }
    drop(rx);
    // A spot notice's deadline may leave less than the configured grace.
    let grace = config.drain.grace(config.grace);
    if !tasks.is_empty() {
        tracing::info!(running = tasks.len(), grace_s = grace.as_secs(), "draining");
    }
    let drained = tokio::time::timeout(grace, async {
        while let Some(done) = tasks.join_next().await {
            if let Err(e) = done {
                tracing::error!(error = %e, "segment task panicked");
            }
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            left = tasks.len(),
            "grace period over: aborting and requeueing in-flight segments"
        );
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
    let _ = std::fs::remove_dir_all(&config.staging_dir);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_owns_one_directory_of_the_staging_root() {
        assert_eq!(dir_name("w1"), "w1");
        assert_eq!(dir_name("../../etc"), "_.._etc");
        assert_eq!(dir_name("host:1234/x"), "host_1234_x");
        assert_eq!(dir_name(".."), "worker");
        let root = tempfile::tempdir().unwrap();
        let held = lock_staging(root.path(), "w1").unwrap();
        let err = lock_staging(root.path(), "w1").unwrap_err().to_string();
        assert!(err.contains("another worker with id 'w1'"), "{err}");
        assert!(lock_staging(root.path(), "w2").is_ok());
        drop(held);
        assert!(lock_staging(root.path(), "w1").is_ok());
    }
}
