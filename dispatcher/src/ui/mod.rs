//! The operator's dashboard at `/ui`: jobs (filtered, paged), a job's page with its segments
//! and cancel/retry, the queues and the last day's throughput, as server-rendered HTML from the dispatcher itself.
//!
//! Why in the dispatcher and without JavaScript: it reads the same database and queue handle
//! as the API, ships in the same binary (the stylesheet is compiled in), and a page of plain
//! HTML forms leaves no script for an attacker's string to become. Safe by construction:
//! - every value goes through maud's `html!`, which escapes it (file names, error texts);
//! - every response carries a Content-Security-Policy that allows no script at all, only
//!   this origin's stylesheet and forms, and no framing ([`security_headers`]);
//! - every POST carries a CSRF token derived from the session cookie (session.rs).
//!
//! Layout: session.rs (cookie, CSRF), page.rs (the frame every page shares), jobs.rs (the
//! list), job.rs (one job), queues.rs, throughput.rs (the last day as SVG), workers.rs with
//! fleet.rs (the fleet now, the last hour's runs), actions.rs (login, logout, cancel, retry).

mod actions;
#[cfg(test)]
mod bench;
mod fleet;
mod job;
mod jobs;
mod page;
mod queues;
mod segment_quality;
mod session;
#[cfg(test)]
mod tests;
mod throughput;
mod timeline;
mod workers;

use std::sync::Arc;

use axum::extract::{FromRef, Request};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};

use crate::auth::Principal;
use crate::db::Db;
use crate::error::Refusal;

/// What the dashboard's pages may load: this origin's stylesheet, nothing else; forms post
/// only here; no page may frame it.
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
                       form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The stylesheet, compiled into the binary.
const STYLE: &str = include_str!("style.css");

/// What the dashboard reads and does: the API's database, queue handle, priority gate, and
/// its job actions. Why narrower than the API's `AppState`: the pages need no runner, and
/// the unit tests build one over an in-memory database and queue.
#[derive(Clone)]
pub struct UiState {
    /// The job database.
    pub db: Db,
    /// The dispatcher's broker connection (queue depths).
    pub queue: Arc<dyn tessera_farm::queue::Queue>,
    /// The priority gate (its window and what waits).
    pub gate: Arc<tessera_engine::PublishGate>,
    /// Cancel and retry, as the API does them.
    pub control: Arc<dyn Control>,
    /// The workers' newest status reports (the workers page's live part).
    pub fleet: crate::fleet::Fleet,
    /// The pools' backlog and the workers they need (the queues page).
    pub scaling: Arc<crate::scaling::Scaling>,
}

/// The job actions the dashboard's forms take (api/actions.rs in the dispatcher).
pub trait Control: Send + Sync {
    /// Cancels job `id` for `who`.
    fn cancel(&self, who: &Principal, id: &str) -> Result<(), Refusal>;
    /// Runs failed or cancelled job `id` again for `who`; the new job's id.
    fn retry(&self, who: &Principal, id: &str) -> Result<String, Refusal>;
}

/// The dashboard's routes, for the API's router to merge; `tokens` are the API's.
pub fn router<S>(tokens: crate::auth::Tokens) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    UiState: FromRef<S>,
{
    let keys = Arc::new(session::Keys::generate(tokens));
    Router::new()
        .route("/ui", get(|| async { Redirect::to("/ui/jobs") }))
        .route("/ui/", get(|| async { Redirect::to("/ui/jobs") }))
        .route("/ui/login", get(actions::login_form).post(actions::login))
        .route("/ui/logout", post(actions::logout))
        .route("/ui/jobs", get(jobs::list))
        .route("/ui/jobs/{id}", get(job::show))
        .route("/ui/jobs/{id}/{action}", post(actions::act))
        .route("/ui/queues", get(queues::show))
        .route("/ui/throughput", get(throughput::show))
        .route("/ui/workers", get(workers::show))
        .route("/ui/style.css", get(style))
        .layer(Extension(keys))
        .layer(axum::middleware::from_fn(security_headers))
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

/// Adds the dashboard's protections to every answer under `/ui`: the CSP, no MIME sniffing,
/// no framing (for browsers without `frame-ancestors`), no referrer (job ids stay here), and
/// no caching of pages that show a tenant's jobs.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    resp
}
