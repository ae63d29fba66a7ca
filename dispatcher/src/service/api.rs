//! The HTTP API: jobs under a bearer token; health, readiness and metrics without.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use tessera_farm::model::ApiJob;
use tessera_farm::ErrorCode;

use super::db::{Db, JobRow, JobState};
use super::jobspec::{validate, Invalid};
use super::runner::{Runner, S3Uri};

/// State shared by the handlers.
pub struct AppState {
    /// Job database.
    pub db: Db,
    /// Runs accepted jobs.
    pub runner: Arc<Runner>,
    /// Accepted bearer tokens.
    pub tokens: Vec<String>,
    /// Buckets jobs may read from and write to.
    pub buckets: Vec<String>,
    /// Bucket that `POST /v1/uploads` with only a filename puts uploads in ("": none set).
    pub upload_bucket: String,
    /// Default segment length.
    pub segment_seconds: f64,
    /// Cancellation handles of running jobs.
    pub running: Mutex<HashMap<String, CancellationToken>>,
}

impl AppState {
    /// Starts a job in the background. Its event route exists when this returns, so no
    /// event of the job (a resumed one has events waiting) can arrive before it.
    pub fn spawn(self: &Arc<Self>, id: String, plan: super::runner::JobPlan) {
        let events = self.runner.router.register(&id);
        let cancel = CancellationToken::new();
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), cancel.clone());
        let state = self.clone();
        tokio::spawn(async move {
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
        });
    }
}

/// The HTTP status of an error code (the catalog's, as axum's type).
pub fn status(code: &ErrorCode) -> StatusCode {
    StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// A JSON error with a stable code, answered with the code's HTTP status.
pub fn error(code: ErrorCode, message: impl Into<String>) -> Response {
    (
        status(&code),
        Json(json!({"error": {"code": code, "message": message.into()}})),
    )
        .into_response()
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn auth(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::as_bytes);
    let ok = presented.is_some_and(|p| {
        // Check every token so the time taken does not tell which one nearly matched.
        state
            .tokens
            .iter()
            .fold(false, |acc, t| acc | constant_time_eq(p, t.as_bytes()))
    });
    if ok {
        next.run(req).await
    } else {
        error(ErrorCode::Unauthorized, "a valid bearer token is required")
    }
}

/// The router: `/v1/*` behind the token, the rest open.
pub fn router(state: Arc<AppState>) -> Router {
    let v1 = Router::new()
        .route("/v1/jobs", get(list_jobs).post(create_job))
        .route("/v1/jobs/{id}", get(get_job).delete(cancel_job))
        .route("/v1/uploads", post(create_upload))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .merge(v1)
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .route(
            "/openapi.json",
            get(|| async { Json(super::openapi::document()) }),
        )
        .layer(DefaultBodyLimit::max(64 * 1024))
        .with_state(state)
}

async fn create_job(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let job: ApiJob = match serde_json::from_slice(&body) {
        Ok(j) => j,
        Err(e) => return error(ErrorCode::BadRequest, format!("invalid job JSON: {e}")),
    };
    let plan = match validate(&job, &state.buckets, state.segment_seconds) {
        Ok(p) => p,
        Err((code, msg)) => return error(code, msg),
    };
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
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok());
    if key.is_some_and(|k| k.is_empty() || k.len() > 200) {
        return error(
            ErrorCode::BadRequest,
            "Idempotency-Key must be 1-200 characters",
        );
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    let stored = match serde_json::to_value(&plan) {
        Ok(v) => v,
        Err(e) => return error(ErrorCode::Internal, e.to_string()),
    };
    match state.db.insert(&id, key, &stored) {
        Ok((id, true)) => {
            state.spawn(id.clone(), plan);
            (
                StatusCode::ACCEPTED,
                Json(json!({"id": id, "state": "queued"})),
            )
                .into_response()
        }
        Ok((id, false)) => match state.db.get(&id) {
            Ok(Some(row)) => (StatusCode::ACCEPTED, Json(view(&row))).into_response(),
            _ => error(ErrorCode::Internal, "job vanished"),
        },
        Err(e) => error(ErrorCode::DbUnavailable, e.to_string()),
    }
}

/// How long an upload URL stays valid.
const UPLOAD_EXPIRES: std::time::Duration = std::time::Duration::from_secs(3600);

/// The body of `POST /v1/uploads`: an explicit object, or a file name placed in the upload bucket.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UploadRequest {
    bucket: Option<String>,
    key: Option<String>,
    filename: Option<String>,
}

/// Reduces a client's file name to a safe last key segment: its base name, with every
/// character outside `[A-Za-z0-9._-]` replaced by `_`, no leading dots, at most 100 bytes.
/// Why: the name comes from the user's machine and ends up inside an object key.
fn sanitise_filename(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let safe = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    let clean: String = base
        .chars()
        .map(|c| if safe(c) { c } else { '_' })
        .collect();
    let clean: String = clean.trim_start_matches('.').chars().take(100).collect();
    if clean.is_empty() {
        "upload".into()
    } else {
        clean
    }
}

/// Where an upload goes (bucket allowed, key valid), or (code, message).
fn upload_target(state: &AppState, body: &[u8]) -> Result<S3Uri, Invalid> {
    let invalid = |m: String| (ErrorCode::InvalidUpload, m);
    let req: UploadRequest = serde_json::from_slice(body).map_err(|e| {
        let msg = format!("invalid upload JSON: {e}");
        (ErrorCode::BadRequest, msg)
    })?;
    let (bucket, key) = match (req.bucket, req.key, req.filename) {
        (Some(b), Some(k), None) => (b, k),
        (None, None, Some(f)) => {
            let id = uuid::Uuid::new_v4().simple();
            let key = format!("uploads/{id}/{}", sanitise_filename(&f));
            (state.upload_bucket.clone(), key)
        }
        _ => {
            return Err(invalid(
                "give \"bucket\" and \"key\", or \"filename\"".into(),
            ))
        }
    };
    if !state.buckets.contains(&bucket) {
        let msg = format!("upload bucket '{bucket}' is not one this farm may use");
        return Err((ErrorCode::BucketNotAllowed, msg));
    }
    S3Uri::parse(&format!("s3://{bucket}/{key}")).map_err(|e| invalid(format!("upload: {e}")))
}

/// Answers a presigned PUT URL (valid 1 h) so a client uploads its input straight to S3.
async fn create_upload(State(state): State<Arc<AppState>>, body: axum::body::Bytes) -> Response {
    let uri = match upload_target(&state, &body) {
        Ok(u) => u,
        Err((code, msg)) => return error(code, msg),
    };
    let store = state.runner.s3.store(&uri.bucket);
    match store.presign_put(&uri.key, UPLOAD_EXPIRES).await {
        // The URL is a credential for one object: it goes to the caller, never to the log.
        Ok(url) => {
            tracing::info!(input = %uri, "upload URL issued");
            let expires_in = UPLOAD_EXPIRES.as_secs();
            let body = json!({"url": url, "input": uri.to_string(), "expires_in": expires_in});
            (StatusCode::CREATED, Json(body)).into_response()
        }
        Err(e) => {
            let msg = format!("{uri}: {e}");
            error(ErrorCode::StoreUnavailable, msg)
        }
    }
}

/// The output URIs of a job: what was delivered when done, else what was asked for.
fn outputs(row: &JobRow, report: &serde_json::Value) -> serde_json::Value {
    let field = |list: Option<&serde_json::Value>, name: &str| -> Vec<serde_json::Value> {
        list.and_then(|l| l.as_array())
            .map(|l| l.iter().filter_map(|o| o.get(name).cloned()).collect())
            .unwrap_or_default()
    };
    let delivered = field(report.get("outputs"), "destination");
    if delivered.is_empty() {
        let asked = field(row.request.get("outputs"), "destination");
        // Requested destinations are stored as {bucket, key}.
        let uris = asked.iter().filter_map(|d| {
            Some(format!(
                "s3://{}/{}",
                d.get("bucket")?.as_str()?,
                d.get("key")?.as_str()?
            ))
        });
        serde_json::Value::from(uris.collect::<Vec<_>>())
    } else {
        serde_json::Value::from(delivered)
    }
}

/// The API view of a job row.
pub fn view(row: &JobRow) -> serde_json::Value {
    let percent = if row.state == JobState::Done {
        100.0
    } else if row.segments_total > 0 {
        (f64::from(row.segments_done) * 100.0 / f64::from(row.segments_total) * 10.0).round() / 10.0
    } else {
        0.0
    };
    let report = row.report.clone().unwrap_or(serde_json::Value::Null);
    json!({
        "id": row.id,
        "state": row.state,
        "segments_total": row.segments_total,
        "segments_done": row.segments_done,
        "percent": percent,
        "input": row.request.get("input"),
        "outputs": outputs(row, &report),
        "priority": row.request.get("priority"),
        "hardware": row.request.get("hardware"),
        "encode_fps": report.get("encode_fps"),
        "frames": report.get("frames"),
        "median_segment_overhead_s": report.get("median_segment_overhead_s"),
        "psnr": report.get("quality").and_then(|q| q.get("psnr")),
        "timings": {"created_at": row.created_at, "updated_at": row.updated_at, "wall_s": report.get("wall_s")},
        "error": row.error_code.as_ref().map(|c| json!({"code": c, "message": row.error_message})),
    })
}

async fn get_job(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    match state.db.get(&id) {
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

async fn list_jobs(State(state): State<Arc<AppState>>, Query(q): Query<ListQuery>) -> Response {
    let filter = match q.state.as_deref().map(JobState::parse) {
        Some(None) => return error(ErrorCode::BadRequest, "unknown state filter"),
        Some(s) => s,
        None => None,
    };
    let limit = q.limit.unwrap_or(50).min(500);
    match state.db.list(filter, limit, q.offset.unwrap_or(0)) {
        Ok(rows) => {
            Json(json!({"jobs": rows.iter().map(view).collect::<Vec<_>>(), "limit": limit}))
                .into_response()
        }
        Err(e) => error(ErrorCode::DbUnavailable, e.to_string()),
    }
}

async fn cancel_job(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    let row = match state.db.get(&id) {
        Ok(Some(r)) => r,
        Ok(None) => return error(ErrorCode::NotFound, format!("no job {id}")),
        Err(e) => return error(ErrorCode::DbUnavailable, e.to_string()),
    };
    if row.state.is_final() {
        return error(
            ErrorCode::JobFinished,
            format!("job {id} is already {}", row.state.as_str()),
        );
    }
    if let Some(token) = state
        .running
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&id)
    {
        token.cancel();
    }
    let _ = state.db.fail(
        &id,
        JobState::Cancelled,
        ErrorCode::Cancelled.as_str(),
        "cancelled by request",
    );
    (
        StatusCode::ACCEPTED,
        Json(json!({"id": id, "state": "cancelled"})),
    )
        .into_response()
}

async fn ready(State(state): State<Arc<AppState>>) -> Response {
    match state.db.list(None, 1, 0) {
        Ok(_) => "ready".into_response(),
        Err(e) => error(ErrorCode::NotReady, e.to_string()),
    }
}

/// Prometheus text: the registry's counters plus the database's and the gate's figures now.
async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let jobs_by_state = super::metrics::jobs_by_state(&state.db)
        .inspect_err(|e| tracing::warn!(error = %e, "job counts unavailable for /metrics"))
        .ok();
    let running = state
        .running
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .len();
    let live = super::metrics::Live {
        jobs_by_state,
        running,
        gate: Some(state.runner.gate.counts()),
    };
    let body = state.runner.metrics.render(&live);
    ([("content-type", "text/plain; version=0.0.4")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::{constant_time_eq, sanitise_filename};

    #[test]
    fn upload_filenames_are_sanitised() {
        assert_eq!(sanitise_filename("My Video (1).mp4"), "My_Video__1_.mp4");
        assert_eq!(sanitise_filename("../../etc/passwd"), "passwd");
        assert_eq!(sanitise_filename("C:\\Users\\a\\clip.mov"), "clip.mov");
        assert_eq!(sanitise_filename(".."), "upload");
        assert_eq!(sanitise_filename("..hidden.mp4"), "hidden.mp4");
        assert_eq!(sanitise_filename(""), "upload");
        assert_eq!(sanitise_filename(&"x".repeat(300)).len(), 100);
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
