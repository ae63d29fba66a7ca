//! The HTTP API: jobs under a bearer token; health, readiness and metrics without; the
//! operator's dashboard (ui/, its own sign-in) merged in at `/ui`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Extension;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use tessera_model::api::ApiJob;
use tessera_model::error_code::ErrorCode;

use crate::auth::Principal;
use crate::db::{Admitted, Db, JobState};
use crate::error::error;
use crate::jobspec::validate;
use crate::jobview::{view, visible};
use crate::runner::Runner;

pub(crate) mod actions;

/// State shared by the handlers.
pub struct AppState {
    /// Job database.
    pub db: Db,
    /// Runs accepted jobs.
    pub runner: Arc<Runner>,
    /// Accepted bearer tokens (the auth layer's state).
    pub tokens: crate::auth::Tokens,
    /// Buckets jobs may read from and write to.
    pub buckets: Vec<String>,
    /// Bucket that `POST /v1/uploads` with only a filename puts uploads in ("": none set).
    pub upload_bucket: String,
    /// Default segment length.
    pub segment_seconds: f64,
    /// What the farm's FFmpeg offers for NVENC (the media child's answer at start-up), for
    /// jobs that ask for a card.
    pub gpu: tessera_model::capabilities::HwCapabilities,
    /// Unfinished jobs one tenant may have.
    pub max_jobs_per_tenant: u64,
    /// What each tenant's jobs may read and write.
    pub scopes: crate::scopes::TenantScopes,
    /// The watched prefixes, where no job may write (its output would start a job).
    pub watched: Vec<crate::scopes::Prefix>,
    /// Upload URL limits.
    pub upload_limits: crate::uploads::UploadLimits,
    /// Upload URLs given per tenant.
    pub upload_ledger: Arc<crate::uploads::UrlLedger>,
    /// Cancellation handles of running jobs.
    pub running: Mutex<HashMap<String, CancellationToken>>,
    /// The workers' newest status reports (fleet.rs), for the dashboard.
    pub fleet: crate::fleet::Fleet,
}

impl axum::extract::FromRef<Arc<AppState>> for crate::uploads::Uploads {
    fn from_ref(state: &Arc<AppState>) -> Self {
        crate::uploads::Uploads {
            buckets: state.buckets.clone(),
            upload_bucket: state.upload_bucket.clone(),
            s3: state.runner.s3.clone(),
            limits: state.upload_limits,
            ledger: state.upload_ledger.clone(),
        }
    }
}

impl AppState {
    /// Starts a job in the background. Its event route exists when this returns, so no
    /// event of the job (a resumed one has events waiting) can arrive before it.
    pub fn spawn(self: &Arc<Self>, id: String, plan: crate::job_plan::JobPlan) {
        let events = self.runner.router.register(&id);
        let cancel = CancellationToken::new();
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), cancel.clone());
        let state = self.clone();
        // Every line of the job's run names it, and its plan once planned (runner.rs), so
        // its story can be filtered out of JSON logs (docs/operations.md).
        let span = tracing::info_span!("job", job = %id, plan = tracing::field::Empty);
        let run = async move {
            state
                .runner
                .clone()
                .run(id.clone(), plan, events, cancel)
                .await;
            state
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
        };
        (self.runner.jobs).spawn(tracing::Instrument::instrument(run, span));
    }
}

/// The router: `/v1/*` behind the token, the rest open.
pub fn router(state: Arc<AppState>) -> Router {
    // Built once: it states this farm's buckets, encoders and webhook policy.
    let doc = Arc::new(crate::openapi::document(&contract(&state)));
    let v1 = Router::new()
        .route("/v1/jobs", get(list_jobs).post(create_job))
        .route("/v1/jobs/{id}", get(get_job).delete(cancel_job))
        .route("/v1/uploads", post(crate::uploads::create_upload))
        .layer(axum::middleware::from_fn_with_state(
            state.tokens.clone(),
            crate::auth::auth,
        ));
    Router::new()
        .merge(v1)
        .merge(crate::ui::router(state.tokens.clone()))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .route("/scaling", get(scaling))
        .route(
            "/openapi.json",
            get(move || async move { Json(doc.as_ref().clone()) }),
        )
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::from_fn(refuse_declared_oversize))
        .with_state(state)
}

/// What the API document states of this farm: its usable buckets (valid S3 names only: no
/// other can be used), the upload bucket when it is one of them, the NVENC encoders and the
/// webhook policy.
fn contract(state: &AppState) -> crate::openapi::Contract {
    let valid = |b: &String| {
        (3..=63).contains(&b.len())
            && b.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.')
    };
    let buckets: Vec<String> = state.buckets.iter().filter(|b| valid(b)).cloned().collect();
    let upload_bucket = Some(state.upload_bucket.clone()).filter(|b| buckets.contains(b));
    crate::openapi::Contract {
        buckets,
        upload_bucket,
        gpu: state.gpu,
        webhooks: state.runner.webhook_secret.is_some(),
        webhook_hosts: state.runner.webhook_guard.hosts().to_vec(),
        upload_max_bytes: state.upload_limits.max_bytes,
        watched: state.watched.clone(),
    }
}

/// The largest request body the API reads.
const BODY_LIMIT: usize = 64 * 1024;

/// Answers 413 at once when a request declares (`Content-Length`) a body over the limit.
///
/// Why before the handler: a client that sends `Expect: 100-continue` (curl does for large
/// bodies) would otherwise be told "100 Continue" as soon as the body is first read, start
/// uploading, and then see the connection refused mid-upload, where it may report the 100
/// as its final status. Refused before any read, it gets the 413 instead of the 100.
async fn refuse_declared_oversize(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > BODY_LIMIT as u64) {
        return (
            axum::http::StatusCode::PAYLOAD_TOO_LARGE,
            "Failed to buffer the request body: length limit exceeded",
        )
            .into_response();
    }
    next.run(req).await
}

async fn create_job(
    State(state): State<Arc<AppState>>,
    Extension(who): Extension<Principal>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let job: ApiJob = match serde_json::from_slice(&body) {
        Ok(j) => j,
        Err(e) => return error(ErrorCode::BadRequest, format!("invalid job JSON: {e}")),
    };
    let plan = match validate(&job, &state.buckets, state.segment_seconds, &state.gpu) {
        Ok(p) => p,
        Err((code, msg)) => return error(code, msg),
    };
    // Every object the job reads or writes must be the tenant's (review N1).
    let grant = state.scopes.grant(&who.tenant, who.admin);
    if let Err((code, msg)) = crate::scopes::check_plan(&plan, &grant, &state.watched) {
        return error(code, msg);
    }
    if plan.callback_url.is_some() && state.runner.webhook_secret.is_none() {
        return error(
            ErrorCode::WebhooksDisabled,
            "callback_url needs a webhook secret on the dispatcher (TESSERA_WEBHOOK_SECRET)",
        );
    }
    if let Some(url) = &plan.callback_url {
        if let Err(why) = state.runner.webhook_guard.check_url(url) {
            return error(ErrorCode::InvalidJob, why);
        }
    }
    // 1-200 visible ASCII characters, as the schema says: a key outside them is refused, not
    // dropped (the retry it was meant for would make a second job).
    let key = headers.get("idempotency-key").map(|v| v.as_bytes());
    if key.is_some_and(|k| k.is_empty() || k.len() > 200 || !k.iter().all(|b| b.is_ascii_graphic()))
    {
        return error(
            ErrorCode::BadRequest,
            "Idempotency-Key must be 1-200 visible ASCII characters",
        );
    }
    let key = key.and_then(|k| std::str::from_utf8(k).ok());
    let id = uuid::Uuid::new_v4().simple().to_string();
    let stored = match serde_json::to_value(&plan) {
        Ok(v) => v,
        Err(e) => return error(ErrorCode::Internal, e.to_string()),
    };
    // Keys are the tenant's own: another tenant's (or the watch's) never collide with them.
    let key = key.map(|k| format!("api:{}:{k}", who.tenant));
    // The count of the tenant's jobs and the insert are one transaction: requests racing
    // each other cannot all pass the quota (N7).
    let quota = state.max_jobs_per_tenant;
    match state
        .db
        .insert_within_quota(&id, &who.tenant, key.as_deref(), &stored, quota)
    {
        Ok(Admitted::Created(id)) => {
            state.spawn(id.clone(), plan);
            (
                StatusCode::ACCEPTED,
                Json(json!({"id": id, "state": "queued"})),
            )
                .into_response()
        }
        Ok(Admitted::Existing(id)) => match state.db.get(&id) {
            Ok(Some(row)) if row.request != stored => error(
                ErrorCode::IdempotencyConflict,
                "Idempotency-Key already used for a different request",
            ),
            Ok(Some(row)) => (StatusCode::ACCEPTED, Json(view(&row))).into_response(),
            _ => error(ErrorCode::Internal, "job vanished"),
        },
        Ok(Admitted::OverQuota(n)) => error(
            ErrorCode::TooManyJobs,
            format!(
                "tenant {} has {n} unfinished jobs, the most this farm allows: wait for \
                 some to finish",
                who.tenant
            ),
        ),
        Err(e) => error(ErrorCode::DbUnavailable, e.to_string()),
    }
}

async fn get_job(
    State(state): State<Arc<AppState>>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    match state.db.get(&id).map(|r| visible(r, &who)) {
        Ok(Some(row)) => Json(view(&row)).into_response(),
        Ok(None) => error(ErrorCode::NotFound, format!("no job {id}")),
        Err(e) => error(ErrorCode::DbUnavailable, e.to_string()),
    }
}

#[derive(Deserialize)]
struct ListQuery {
    state: Option<String>,
    limit: Option<u32>,
    offset: Option<u32>,
}

async fn list_jobs(
    State(state): State<Arc<AppState>>,
    Extension(who): Extension<Principal>,
    Query(q): Query<ListQuery>,
) -> Response {
    let filter = match q.state.as_deref().map(JobState::parse) {
        Some(None) => return error(ErrorCode::BadRequest, "unknown state filter"),
        Some(s) => s,
        None => None,
    };
    let limit = q.limit.unwrap_or(50).min(500);
    let owner = (!who.admin).then_some(who.tenant.as_str());
    match state.db.list(filter, owner, limit, q.offset.unwrap_or(0)) {
        Ok(rows) => {
            Json(json!({"jobs": rows.iter().map(view).collect::<Vec<_>>(), "limit": limit}))
                .into_response()
        }
        Err(e) => error(ErrorCode::DbUnavailable, e.to_string()),
    }
}

async fn cancel_job(
    State(state): State<Arc<AppState>>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    match actions::cancel(&state, &who, &id) {
        Ok(()) => (
            StatusCode::ACCEPTED,
            Json(json!({"id": id, "state": "cancelled"})),
        )
            .into_response(),
        Err((code, why)) => error(code, why),
    }
}

async fn ready(State(state): State<Arc<AppState>>) -> Response {
    match state.db.list(None, None, 1, 0) {
        Ok(_) => "ready".into_response(),
        Err(e) => error(ErrorCode::NotReady, e.to_string()),
    }
}

/// The workers each pool needs (KEDA's `metrics-api` scaler reads
/// `pools.cpu.desired_workers`); unauthenticated like `/metrics`, and as public.
async fn scaling(State(state): State<Arc<AppState>>) -> Response {
    let s = &state.runner.scaling;
    let pools: serde_json::Map<String, serde_json::Value> = crate::scaling::Pool::ALL
        .iter()
        .map(|&p| (p.as_str().to_string(), serde_json::json!(s.figures(p))))
        .collect();
    axum::Json(serde_json::json!({
        "target_drain_seconds": s.target_drain_seconds(),
        "pools": pools,
    }))
    .into_response()
}

/// Prometheus text: the registry's counters plus the database's and the gate's figures now.
async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let jobs_by_state = crate::metrics::jobs_by_state(&state.db)
        .inspect_err(|e| tracing::warn!(error = %e, "job counts unavailable for /metrics"))
        .ok();
    let jobs_idle = crate::metrics::jobs_idle(&state.db, crate::metrics::unix_now())
        .inspect_err(|e| tracing::warn!(error = %e, "job ages unavailable for /metrics"))
        .ok();
    let running = state
        .running
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .len();
    let live = crate::metrics::Live {
        jobs_by_state,
        jobs_idle,
        running,
        gate: Some(state.runner.gate.counts()),
    };
    let mut body = state.runner.metrics.render(&live);
    state.runner.scaling.render(&mut body);
    ([("content-type", "text/plain; version=0.0.4")], body).into_response()
}
