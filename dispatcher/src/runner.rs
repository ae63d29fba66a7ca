//! Runs one API job: stage the input from S3, run the job over RabbitMQ and the S3 work area,
//! upload the output, record every step in the database.

use futures_util::FutureExt;
use std::path::PathBuf;
use std::sync::Arc;

use tessera_farm::queue::Queue;
use tessera_farm::sandbox::{Limits, Sandbox};
use tessera_farm::store::{ObjectInfo, S3Client, S3Store, Store};
use tessera_farm::FarmError;
use tessera_model::error_code::{ErrorClass, ErrorCode};
use tokio_util::sync::CancellationToken;

mod admission;
mod outcome;
mod sink;

use crate::db::{Db, JobState, SegmentRun};
use crate::events::EventRouter;
use crate::job_plan::JobPlan;
use crate::metrics::Metrics;
use crate::scaling::Pool;
use admission::StagingLedger;
use sink::S3Sink;
use tessera_engine::{
    run_job, Destination, DispatchContext, JobOutput, JobReport, JobRequest, JobStage, PackageJob,
};

/// How long a stopping dispatcher waits for its jobs' tasks to leave their jobs: they see
/// the stop at their next await, so this only bounds one finishing its outcome's record.
pub const JOBS_STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long after a job's end its work area is swept again (see `Runner::run`).
const LATE_SWEEP: std::time::Duration = std::time::Duration::from_secs(60);

/// Shared state of every job run.
pub struct Runner {
    /// Job database.
    pub db: Db,
    /// The broker.
    pub queue: Arc<dyn Queue>,
    /// S3 access for inputs and outputs.
    pub s3: S3Client,
    /// The work area.
    pub work: Arc<S3Store>,
    /// Media children.
    pub sandbox: Sandbox,
    /// Local staging of inputs and outputs.
    pub staging_dir: PathBuf,
    /// Event routing.
    pub router: EventRouter,
    /// Child limits.
    pub limits: Limits,
    /// Segments expected to encode at once across the farm.
    pub parallelism: usize,
    /// Admits segments to the encode queue by job priority.
    pub gate: Arc<tessera_engine::PublishGate>,
    /// Key of the webhook signatures; callbacks are refused without one.
    pub webhook_secret: Option<String>,
    /// Where webhooks may go (public addresses, plus the farm's allow-list).
    pub webhook_guard: Arc<crate::webhook_guard::WebhookGuard>,
    /// Counters and histograms served at `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Backlog per worker pool and the workers it needs (`/scaling`).
    pub scaling: Arc<crate::scaling::Scaling>,
    /// See [`DispatchContext::max_decode_error_share`].
    pub max_decode_error_share: f64,
    /// See [`DispatchContext::max_input_frames`].
    pub max_input_frames: Option<u64>,
    /// See [`DispatchContext::task_deadline`].
    pub task_deadline: std::time::Duration,
    /// See [`DispatchContext::whole_max_seconds`] (0: every input splits).
    pub whole_max_seconds: f64,
    /// See [`DispatchContext::cut_queue`] (false: the dispatcher splits every input).
    pub cut_on_workers: bool,
    /// Places for running jobs: a job waits `queued` for one (admission control).
    pub admission: Arc<tokio::sync::Semaphore>,
    /// The dispatcher's own stop (SIGTERM): a job still running then is left as it stands,
    /// to resume at the next start, as after a kill. Why: stopping tears down the job's
    /// child tasks, and a job that took their cancellation for its outcome failed
    /// (`child_crashed`, `io_error`) where a killed dispatcher's job resumed (found by the
    /// rolling upgrade, scripts/rolling-upgrade.sh).
    pub shutdown: CancellationToken,
    /// The running jobs' tasks: at a stop the dispatcher waits (up to [`JOBS_STOP_WAIT`])
    /// until each has seen the stop and left its job to resume, instead of the runtime
    /// dropping them wherever they stand (a stop then looked like a kill to its jobs, and
    /// a job the stop met between two awaits never said it was left).
    pub jobs: tokio_util::task::TaskTracker,
    /// Largest input accepted.
    pub max_input_bytes: u64,
}

impl Runner {
    /// Runs a job to its end and records the outcome. `events` is the job's route, registered
    /// before this task was spawned so that no event of a resumed job arrives unrouted; until
    /// the job first reads them its events are held in the database, acked (events.rs).
    pub async fn run(
        self: Arc<Self>,
        id: String,
        plan: JobPlan,
        mut events: crate::events::JobEvents,
        cancel: CancellationToken,
    ) {
        let staging = self.staging_dir.join(&id);
        let sink = Arc::new(S3Sink::new(
            self.s3.clone(),
            self.work.bucket().to_string(),
            self.db.clone(),
            &id,
        ));
        let ctx = self.context(&id, &staging, sink.clone());
        let run = self.admitted_run(&ctx, &id, &plan, &staging, &mut events, &cancel);
        let result = tokio::select! {
            result = run => Some(result),
            () = self.shutdown.cancelled() => None,
        };
        // A run that ended in an error while the dispatcher stops may have met the stop
        // itself (its child tasks torn down): it is left to resume too.
        let stopping = self.shutdown.is_cancelled() && !cancel.is_cancelled();
        let Some(result) = result.filter(|r| r.is_ok() || !stopping) else {
            tracing::info!(job = %id, "dispatcher stopping: the job resumes at the next start");
            self.router.unregister(&id).await;
            return;
        };
        // A run resumed inside delivery that failed: what the run before it copied goes too.
        let result = sink.take_back_earlier(result).await;
        self.router.unregister(&id).await;
        // The outcome is durable before the end marker is written: a restart between the two
        // finds a final job to clean up, never an unfinished one whose tasks workers drop.
        self.record_outcome(&id, result, cancel.is_cancelled())
            .await;
        tessera_engine::end_job(&*self.work, Some(&self.gate), &self.staging_dir, &id).await;
        // Its staging is gone: the space promised to it at admission is free again.
        StagingLedger::of(&self.staging_dir).release(&id);
        // A task still running when the job ended (a redelivered duplicate) may store its
        // result after the cleanup: workers stop within seconds of the end marker, so one
        // more sweep a minute later leaves the work area empty.
        let (work, prefix) = (
            self.work.clone(),
            tessera_model::wire::keys::job_prefix(&id),
        );
        tokio::spawn(async move {
            tokio::time::sleep(LATE_SWEEP).await;
            if let Ok(n @ 1..) = work.delete_prefix(&prefix).await {
                tracing::info!(%prefix, objects = n, "late work objects of an ended job removed");
            }
        });
        if let Err(e) = self.db.forget_progress(&id) {
            tracing::warn!(job = %id, error = %e, "ended job's progress not removed");
        }
        // What it delivered is its output now, or was taken back (leftovers in its error).
        if let Err(e) = self.db.forget_deliveries(&id) {
            tracing::warn!(job = %id, error = %e, "ended job's deliveries not forgotten");
        }
        // The job's webhook, if it has one, was queued with its outcome (db/outbox.rs) and is
        // sent by the webhook sender (webhook.rs), across restarts.
    }

    /// The job's run once admitted (at most `max_running_jobs` stage, probe, split and
    /// encode at once); a cancel while it waits for admission cancels it.
    async fn admitted_run(
        &self,
        ctx: &DispatchContext,
        id: &str,
        plan: &JobPlan,
        staging: &std::path::Path,
        events: &mut crate::events::JobEvents,
        cancel: &CancellationToken,
    ) -> Result<JobReport, FarmError> {
        // Admission: at most `max_running_jobs` jobs stage, probe, split and encode at once.
        let admitted = tokio::select! {
            p = self.admission.clone().acquire_owned() => p.ok(),
            _ = cancel.cancelled() => None,
        };
        match admitted {
            Some(_place) => {
                // Until its tasks are published (or its stitch, for a job resumed after its
                // segments), the job keeps a worker asked for (scaling.rs).
                self.scaling.started(id);
                // A bug that panics the job's task fails the job with the reason; without
                // this the job would stay "running" for good and its place never free.
                let job = self.execute(ctx, id, plan, staging, events, cancel.clone());
                match std::panic::AssertUnwindSafe(job).catch_unwind().await {
                    Ok(result) => result,
                    Err(panic) => {
                        let why = panic
                            .downcast_ref::<String>()
                            .map(String::as_str)
                            .or_else(|| panic.downcast_ref::<&str>().copied())
                            .unwrap_or("no message");
                        tracing::error!(job = %id, panic = why, "job task panicked");
                        Err(FarmError::Media {
                            code: ErrorCode::Internal,
                            class: ErrorClass::Abort,
                            message: format!(
                                "job {id}: internal error (a bug; please report): {why}"
                            ),
                        })
                    }
                }
            }
            None => Err(FarmError::Cancelled {
                job: id.to_string(),
            }),
        }
    }

    /// Checks the input before it is downloaded and promises it its staging: the HEAD
    /// answers (an unavailable store is waited for), the input is not larger than the farm
    /// accepts, and the staging disk holds it beside the other jobs' promises
    /// (admission.rs); a resumed run's input is the version its first run saw. Returns what
    /// the HEAD saw: the fetch takes that version, no larger.
    async fn admit_input(
        &self,
        id: &str,
        source: &S3Store,
        plan: &JobPlan,
        staging: &std::path::Path,
    ) -> Result<ObjectInfo, FarmError> {
        let head = tessera_engine::patiently("look at input", || source.head(&plan.input.key));
        let input = plan.input.to_string();
        let info = admission::checked_head(head.await, &input, self.max_input_bytes)?;
        if let Some(first) = self.db.pin_input(id, &info.etag)? {
            return Err(admission::replaced(&input, &first, &info.etag));
        }
        let free = tessera_farm::disk::free_bytes(staging);
        let need = admission::staging_need(info.size);
        StagingLedger::of(&self.staging_dir).reserve(id, need, free, staging, &input)?;
        Ok(info)
    }

    /// The dispatch context of one job: its staging, and progress recorded in the database.
    fn context(&self, id: &str, staging: &std::path::Path, sink: Arc<S3Sink>) -> DispatchContext {
        let db = self.db.clone();
        let metrics = self.metrics.clone();
        let scaling = self.scaling.clone();
        let job = id.to_string();
        let progress = Arc::new(std::sync::Mutex::new((0u32, 0u32)));
        // The job's span (api.rs): the stage callback may run in another task.
        let span = tracing::Span::current();
        DispatchContext {
            queue: self.queue.clone(),
            store: self.work.clone(),
            sandbox: self.sandbox.clone(),
            staging_dir: staging.join("dispatch"),
            encode_queue: tessera_model::wire::QUEUE_ENCODE_CPU.to_string(),
            gpu_queue: tessera_model::wire::QUEUE_ENCODE_GPU.to_string(),
            stitch_queue: tessera_model::wire::QUEUE_STITCH.to_string(),
            whole_queue: (self.whole_max_seconds > 0.0)
                .then(|| tessera_model::wire::QUEUE_WHOLE_CPU.to_string()),
            whole_max_seconds: self.whole_max_seconds,
            cut_queue: self
                .cut_on_workers
                .then(|| tessera_model::wire::QUEUE_CUT_CPU.to_string()),
            gate: Some(self.gate.clone()),
            sink: Some(sink),
            limits: self.limits,
            max_decode_error_share: self.max_decode_error_share,
            max_input_frames: self.max_input_frames,
            task_deadline: self.task_deadline,
            on_stage: Arc::new(move |stage: &JobStage| {
                let mut p = progress.lock().unwrap_or_else(|p| p.into_inner());
                match stage {
                    JobStage::Planned {
                        segments,
                        fingerprint,
                        segment_seconds,
                        on_gpu,
                        ..
                    } => db.record_plan(&job, *fingerprint).and_then(|()| {
                        let plan = format_args!("{fingerprint:016x}");
                        span.record("plan", tracing::field::display(plan));
                        // A resumed run counts the segments its earlier run finished.
                        let done: Vec<u32> = db
                            .resume_state(&job)?
                            .map_or_else(Vec::new, |r| r.done.iter().map(|d| d.index).collect());
                        let pool = if *on_gpu { Pool::Gpu } else { Pool::Cpu };
                        scaling.planned(&job, pool, segment_seconds, &done);
                        *p = (*segments, done.len() as u32);
                        db.set_segments(&job, p.0, p.1)?;
                        db.set_state(&job, JobState::Encoding)
                    }),
                    JobStage::Published => db.record_published(&job),
                    JobStage::SegmentDone {
                        segment,
                        frames,
                        media_seconds,
                        overhead_seconds,
                        targets,
                        ..
                    } => {
                        if let Some(run) = SegmentRun::heard_now(stage) {
                            db.record_segment_run(&job, &run)?;
                        }
                        let recorded = db.record_segment(&job, (*segment, *frames), targets)?;
                        // Counted once the record stands, and once: a stage whose later
                        // write failed is tried again and records its segment again (L8).
                        if recorded.new {
                            scaling.segment_done(&job, *segment, *media_seconds);
                            metrics.segment_done(*frames, *media_seconds, *overhead_seconds);
                        }
                        p.1 = recorded.done.min(p.0);
                        db.set_segments(&job, p.0, p.1)
                    }
                    JobStage::Stitching => db.set_state(&job, JobState::Stitching),
                    JobStage::Delivering => db.begin_delivery(&job).map(|()| {
                        // Its stitches are done: the worker kept for them may go (N2).
                        scaling.delivering(&job);
                    }),
                }
            }),
        }
    }

    async fn execute(
        &self,
        ctx: &DispatchContext,
        id: &str,
        plan: &JobPlan,
        staging: &std::path::Path,
        events: &mut crate::events::JobEvents,
        cancel: CancellationToken,
    ) -> Result<JobReport, FarmError> {
        // A job resumed inside delivery stays `delivering` (db.rs set_state): its stages run
        // again, reusing the segments done, and a cancel stays refused.
        self.db.set_state(id, JobState::Splitting)?;
        // An end marker of an unfinished job is stale (written by another dispatcher, or by
        // hand): workers would drop every task of the job, so it goes first.
        let marker = tessera_model::wire::keys::ended(id);
        if self.work.exists(&marker).await.unwrap_or(false) {
            tracing::warn!(job = %id, "stale end marker of an unfinished job removed");
            tessera_engine::patiently("remove stale end marker", || self.work.delete(&marker))
                .await?;
        }
        tokio::fs::create_dir_all(staging)
            .await
            .map_err(|e| FarmError::io(staging, e))?;
        let input = staging.join("input");
        let source = self.s3.store(&plan.input.bucket);
        let seen = self.admit_input(id, &source, plan, staging).await?;
        let key = &plan.input.key;
        let fetch = || source.get_file_if_match(key, &input, &seen.etag, seen.size);
        tessera_engine::patiently("fetch input", fetch)
            .await
            .map_err(|e| FarmError::Media {
                code: ErrorCode::InputUnreadable,
                class: ErrorClass::Abort,
                message: format!("{}: cannot read input: {e}", plan.input),
            })?;
        let request = JobRequest {
            id: id.to_string(),
            input: input.clone(),
            outputs: plan
                .outputs
                .iter()
                .map(|o| JobOutput {
                    rendition: o.rendition.clone(),
                    container: o.container,
                    destination: Destination::Object {
                        bucket: o.destination.bucket.clone(),
                        key: o.destination.key.clone(),
                    },
                })
                .collect(),
            segment_seconds: plan.segment_seconds,
            parallelism: self.parallelism,
            priority: plan.priority,
            hardware: plan.hardware,
            first_audio_only: false,
            stereo_downmix: plan.stereo_downmix,
            measure_quality: plan.psnr,
            resume: self.db.resume_state(id)?,
            package: plan.package.as_ref().map(|p| PackageJob {
                spec: p.spec.clone(),
                destination: Destination::Object {
                    bucket: p.bucket.clone(),
                    key: p.prefix.clone(),
                },
            }),
        };
        // Errors name the user's object, not the dispatcher's local copy of it.
        let local = input.display().to_string();
        run_job(ctx, &request, events, cancel)
            .await
            .map_err(|e| match e {
                FarmError::Media {
                    code,
                    class,
                    message,
                } => FarmError::Media {
                    code,
                    class,
                    message: message.replace(&local, &plan.input.to_string()),
                },
                other => other,
            })
    }
}
