//! The worker's loop: consume its queues, run each delivery as a task, drain on the way out.
//!
//! Why one loop for every queue: segment slots, the GPU queue and the stitch queue share one
//! shutdown, one drain and one idle clock, whatever queue and store the caller passes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_farm::queue::{Delivery, Queue};
use tessera_farm::sandbox::Sandbox;
use tessera_farm::store::Store;
use tessera_farm::FarmError;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::forward::{forward, sources, Event, Kind};
use crate::{DrainReason, ProgressFn, SegmentRunner, WorkerConfig};

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
    let (_lock, own_dir) = crate::staging::claim(&config.staging_dir, &config.id)?;
    let mut config = config;
    config.staging_dir = own_dir;
    let runner = Arc::new(SegmentRunner::new(
        config.clone(),
        queue.clone(),
        store,
        sandbox,
        progress,
    ));
    let slots = u16::try_from(config.slots.max(1)).unwrap_or(u16::MAX);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (sources, primary) = sources(&config, &queue, slots);
    let mut forwarders = Vec::new();
    for s in sources {
        let c = queue.consume(&s.name, s.prefetch()).await?;
        forwarders.push(forward(s, c, tx.clone(), runner.fitness.clone()));
    }
    if primary == Kind::Cpu && !runner.sandbox.reuses_children() {
        // Encode children start now, so the first segments find them ready.
        (runner.encoders).warm(None, usize::from(slots), config.limits);
    }
    drop(tx);
    let mut tasks = Tasks {
        config: &config,
        runner,
        primary,
        running: JoinSet::new(),
        last_busy: Instant::now(),
    };
    let outcome = tasks.dispatch(&mut rx, &shutdown).await;
    // Stop consuming; deliveries not started go back to their queues.
    for f in &forwarders {
        f.abort();
    }
    drop(rx);
    // A spot notice's deadline may leave less than the configured grace.
    tasks.drain(config.drain.grace(config.grace)).await;
    let _ = std::fs::remove_dir_all(&config.staging_dir);
    outcome
}

/// The tasks a worker runs, and since when none has run (for `exit_when_idle`).
struct Tasks<'a> {
    config: &'a WorkerConfig,
    runner: Arc<SegmentRunner>,
    /// The kind whose queue's end stops the worker.
    primary: Kind,
    running: JoinSet<()>,
    last_busy: Instant,
}

impl Tasks<'_> {
    /// Starts a task for each delivery until shutdown, a drain, the idle time, the end of the
    /// primary queue or a consumer's failure (the error returned).
    async fn dispatch(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<Event>,
        shutdown: &CancellationToken,
    ) -> Result<(), FarmError> {
        let config = self.config;
        let drained = config.drain.stopped();
        loop {
            // The idle clock runs only while nothing runs.
            let idle_at = config
                .exit_when_idle
                .filter(|_| self.running.is_empty())
                .map(|idle| tokio::time::Instant::from_std(self.last_busy + idle));
            let event = tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = drained.cancelled() => break,
                Some(done) = self.running.join_next(), if !self.running.is_empty() => {
                    if let Err(e) = done {
                        tracing::error!(error = %e, "task panicked");
                    }
                    self.last_busy = Instant::now();
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
                Some(Event::Ended(kind)) if kind == self.primary => break,
                Some(Event::Ended(_)) => continue,
                Some(Event::Failed(e)) => return Err(e),
            };
            self.last_busy = Instant::now();
            self.start(kind, delivery);
        }
        Ok(())
    }

    /// Runs one delivery as a task of its kind.
    fn start(&mut self, kind: Kind, delivery: Delivery) {
        let runner = self.runner.clone();
        let gpus = self.config.gpus.clone();
        self.running.spawn(async move {
            match (kind, gpus) {
                (Kind::Gpu, Some(gpus)) => runner.handle_gpu(delivery, gpus).await,
                (Kind::Stitch, _) => runner.handle_stitch(delivery).await,
                _ => runner.handle(delivery).await,
            }
        });
    }

    /// Lets the running tasks finish within `grace`, then aborts the rest (an aborted task's
    /// unsettled delivery is requeued).
    async fn drain(&mut self, grace: Duration) {
        let tasks = &mut self.running;
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
    }
}

/// Sleeps until `at`, or forever when there is no `at` (the select arm is then disabled).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
