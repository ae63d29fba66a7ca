//! The workers page: each worker that finished segments in the last hour, with how many,
//! how many were retries, its busy and encode seconds, the cards it encoded on and when it
//! last finished one. An admin sees the whole fleet; a tenant what it did for the tenant's
//! jobs.
//!
//! Above them, the fleet now (fleet.rs): each worker's state, slots and tasks in hand and each
//! card's sessions against its budget, from the workers' status reports.
//!
//! Why the last hour from the recorded segment runs: they are what workers report to the
//! dispatcher in their done events, kept in the database; the reports are kept only in memory.

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
    let seen = state.fleet.seen(std::time::Instant::now());
    let jobs: Vec<String> = seen
        .iter()
        .flat_map(|s| s.status.tasks.iter().map(|t| t.job_id.clone()))
        .collect();
    let (workers, visible) = match read(&session, move || {
        let visible = visible_jobs(&db, jobs, owner.as_deref())?;
        Ok((
            db.worker_runs(now_ms - WINDOW_MS, owner.as_deref())?,
            visible,
        ))
    })
    .await
    {
        Ok(w) => w,
        Err(page) => return page,
    };
    let body = html! {
        (super::fleet::live(&seen, &visible))
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
            "Workers now: from the status reports workers send every "
            (tessera_model::wire::STATUS_EVERY_SECONDS) " s (a worker unheard for "
            (tessera_model::wire::STATUS_FORGET_SECONDS) " s is dropped). The last hour: from "
            "the segments workers reported done."
        }
    };
    answer(StatusCode::OK, frame("Workers", Some(&session), None, body))
}

/// Which of `jobs` the viewer may see: all for an admin (`owner` None), else the tenant's own.
fn visible_jobs(
    db: &crate::db::Db,
    mut jobs: Vec<String>,
    owner: Option<&str>,
) -> Result<super::fleet::Visible, tessera_farm::FarmError> {
    jobs.sort();
    jobs.dedup();
    let own = match owner {
        Some(tenant) if !jobs.is_empty() => Some(db.owned_among(tenant, &jobs)?),
        _ => None,
    };
    Ok(jobs
        .into_iter()
        .map(|id| {
            let may = owner.is_none() || own.as_ref().is_some_and(|o| o.contains(&id));
            (id, may)
        })
        .collect())
}
