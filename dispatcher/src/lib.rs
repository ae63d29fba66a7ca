//! tessera-dispatcher: the service around the job engine (tessera-engine's `run_job`).
//!
//! Why a crate apart from the engine: the HTTP server, the job database, tokens, uploads,
//! the bucket watcher, webhooks, scaling and metrics are the service's alone; the one-process
//! CLI runs jobs with the engine and compiles none of this.
//!
//! Layout:
//! - settings.rs: the service's settings (defaults, file, env, flags); `serve` below wires
//!   them to RabbitMQ, S3, the media sandbox and the database (db.rs, with the webhook
//!   outbox in db/outbox.rs; instance.rs).
//! - api.rs: the router and the job handlers over `AppState`; error.rs the error answer,
//!   jobview.rs what a client sees of a job; auth.rs (tokens, tenants) and uploads.rs take
//!   their own narrow state, not `AppState`.
//! - jobspec.rs, job_plan.rs: an API job validated into the stored plan; openapi.rs.
//! - runner.rs: runs a stored plan through the engine and records it; resume.rs, events.rs
//!   (the events queue routed to jobs), seen.rs.
//! - watch.rs + watch/: the bucket watcher (polling and S3 event notifications).
//! - webhook.rs, webhook_guard.rs: signed callbacks, and where they may go.
//! - scaling.rs, metrics.rs, http_server.rs: the autoscaler's signal, Prometheus, limits.
//! - ui/: the operator's dashboard at `/ui` (server-rendered pages, sign-in, CSRF), merged
//!   into the API's router.

mod api;
mod auth;
mod db;
mod error;
mod events;
mod fleet;
mod http_server;
mod instance;
mod job_plan;
mod jobspec;
#[cfg(test)]
mod jobspec_fuzz;
mod jobview;
mod metrics;
mod openapi;
mod resume;
mod runner;
pub mod scaling;
mod scopes;
mod seen;
mod settings;
mod ui;
mod uploads;
mod watch;
mod webhook;
mod webhook_guard;

pub use api::{router, AppState};
pub use auth::constant_time_eq;
pub use db::{Db, JobRow, JobState};
pub use events::EventRouter;
pub use http_server::HttpLimits;
pub use job_plan::{JobPlan, PlannedOutput, S3Uri};
pub use runner::Runner;
pub use settings::{AdmissionLimits, DispatcherArgs, DispatcherCommand, Settings};
pub use watch::Watch;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tessera_farm::backoff::Backoff;
use tessera_farm::queue::{Queue, RabbitQueue};
use tessera_farm::sandbox::{Confinement, Limits, Sandbox};
use tessera_farm::store::S3Client;
use tessera_farm::FarmError;
use tessera_model::error_code::ErrorCode;
use tokio_util::sync::CancellationToken;

/// Runs the dispatcher until `shutdown`: resumes unfinished jobs, serves the API.
pub async fn serve(settings: Settings, shutdown: CancellationToken) -> Result<(), FarmError> {
    // Held until the process exits: one dispatcher per database, and per broker below.
    let _lock = instance::lock_database(&settings.db)?;
    let db = Db::open(&settings.db)?;
    let Some(queue) = connect_queue(&settings, &shutdown).await? else {
        return Ok(());
    };
    let events = instance::claim_events(&*queue).await?;
    let s3 = S3Client::new(settings.service.s3.clone()).await?;
    let router = EventRouter::durable(db.clone());
    let runner = new_runner(&settings, &db, &queue, s3, &router, &shutdown)?;
    // What the media child's FFmpeg offers; a dispatcher whose child cannot answer does not
    // start.
    let caps = runner.sandbox.capabilities().await?;
    let state = Arc::new(AppState {
        db: db.clone(),
        runner,
        tokens: Arc::new(settings.tokens.clone()),
        buckets: settings.buckets.clone(),
        upload_bucket: settings.upload_bucket.clone(),
        segment_seconds: settings.segment_seconds,
        gpu: caps.hw,
        max_jobs_per_tenant: settings.limits.jobs_per_tenant,
        scopes: settings.scopes.clone(),
        watched: watch::watched_prefixes(&settings.watches),
        upload_limits: settings.uploads,
        upload_ledger: Default::default(),
        running: Mutex::new(Default::default()),
        fleet: fleet::Fleet::default(),
    });
    // Before any job can end: an ending job queues its webhook in the same transaction.
    webhook::start(&db, &state.runner, shutdown.clone());
    end_ended_jobs(&state, &db)?;
    resume_unfinished_jobs(&state, &db)?;
    tokio::spawn(router.run(events, queue.clone(), shutdown.clone()));
    // Workers' status reports, for the dashboard's workers page.
    let fleet = state.fleet.clone();
    tokio::spawn(fleet::listen(queue.clone(), fleet, shutdown.clone()));
    tokio::spawn(db::prune_every_hour(
        db.clone(),
        settings.limits.retention,
        shutdown.clone(),
    ));
    // A task dead-lettered (deliveries spent, unreadable) fails its job with the reason.
    tessera_engine::dead_letters::spawn_forwarders(&queue, &shutdown);
    watch::spawn(
        &settings.watches,
        settings.watch_interval,
        settings.s3_events_queue.as_deref(),
        &state,
        &queue,
        &shutdown,
    );
    let listener = bind_api(settings.listen).await?;
    let jobs = state.runner.jobs.clone();
    let limits = settings.http;
    let deadline = limits.request_timeout;
    let app = api::router(state)
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                http_server::request_deadline(deadline, req, next)
            },
        ))
        .layer(axum::middleware::from_fn(http_server::json_errors));
    http_server::serve(listener, app, limits, shutdown).await;
    // Each running job leaves its job to resume at the next start (runner.rs).
    jobs.close();
    if tokio::time::timeout(runner::JOBS_STOP_WAIT, jobs.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            left = jobs.len(),
            "jobs still finishing at the stop: left as they stand"
        );
    }
    Ok(())
}

/// Connects to RabbitMQ and declares the farm's queues, waiting (jittered, 1 s doubling to
/// 30 s, each failure logged) until it can or `shutdown`: then None. Why wait: a dispatcher
/// started while the broker restarts or is unreachable (a rollout, a partition) would
/// otherwise exit and leave its start to a supervisor's own backoff, as workers do not. A
/// broker that answers but refuses a queue (its version or an operator's policy forbids an
/// argument) is an error naming the queue and the refusal: waiting would not change it.
async fn connect_queue(
    settings: &Settings,
    shutdown: &CancellationToken,
) -> Result<Option<Arc<dyn Queue>>, FarmError> {
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30)).jittered();
    loop {
        match declare_queues(settings).await {
            Ok(queue) => return Ok(Some(queue)),
            Err(e @ FarmError::QueueRefused { .. }) => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff.current(), "broker unavailable");
                if !backoff.wait(shutdown).await {
                    return Ok(None);
                }
            }
        }
    }
}

/// One attempt of [`connect_queue`].
async fn declare_queues(settings: &Settings) -> Result<Arc<dyn Queue>, FarmError> {
    let queue = RabbitQueue::connect(settings.service.rabbit.clone()).await?;
    tessera_farm::queue::declare_farm_queues(&queue).await?;
    Ok(Arc::new(queue))
}

/// The job runner over the database, the broker, the store and a media sandbox, with the
/// settings' limits.
fn new_runner(
    settings: &Settings,
    db: &Db,
    queue: &Arc<dyn Queue>,
    s3: S3Client,
    router: &EventRouter,
    shutdown: &CancellationToken,
) -> Result<Arc<Runner>, FarmError> {
    let limits = Limits {
        timeout: Duration::from_secs(6 * 3600),
        ..Limits::default()
    };
    Ok(Arc::new(Runner {
        db: db.clone(),
        queue: queue.clone(),
        work: Arc::new(s3.store(&settings.service.work_bucket)),
        s3,
        // Two spares: a job's audio runs beside its split.
        // Children write only in the staging directory, where inputs are downloaded.
        sandbox: Sandbox::current()?
            .confined(Confinement::default().writing(&settings.staging_dir))
            .with_spares(2, limits),
        staging_dir: settings.staging_dir.clone(),
        router: router.clone(),
        limits,
        parallelism: settings.parallelism,
        gate: tessera_engine::PublishGate::new(settings.queue_window),
        webhook_secret: settings.webhook_secret.clone(),
        webhook_guard: Arc::new(settings.webhook_guard.clone()),
        admission: Arc::new(tokio::sync::Semaphore::new(settings.limits.running_jobs)),
        max_input_bytes: settings.limits.input_bytes,
        metrics: Default::default(),
        scaling: Arc::new(scaling::Scaling::new(settings.scaling)),
        max_decode_error_share: settings.max_decode_error_share,
        max_input_frames: settings.max_input_frames,
        task_deadline: settings.task_deadline,
        whole_max_seconds: settings.whole_max_seconds,
        cut_on_workers: settings.cut_on_workers,
        shutdown: shutdown.clone(),
        jobs: tokio_util::task::TaskTracker::new(),
    }))
}

/// Completes the end of jobs whose outcome was recorded but whose end did not complete
/// (marker, work area), in the background.
fn end_ended_jobs(state: &Arc<AppState>, db: &Db) -> Result<(), FarmError> {
    for id in db.ended_uncleaned()? {
        let runner = state.runner.clone();
        tokio::spawn(async move {
            tessera_engine::end_job(&*runner.work, Some(&runner.gate), &runner.staging_dir, &id)
                .await;
            if let Err(e) = runner.db.forget_progress(&id) {
                tracing::warn!(job = %id, error = %e, "ended job's progress not removed");
            }
        });
    }
    Ok(())
}

/// Starts again the jobs a previous run left unfinished (each registers its route in `spawn`,
/// before the event router reads an event); an unreadable stored request fails its job.
fn resume_unfinished_jobs(state: &Arc<AppState>, db: &Db) -> Result<(), FarmError> {
    for row in db.unfinished()? {
        match serde_json::from_value::<JobPlan>(row.request.clone()) {
            Ok(plan) => {
                tracing::info!(job = %row.id, "resuming job");
                state.spawn(row.id.clone(), plan);
            }
            Err(e) => db.fail(
                &row.id,
                JobState::Failed,
                ErrorCode::BadRequest.as_str(),
                &format!("stored request unreadable: {e}"),
            )?,
        }
    }
    Ok(())
}

/// Binds the API's address and announces it: tests and scripts read the bound address from
/// the "listening on" line.
async fn bind_api(listen: std::net::SocketAddr) -> Result<tokio::net::TcpListener, FarmError> {
    let io_error = |e: std::io::Error| FarmError::Io {
        path: listen.to_string(),
        reason: e.to_string(),
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(io_error)?;
    let addr = listener.local_addr().map_err(io_error)?;
    println!("tessera-dispatcher listening on http://{addr}");
    tracing::info!(%addr, "API listening");
    Ok(listener)
}
