//! Executing one segment task: fetch the chunk, encode in a child, store, report, then ack.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_farm::queue::{Delivery, Queue};
use tessera_farm::sandbox::{Sandbox, SlotPool, WarmPolicy};
use tessera_farm::store::Store;
use tessera_farm::FarmError;
use tessera_model::encode::TargetResult;
use tessera_model::error_code::{ErrorClass, ErrorCode};
use tessera_model::wire::{
    decode_message, encode_message, newer_wire_version, SegmentOutcome, SegmentTask, TaskEvent,
    TaskRef, QUEUE_EVENTS, WIRE_VERSION,
};

use crate::attempts::Attempts;
use crate::WorkerConfig;

/// The segment task of a delivery; an unreadable one is dead-lettered (`None`).
pub(crate) async fn decode_task(delivery: &Delivery) -> Option<SegmentTask> {
    match decode_message(&delivery.body).map_err(FarmError::from) {
        Ok(t) => Some(t),
        Err(e) => {
            refuse_unreadable(delivery, "segment", &e).await;
            None
        }
    }
}

/// How long a task from a newer release is held before it goes back to the queue, so that
/// old workers do not pass it around in a tight loop while newer ones start.
const NEWER_TASK_PAUSE: Duration = Duration::from_secs(2);

/// Gives back a delivery this worker cannot read: a task from a newer release (wire version
/// above ours, during a rolling upgrade) is requeued for a newer worker, within the queue's
/// delivery limit; anything else is dead-lettered, which fails its job with the reason.
pub(crate) async fn refuse_unreadable(delivery: &Delivery, kind: &str, error: &FarmError) {
    if let Some(version) = newer_wire_version(&delivery.body) {
        tracing::warn!(
            kind,
            version,
            ours = WIRE_VERSION,
            "task from a newer release requeued for a newer worker"
        );
        tokio::time::sleep(NEWER_TASK_PAUSE).await;
        let _ = delivery.acker.reject(true).await;
    } else {
        tracing::error!(kind, error = %error, "unreadable task dead-lettered");
        let _ = delivery.acker.reject(false).await;
    }
}

/// Which task a worker runs: its job, the plan the task belongs to (carried into every event
/// so the dispatcher can tell a task of an earlier plan), and the segment or output.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket<'a> {
    pub(crate) job: &'a str,
    pub(crate) plan: u64,
    pub(crate) task: TaskRef,
}

/// Live progress: (job, segment, frames encoded so far in that segment).
pub type ProgressFn = Arc<dyn Fn(&str, u32, u64) + Send + Sync>;

/// Runs segment tasks for one worker.
pub struct SegmentRunner {
    pub(crate) config: WorkerConfig,
    pub(crate) queue: Arc<dyn Queue>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) sandbox: Sandbox,
    /// Warm children for segment encodes by GPU card (`None`: software): exec, libraries and
    /// device set-up are paid once per child, not per segment.
    pub(crate) encoders: SlotPool<Option<u32>>,
    /// Whether this worker may take work (a full staging disk pauses it).
    pub(crate) fitness: Arc<crate::Fitness>,
    /// Live progress of segment encodes (encode.rs).
    pub(crate) progress: Option<ProgressFn>,
    /// The sources of cut jobs, fetched once each (source_cache.rs).
    pub(crate) sources: crate::source_cache::SourceCache,
}

/// What a finished task reports.
pub(crate) struct Done {
    pub(crate) frames: u64,
    pub(crate) bytes: u64,
    pub(crate) media_seconds: f64,
    pub(crate) peak_rss_bytes: u64,
    /// Decoder errors in the source range (segments; 0 for stitches).
    pub(crate) decode_errors: u64,
    /// Seconds the QC gate took (stitches; 0 for segments).
    pub(crate) check_seconds: f64,
    /// The ETag of each output stored (stitches, whole-input tasks; empty for segments).
    pub(crate) etags: Vec<Option<String>>,
    /// The key each output was stored under, in the order of `etags` (each attempt its own).
    pub(crate) keys: Vec<Option<String>>,
    /// The card that encoded it (`None`: software, and stitches).
    pub(crate) card: Option<u32>,
    /// What decoded and encoded a segment (`None`: stitches and whole inputs), for its log
    /// line: the smoke test reads from it that NVDEC and NVENC did the work.
    pub(crate) coding: Option<Coding>,
    /// Each rendition's target-quality search (segments with targets; empty otherwise).
    pub(crate) targets: Vec<Option<TargetResult>>,
}

/// Which decoder and encoders a segment ran on, as its media child reported them.
#[derive(Default)]
pub(crate) struct Coding {
    /// Each rendition's encoder, joined with `,` (`h264_nvenc,h264_nvenc`).
    pub(crate) encoders: String,
    /// The decoder's hwaccel (`h264_nvdec`), or `software`.
    pub(crate) decoder: String,
    /// Frames the decoder gave on the card.
    pub(crate) nvdec_frames: u64,
    /// Frames decoded in system memory and uploaded (a GPU segment planned on NVDEC that has
    /// any fell back to a software decode).
    pub(crate) uploaded_frames: u64,
}

impl Coding {
    /// The coding of `result`.
    pub(crate) fn of(result: &tessera_model::encode::EncodeResult) -> Coding {
        let encoders: Vec<&str> = result
            .renditions
            .iter()
            .map(|r| r.encoder.as_str())
            .collect();
        let decode = result.gpu_decode.as_ref();
        Coding {
            encoders: encoders.join(","),
            decoder: decode
                .and_then(|d| d.hwaccel.clone())
                .unwrap_or_else(|| "software".into()),
            nvdec_frames: decode.map_or(0, |d| d.cuda_frames),
            uploaded_frames: decode.map_or(0, |d| d.uploaded_frames),
        }
    }
}

impl SegmentRunner {
    /// A runner with its worker's settings and connections.
    pub fn new(
        config: WorkerConfig,
        queue: Arc<dyn Queue>,
        store: Arc<dyn Store>,
        sandbox: Sandbox,
        progress: Option<ProgressFn>,
    ) -> Self {
        let fitness = crate::Fitness::new(config.staging_dir.clone(), config.min_free_bytes);
        let sources = crate::source_cache::SourceCache::new(
            config.staging_dir.join("sources"),
            crate::source_cache::BUDGET_BYTES,
        );
        SegmentRunner {
            sources,
            config,
            queue,
            store,
            encoders: SlotPool::new(sandbox.clone(), WarmPolicy::default()),
            fitness: Arc::new(fitness),
            sandbox,
            progress,
        }
    }

    /// Handles one delivery to the end: it is acked, requeued or dead-lettered, never lost;
    /// `origin` is the queue it came from (the CPU or the cut queue), where a retry goes.
    pub async fn handle(&self, delivery: Delivery, origin: &str) {
        let Some(task) = decode_task(&delivery).await else {
            return;
        };
        let staging = self.segment_staging(&task);
        let work = self.execute(&task, &staging, None);
        let ticket = Ticket {
            job: &task.job_id,
            plan: task.plan,
            task: TaskRef::Segment(task.segment),
        };
        self.run_task(ticket, origin, delivery, &staging, work)
            .await;
    }

    /// A fresh staging directory for one attempt at a segment.
    pub(crate) fn segment_staging(&self, task: &SegmentTask) -> PathBuf {
        self.config.staging_dir.join(format!(
            "{}-{:06}-{}",
            task.job_id,
            task.segment,
            uuid::Uuid::new_v4().simple()
        ))
    }

    /// Runs one task of `job` (a segment or a stitch) in `staging` and settles its delivery:
    /// dropped when the job already ended, aborted when it ends meanwhile, acked after its
    /// done event is published, failed or retried by its error's class.
    pub(crate) async fn run_task(
        &self,
        ticket: Ticket<'_>,
        origin: &str,
        delivery: Delivery,
        staging: &std::path::Path,
        work: impl std::future::Future<Output = Result<Done, FarmError>>,
    ) {
        let Ticket { job, task, .. } = ticket;
        let attempts = Attempts::of(&delivery);
        if attempts.lost >= self.config.lost_limit {
            self.lose(ticket, delivery, attempts).await;
            return;
        }
        if self.job_ended(job).await {
            tracing::info!(job, %task, "job already ended: task dropped");
            self.settle_ended(ticket, delivery).await;
            return;
        }
        let started = Instant::now();
        self.config.metrics.started();
        // The job may end (cancelled, failed elsewhere) while this task runs: stop then.
        let outcome = tokio::select! {
            o = work => Some(o),
            _ = self.watch_ended(job) => None,
        };
        let _ = tokio::fs::remove_dir_all(staging).await;
        self.config.metrics.ended();
        let Some(outcome) = outcome else {
            tracing::info!(job, %task, "job ended: task aborted");
            self.settle_ended(ticket, delivery).await;
            return;
        };
        match outcome {
            Ok(done) => {
                let total = started.elapsed().as_secs_f64();
                let overhead = (total - done.media_seconds).max(0.0);
                self.config
                    .metrics
                    .done(task, done.frames, done.media_seconds, overhead);
                // Which attempt this was (1: its first), so a spent one shows in the log.
                let attempt = attempts.number();
                log_done(job, task, &done, total, attempt);
                let event = self.event(
                    ticket,
                    SegmentOutcome::Done {
                        frames: done.frames,
                        bytes: done.bytes,
                        media_seconds: done.media_seconds,
                        overhead_seconds: overhead,
                        peak_rss_bytes: done.peak_rss_bytes,
                        decode_errors: done.decode_errors,
                        check_seconds: done.check_seconds,
                        etags: done.etags,
                        keys: done.keys,
                        attempt,
                        card: done.card,
                        targets: done.targets,
                    },
                );
                // Ack only once the event is published: a lost event would stall the job.
                match self
                    .queue
                    .publish(QUEUE_EVENTS, encode_message(&event))
                    .await
                {
                    Ok(()) => {
                        let _ = delivery.acker.ack().await;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "event publish failed; task requeued");
                        let _ = delivery.acker.reject(true).await;
                    }
                }
            }
            Err(e) => self.fail(ticket, origin, delivery, e).await,
        }
    }

    /// Fails a task whose deliveries ran out without a verdict across its copies (the
    /// broker dead-letters one copy that reaches the limit by itself): its job fails
    /// `task_lost`, as for a dead letter.
    async fn lose(&self, ticket: Ticket<'_>, delivery: Delivery, attempts: Attempts) {
        let limit = self.config.lost_limit;
        tracing::warn!(job = ticket.job, task = %ticket.task, lost = attempts.lost, limit,
            "task lost: its deliveries ran out");
        let failed = SegmentOutcome::Failed {
            code: ErrorCode::TaskLost,
            class: ErrorClass::Abort,
            message: format!(
                "{} was lost: {} of its deliveries ended without a result (each worker \
                 holding it stopped: killed, out of memory, reclaimed, or its connection \
                 lost), the farm's lost_limit of {limit}",
                ticket.task, attempts.lost
            ),
        };
        self.report_final(ticket, delivery, failed, true).await;
    }

    /// Settles a task of an ended job: says so in an event (a dispatcher still running the
    /// job, after a stale marker, fails it instead of waiting forever), then acks.
    async fn settle_ended(&self, ticket: Ticket<'_>, delivery: Delivery) {
        let (job, task) = (ticket.job, ticket.task);
        let event = self.event(
            ticket,
            SegmentOutcome::Failed {
                code: tessera_model::error_code::ErrorCode::JobFinished,
                class: tessera_model::error_code::ErrorClass::Abort,
                message: format!("{task}: dropped, the job had already ended"),
            },
        );
        if let Err(e) = self
            .queue
            .publish(QUEUE_EVENTS, encode_message(&event))
            .await
        {
            tracing::warn!(job, error = %e, "dropped-task event not published");
        }
        let _ = delivery.acker.ack().await;
    }

    /// Whether the dispatcher marked the job as ended (a failed check counts as "not ended").
    pub(crate) async fn job_ended(&self, job: &str) -> bool {
        self.store
            .exists(&tessera_model::wire::keys::ended(job))
            .await
            .unwrap_or(false)
    }

    /// Removes the cached sources of ended jobs (source_cache.rs) every
    /// [`crate::source_cache::SWEEP_EVERY`] until `stop`: a cancelled or finished job's
    /// source leaves the staging disk within seconds, not when it has idled out.
    pub(crate) async fn sweep_sources(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(crate::source_cache::SWEEP_EVERY) => {}
            }
            for job in self.sources.free_jobs() {
                if self.job_ended(&job).await {
                    self.sources.remove_job(&job);
                }
            }
        }
    }

    /// Returns once the job is marked ended (checked every two seconds).
    async fn watch_ended(&self, job: &str) {
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            if self.job_ended(job).await {
                return;
            }
        }
    }

    pub(crate) fn event(&self, ticket: Ticket<'_>, outcome: SegmentOutcome) -> TaskEvent {
        TaskEvent {
            v: WIRE_VERSION,
            job_id: ticket.job.to_string(),
            plan: ticket.plan,
            task: ticket.task,
            worker: self.config.id.clone(),
            outcome,
        }
    }

    /// Fails as unfit (the worker's fault, not the task's) when staging is short of space:
    /// the task goes to another worker and this one pauses until space returns.
    pub(crate) fn check_free_space(&self) -> Result<(), FarmError> {
        let free = tessera_farm::disk::free_bytes(&self.config.staging_dir);
        if free < self.config.min_free_bytes {
            return Err(FarmError::WorkerUnfit {
                reason: format!(
                    "{}: only {free} bytes free, {} needed",
                    self.config.staging_dir.display(),
                    self.config.min_free_bytes
                ),
                pause: true,
            });
        }
        Ok(())
    }
}

/// The line a finished task logs: its figures, which delivery it was, and for a segment what
/// decoded and encoded it (the GPU smoke test reads these).
fn log_done(job: &str, task: TaskRef, done: &Done, total: f64, attempt: u32) {
    match task {
        TaskRef::Segment(segment) => {
            let none = Coding::default();
            let c = done.coding.as_ref().unwrap_or(&none);
            tracing::info!(
                job,
                segment,
                frames = done.frames,
                seconds = total,
                attempt,
                encoders = %c.encoders,
                decoder = %c.decoder,
                nvdec_frames = c.nvdec_frames,
                uploaded_frames = c.uploaded_frames,
                "segment encoded"
            )
        }
        TaskRef::Stitch(output) => tracing::info!(
            job,
            output,
            frames = done.frames,
            seconds = total,
            attempt,
            key = done
                .keys
                .first()
                .and_then(|k| k.as_deref())
                .unwrap_or_default(),
            "output stitched"
        ),
        TaskRef::Whole => tracing::info!(
            job,
            frames = done.frames,
            seconds = total,
            attempt,
            "input transcoded whole"
        ),
    }
}
