//! tessera-worker: the segment execution loop.
//!
//! Why a library: the distributed worker binary (RabbitMQ + S3) and the one-process farm
//! (embedded queue + local store) run this same loop; only the queue and store differ.

mod disk;
mod segment;
pub mod service;
mod stitch;

pub use segment::{ProgressFn, SegmentRunner};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tessera_farm::queue::{Consumer, Delivery, Queue};
use tessera_farm::sandbox::{Limits, Sandbox};
use tessera_farm::store::Store;
use tessera_farm::FarmError;
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
    /// Local staging directory (NVMe on GPU nodes).
    pub staging_dir: PathBuf,
    /// The segment queue to consume.
    pub queue: String,
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
}

enum Work {
    Segment(Delivery),
    Stitch(Delivery),
}

/// The next delivery of an optional consumer; never returns when there is none.
async fn next_of(consumer: &mut Option<Box<dyn Consumer>>) -> Result<Option<Delivery>, FarmError> {
    match consumer {
        Some(c) => c.next().await,
        None => std::future::pending().await,
    }
}

/// Runs the worker until `shutdown` is cancelled or the queue closes. In-flight segments get
/// `config.grace` to finish; the rest are aborted, which returns their messages to the queue
/// (an unsettled delivery is requeued), and the staging directory is emptied.
pub async fn run(
    config: WorkerConfig,
    queue: Arc<dyn Queue>,
    store: Arc<dyn Store>,
    sandbox: Sandbox,
    progress: Option<ProgressFn>,
    shutdown: CancellationToken,
) -> Result<(), FarmError> {
    // A killed predecessor may have left files; nothing in staging survives a restart.
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
    let prefetch = u16::try_from(config.slots.max(1)).unwrap_or(u16::MAX);
    let mut consumer = queue.consume(&config.queue, prefetch).await?;
    let mut stitches = match &config.stitch_queue {
        Some(q) => Some(queue.consume(q, 1).await?),
        None => None,
    };
    let mut tasks = JoinSet::new();
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => break,
            d = consumer.next() => d?.map(Work::Segment),
            d = next_of(&mut stitches) => match d? {
                Some(d) => Some(Work::Stitch(d)),
                None => {
                    stitches = None;
                    continue;
                }
            },
        };
        let Some(work) = next else { break };
        let runner = runner.clone();
        tasks.spawn(async move {
            match work {
                Work::Segment(d) => runner.handle(d).await,
                Work::Stitch(d) => runner.handle_stitch(d).await,
            }
        });
        // Reap finished tasks so the set does not grow.
        while let Some(done) = tasks.try_join_next() {
            if let Err(e) = done {
                tracing::error!(error = %e, "task panicked");
            }
        }
    }
    drop(stitches);
    drop(consumer);
    let drained = tokio::time::timeout(config.grace, async {
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
    Ok(())
}
