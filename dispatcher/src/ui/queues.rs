//! The queues page: for each farm queue the messages waiting and the consumers attached, and
//! its dead-letter queue's depth; each pool's backlog, the age of its oldest segment not done,
//! its measured throughput and the workers it needs against those reporting; the dead letters
//! forwarded since the dispatcher started; the priority gate's window; jobs by state.
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
        h2 { "Pools" }
        (pools(&state))
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

/// Each pool's backlog and how old its oldest segment not done is (queue, gate and in flight),
/// the media seconds a worker encodes per second, the workers the autoscaler is told to run
/// (`/scaling`) and the workers of the pool reporting now.
fn pools(state: &UiState) -> maud::Markup {
    use crate::scaling::Pool;
    use tessera_model::wire::{QUEUE_ENCODE_CPU, QUEUE_ENCODE_GPU};
    let seen = state.fleet.seen(std::time::Instant::now());
    let reporting = |queue: &str| seen.iter().filter(|s| s.status.queue == queue).count();
    html! {
        table.pools id="pools" {
            thead { tr {
                th { "Pool" } th { "Segments not done" } th { "Video in them (s)" }
                th { "Oldest (s)" } th { "Per worker (media s/s)" } th { "Workers needed" }
                th { "Workers reporting" }
            } }
            tbody {
                @for pool in Pool::ALL {
                    @let f = state.scaling.figures(pool);
                    @let queue = if pool == Pool::Cpu { QUEUE_ENCODE_CPU } else { QUEUE_ENCODE_GPU };
                    tr {
                        td { (pool.as_str()) }
                        td { (f.backlog_segments) }
                        td { (format!("{:.0}", f.backlog_segment_seconds)) }
                        td { (format!("{:.0}", f.oldest_backlog_seconds)) }
                        td { (format!("{:.2}", f.worker_throughput)) }
                        td { (f.desired_workers) }
                        td { (reporting(queue)) }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::super::tests::{dashboard_with, memory_db, no_backlog, send, sign_in, OPS};
    use crate::scaling::Pool;

    /// The pools table: a planned job's segments and seconds in the CPU pool's backlog, one of
    /// them done, the workers it needs, and the CPU workers reporting now.
    #[tokio::test]
    async fn the_pools_show_the_backlog_the_workers_needed_and_those_reporting() {
        let scaling = no_backlog();
        scaling.planned("j1", Pool::Cpu, &[4.0, 4.0, 2.0], &[]);
        scaling.segment_done("j1", 0, 2.0);
        let fleet = crate::fleet::Fleet::default();
        let report = |worker: &str, queue: &str| tessera_model::wire::WorkerStatus {
            v: tessera_model::wire::WIRE_VERSION,
            worker: worker.into(),
            release: "0.1.0".into(),
            queue: queue.into(),
            slots: 2,
            draining: None,
            unfit: None,
            tasks: vec![],
            cards: vec![],
        };
        fleet.heard(report("c1", "tessera.encode.cpu"), Instant::now());
        fleet.heard(report("c2", "tessera.encode.cpu"), Instant::now());
        fleet.heard(report("g1", "tessera.encode.gpu"), Instant::now());
        let (app, _) = dashboard_with(memory_db(), fleet, scaling);
        let (ops, _) = sign_in(&app, OPS).await;
        let page = send(&app, "/ui/queues", &ops, None).await.body;
        let row = |pool: &str| {
            let at = page.find(&format!("<tr><td>{pool}</td>")).expect(pool);
            page[at..].split("</tr>").next().unwrap().to_string()
        };
        let cpu = row("cpu");
        assert!(
            cpu.starts_with("<tr><td>cpu</td><td>2</td><td>6</td>"),
            "{cpu}"
        );
        assert!(
            cpu.ends_with("<td>1</td><td>2</td>"),
            "one worker needed, two reporting: {cpu}"
        );
        let gpu = row("gpu");
        assert!(
            gpu.starts_with("<tr><td>gpu</td><td>0</td><td>0</td><td>0</td>"),
            "{gpu}"
        );
        assert!(gpu.ends_with("<td>0</td><td>1</td>"), "{gpu}");
    }
}
