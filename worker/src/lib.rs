//! tessera-worker: the segment execution loop.
//!
//! Why a library: the distributed worker binary (RabbitMQ + S3) and the one-process farm
//! (embedded queue + local store) run this same loop; only the queue and store differ.
//!
//! Layout: `run` (consume.rs) claims the worker's staging directory (staging.rs), forwards
//! each queue into one channel (forward.rs) and runs each delivery as a task: a segment
//! (segment.rs settles it, encode.rs does the work; gpu_task.rs on a card) or a stitch
//! (stitch.rs); then it drains, giving back what the drain cut off (give_back.rs).
//! fitness.rs, drain.rs and spot.rs decide when it takes work.

mod attempts;
mod consume;
pub mod cores;
mod cuda_ordinal;
pub mod drain;
mod encode;
mod fitness;
mod forward;
mod give_back;
pub mod gpu;
mod gpu_task;
pub mod metrics;
mod qc;
mod retry;
mod segment;
#[cfg(feature = "service")]
pub mod service;
mod source_cache;
pub mod spot;
mod staging;
mod status;
mod stills;
mod stitch;
mod whole;

pub use consume::run;
pub use drain::{Drain, DrainReason};
pub use fitness::Fitness;
pub use gpu::{GpuSettings, Gpus};
pub use segment::{ProgressFn, SegmentRunner};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tessera_farm::sandbox::Limits;

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
    /// The whole-input queue to consume too (one task at a time, beside the segment slots;
    /// CPU workers only): short inputs transcoded whole while the fleet is busy.
    pub whole_queue: Option<String>,
    /// The cut queue to consume too (CPU workers only): segment tasks whose chunk this
    /// worker cuts from the job's source (source_cache.rs). They share the segment slots
    /// with the CPU queue.
    pub cut_queue: Option<String>,
    /// Attempts of a task that may fail on their own: the last one reports the failure
    /// instead of retrying (attempts.rs).
    pub delivery_limit: u32,
    /// Deliveries of a task that may end without a verdict (its worker gone) before it is
    /// lost: the broker dead-letters a message at this count, and a worker fails a copy
    /// that reached it across copies (attempts.rs).
    pub lost_limit: u32,
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
    /// How often to report the worker's state to the status queue (the dispatcher's
    /// dashboard); `None`: no reports (the one-process farm, which has no dashboard).
    pub status_every: Option<Duration>,
}
