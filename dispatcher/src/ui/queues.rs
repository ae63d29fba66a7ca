//! The queues page: for each farm queue the messages waiting and the consumers attached, and
//! its dead-letter queue's depth; the dead letters forwarded since the dispatcher started;
//! the priority gate's window; jobs by state.
//!
//! Why from the dispatcher's own queue handle: it is the one connection the dashboard has to
//! the broker, and the figures are the ones the dispatcher itself decides by.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use tessera_engine::dead_letters::{DEAD_LETTER_SOURCES, DROPPED, NAMED_JOB};
use tessera_farm::queue::dead_letter_queue;

use super::page::{answer, frame};
use super::session::Session;
use super::UiState;

/// One queue's row: name, waiting, consumers, dead-letter depth (None: the broker did not say).
struct Row {
    name: &'static str,
    waiting: Option<u32>,
    consumers: Option<u32>,
    dead: Option<u32>,
}

/// `GET /ui/queues`.
pub async fn show(State(state): State<UiState>, session: Session) -> Response {
    let queue = &state.queue;
    // The farm's task and event queues (those whose dead letters the dispatcher reads), all
    // asked at once: each answer is a broker round trip (a passive declare).
    let rows = futures_util::future::join_all(DEAD_LETTER_SOURCES.iter().map(|&name| async move {
        let dead = dead_letter_queue(name);
        let (waiting, consumers, dead) = tokio::join!(
            queue.waiting(name),
            queue.consumers(name),
            queue.waiting(&dead)
        );
        Row {
            name,
            waiting: waiting.ok(),
            consumers: consumers.ok(),
            dead: dead.ok(),
        }
    }))
    .await;
    let gate = state.gate.counts();
    let db = state.db.clone();
    let by_state = tokio::task::spawn_blocking(move || crate::metrics::jobs_by_state(&db))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let shown = |n: Option<u32>| n.map_or_else(|| "?".to_string(), |n| n.to_string());
    let body = html! {
        table.queues id="queues" {
            thead { tr { th { "Queue" } th { "Waiting" } th { "Consumers" } th { "Dead letters waiting" } } }
            tbody {
                @for r in &rows {
                    tr { td { code { (r.name) } } td { (shown(r.waiting)) } td { (shown(r.consumers)) } td { (shown(r.dead)) } }
                }
            }
        }
        h2 { "Dead letters since start" }
        p id="dead-letters" {
            (NAMED_JOB.load(Ordering::Relaxed)) " failed their job; "
            (DROPPED.load(Ordering::Relaxed)) " named no job and were dropped."
        }
        h2 { "Priority gate" }
        p { (gate.admitted) " segments admitted of a window of " (gate.window) "; " (gate.waiting) " waiting for admission." }
        h2 { "Jobs by state" }
        table.states {
            tbody { @for (s, n) in &by_state { tr { td { (s.as_str()) } td { (n) } } } }
        }
    };
    answer(StatusCode::OK, frame("Queues", Some(&session), None, body))
}
