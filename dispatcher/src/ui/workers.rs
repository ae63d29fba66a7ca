//! The workers page: each worker that finished segments in the last hour, with how many,
//! how many were retries, its busy and encode seconds, the cards it encoded on and when it
//! last finished one. An admin sees the whole fleet; a tenant what it did for the tenant's
//! jobs.
//!
//! Why from the recorded segment runs: they are what workers report to the dispatcher (their
//! done events). Live slots, the tasks in hand and each card's sessions against its budget
//! are on the workers' own `/metrics`, which the Grafana dashboard shows.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;

use super::page::{answer, frame, read, utc};
use super::session::Session;
use super::UiState;

/// The window the page covers.
const WINDOW_MS: i64 = 3_600_000;

/// `GET /ui/workers`.
pub async fn show(State(state): State<UiState>, session: Session) -> Response {
    let now_ms = crate::db::now_ms();
    let owner = (!session.who.admin).then(|| session.who.tenant.clone());
    let db = state.db.clone();
    let workers = match read(&session, move || {
        db.worker_runs(now_ms - WINDOW_MS, owner.as_deref())
    })
    .await
    {
        Ok(w) => w,
        Err(page) => return page,
    };
    let body = html! {
        h2 { "Workers that finished segments in the last hour" }
        @if workers.is_empty() {
            p { "None." }
        } @else {
            table.workers id="workers" {
                thead { tr {
                    th { "Worker" } th { "Segments" } th { "Retried" } th { "Busy (s)" }
                    th { "Encode (s)" } th { "Cards" } th { "Last finished (UTC)" }
                } }
                tbody {
                    @for w in &workers {
                        tr {
                            td.worker { (w.worker) }
                            td { (w.segments) }
                            td { (w.retried) }
                            td { (format!("{:.1}", w.busy_s)) }
                            td { (format!("{:.1}", w.media_s)) }
                            td { @if w.cards.is_empty() { "CPU" } @else { "GPU " (w.cards) } }
                            td { (utc(w.last_ms / 1000)) " (" (((now_ms - w.last_ms) / 1000).max(0)) " s ago)" }
                        }
                    }
                }
            }
        }
        p.note {
            "From the segments workers reported done. Idle workers, their slots, the tasks in "
            "hand and each card's encoder sessions against its budget are on the workers' "
            "/metrics (the Grafana dashboard's worker and card panels)."
        }
    };
    answer(StatusCode::OK, frame("Workers", Some(&session), None, body))
}
