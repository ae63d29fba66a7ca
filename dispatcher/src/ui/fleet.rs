//! The live part of the workers page: every worker that reported in the last two minutes,
//! with its state (taking work, draining and why, holding back and why, silent), its slots and
//! the tasks in hand, and each card's sessions against its budget, its use and its health.
//!
//! Why from the status reports (fleet.rs): they are the workers' own books, sent every five
//! seconds; the dispatcher cannot reach workers' `/metrics` on pods and spot machines.
//! A tenant sees the fleet (it runs the tenant's jobs too) but only its own jobs among the
//! tasks in hand; others' tasks are counted, not named.

use std::collections::HashMap;
use std::time::Duration;

use maud::{html, Markup};
use tessera_model::wire::{TaskRef, STATUS_SILENT_SECONDS};

use crate::fleet::Seen;

/// Whether the viewer may see each job of the tasks in hand: an admin every one, a tenant its
/// own. A job missing here (another tenant's, pruned, another farm's) is counted, not named.
pub type Visible = HashMap<String, bool>;

/// The summary line, the workers table and the cards table.
pub fn live(seen: &[Seen], visible: &Visible) -> Markup {
    let silent = Duration::from_secs(STATUS_SILENT_SECONDS);
    let draining = seen.iter().filter(|s| s.status.draining.is_some()).count();
    let quiet = seen.iter().filter(|s| s.age > silent).count();
    let slots: u32 = seen.iter().map(|s| s.status.slots).sum();
    let busy: usize = seen.iter().map(|s| segments(s).len()).sum();
    let cards: Vec<(&Seen, &tessera_model::wire::CardStatus)> = seen
        .iter()
        .flat_map(|s| s.status.cards.iter().map(move |c| (s, c)))
        .collect();
    let (enc_used, enc_budget) = cards.iter().fold((0, 0), |(u, b), (_, c)| {
        (u + c.encode_in_use, b + c.encode_budget)
    });
    html! {
        h2 { "Workers now" }
        p.summary id="fleet-summary" {
            (seen.len()) " reporting, " (draining) " draining, " (quiet) " silent; "
            (busy) " of " (slots) " segment slots busy; "
            (cards.len()) " cards, " (enc_used) " of " (enc_budget) " NVENC sessions in use."
        }
        @if seen.is_empty() {
            p { "No worker has reported in the last two minutes." }
        } @else {
            (workers_table(seen, visible, silent))
        }
        @if !cards.is_empty() {
            h2 { "Cards now" }
            (cards_table(&cards))
        }
    }
}

/// The worker's segment tasks (those that take a slot).
fn segments(s: &Seen) -> Vec<&tessera_model::wire::TaskInHand> {
    let tasks = &s.status.tasks;
    tasks
        .iter()
        .filter(|t| matches!(t.task, TaskRef::Segment(_)))
        .collect()
}

fn workers_table(seen: &[Seen], visible: &Visible, silent: Duration) -> Markup {
    html! {
        table.fleet id="fleet" {
            thead { tr {
                th { "Worker" } th { "State" } th { "Queue" } th { "Segment slots" }
                th { "Tasks in hand" } th { "Release" } th { "Last report" }
            } }
            tbody {
                @for s in seen {
                    @let st = &s.status;
                    tr {
                        td.worker { (st.worker) }
                        td { (state(s, silent)) }
                        td { (st.queue) }
                        td { (segments(s).len()) " / " (st.slots) }
                        td { (tasks(s, visible)) }
                        td { (st.release) }
                        td { (s.age.as_secs()) " s ago" }
                    }
                }
            }
        }
    }
}

/// Taking work, draining (why), holding back (why) or silent (for how long).
fn state(s: &Seen, silent: Duration) -> Markup {
    let st = &s.status;
    html! {
        @if s.age > silent {
            span.wstate.silent { "silent " (s.age.as_secs()) " s" }
        } @else if let Some(why) = &st.draining {
            span.wstate.draining { "draining: " (why) }
        } @else if let Some(why) = &st.unfit {
            span.wstate.unfit { "holding back: " (why) }
        } @else {
            span.wstate.ok { "taking work" }
        }
    }
}

/// Each task in hand the viewer may see, linked to its job; the others counted.
fn tasks(s: &Seen, visible: &Visible) -> Markup {
    let (mine, hidden): (Vec<_>, Vec<_>) = s
        .status
        .tasks
        .iter()
        .partition(|t| visible.get(&t.job_id).copied().unwrap_or(false));
    html! {
        @if s.status.tasks.is_empty() {
            "none"
        } @else {
            ul.tasks {
                @for t in &mine {
                    li {
                        a href=(format!("/ui/jobs/{}", t.job_id)) { (t.job_id) }
                        " " (t.task.to_string()) " (" (t.running_s) " s)"
                    }
                }
                @if !hidden.is_empty() {
                    li.hidden { (hidden.len()) " of other jobs" }
                }
            }
        }
    }
}

fn cards_table(cards: &[(&Seen, &tessera_model::wire::CardStatus)]) -> Markup {
    let pct = |p: Option<u32>| p.map_or("-".to_string(), |p| format!("{p}%"));
    html! {
        table.cards id="cards" {
            thead { tr {
                th { "Worker" } th { "Card" } th { "NVENC sessions" } th { "NVDEC sessions" }
                th { "Other processes' NVENC" } th { "NVENC use" } th { "NVDEC use" } th { "Health" }
            } }
            tbody {
                @for (s, c) in cards {
                    tr {
                        td.worker { (s.status.worker) }
                        td { (c.index) ": " (c.name) }
                        td.sessions {
                            meter min="0" max=(c.encode_budget.max(1)) value=(c.encode_in_use) {}
                            " " (c.encode_in_use) " / " (c.encode_budget)
                            @if c.encode_budget > 0 && c.encode_in_use >= c.encode_budget { " (full)" }
                        }
                        td { (c.decode_in_use) " / " (c.decode_budget) }
                        td { (c.foreign_encode) }
                        td { (pct(c.encoder_pct)) }
                        td { (pct(c.decoder_pct)) }
                        td {
                            @if c.healthy {
                                span.health.ok { "ok" }
                                @if let Some(f) = &c.fault { " (" (f) ")" }
                            } @else {
                                span.health.out { "out: " (c.fault.as_deref().unwrap_or("unhealthy")) }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use tessera_model::wire::{CardStatus, TaskInHand, WorkerStatus, WIRE_VERSION};

    use super::super::tests::{dashboard_with, memory_db, send, sign_in, ACME, OPS};
    use super::*;
    use crate::fleet::Fleet;

    fn task(job: &str, task: TaskRef, running_s: u64) -> TaskInHand {
        TaskInHand {
            job_id: job.into(),
            task,
            queue: "tessera.encode.gpu".into(),
            running_s,
        }
    }

    fn gpu_worker() -> WorkerStatus {
        let card = |index, in_use, healthy, fault: Option<&str>| CardStatus {
            index,
            name: "Tesla T4".into(),
            encode_in_use: in_use,
            encode_budget: if healthy { 3 } else { 0 },
            decode_in_use: 1,
            decode_budget: 4,
            foreign_encode: 0,
            encoder_pct: Some(88),
            decoder_pct: None,
            healthy,
            fault: fault.map(str::to_string),
        };
        WorkerStatus {
            v: WIRE_VERSION,
            worker: "<b>gpu-a</b>".into(),
            release: "0.1.0".into(),
            queue: "tessera.encode.gpu".into(),
            slots: 4,
            draining: None,
            unfit: None,
            tasks: vec![
                task("a1", TaskRef::Segment(3), 12),
                task("b1", TaskRef::Segment(0), 4),
                task("a1", TaskRef::Stitch(0), 2),
            ],
            cards: vec![
                card(0, 3, true, None),
                card(1, 0, false, Some("Xid 79 <fell off>")),
            ],
        }
    }

    fn cpu_worker(name: &str, draining: Option<&str>) -> WorkerStatus {
        WorkerStatus {
            worker: name.into(),
            queue: "tessera.encode.cpu".into(),
            slots: 2,
            draining: draining.map(str::to_string),
            tasks: vec![],
            cards: vec![],
            ..gpu_worker()
        }
    }

    /// The fleet now: states, slots, the tasks in hand (named for their tenant only), each
    /// card's sessions against its budget and its health, every worker string escaped.
    #[tokio::test]
    async fn the_fleet_now_shows_slots_tasks_cards_and_keeps_tenants_apart() {
        let db = memory_db();
        db.insert("a1", "acme", None, &serde_json::json!({}))
            .unwrap();
        db.insert("b1", "beta", None, &serde_json::json!({}))
            .unwrap();
        let fleet = Fleet::default();
        let now = Instant::now();
        let old = now - Duration::from_secs(STATUS_SILENT_SECONDS + 5);
        fleet.heard(gpu_worker(), now);
        fleet.heard(cpu_worker("cpu-b", Some("spot_interruption")), now);
        fleet.heard(cpu_worker("cpu-c", None), old);
        let (app, _) = dashboard_with(db, fleet, super::super::tests::no_backlog());

        let (ops, _) = sign_in(&app, OPS).await;
        let page = send(&app, "/ui/workers", &ops, None).await.body;
        assert!(
            page.contains("3 reporting, 1 draining, 1 silent; 2 of 8 segment slots busy; 2 cards, 3 of 3 NVENC sessions in use."),
            "{page}"
        );
        assert!(page.contains("&lt;b&gt;gpu-a&lt;/b&gt;") && !page.contains("<b>gpu-a"));
        assert!(page.contains("draining: spot_interruption"), "{page}");
        assert!(page.contains("silent "), "{page}");
        assert!(
            page.contains("<a href=\"/ui/jobs/a1\">a1</a> segment 3 (12 s)"),
            "{page}"
        );
        assert!(
            page.contains("<a href=\"/ui/jobs/b1\">b1</a> segment 0 (4 s)"),
            "{page}"
        );
        assert!(page.contains("a1</a> stitch of output 0 (2 s)"), "{page}");
        assert!(page.contains("3 / 3 (full)"), "{page}");
        assert!(
            page.contains("<meter min=\"0\" max=\"3\" value=\"3\">"),
            "{page}"
        );
        assert!(page.contains("88%"), "{page}");
        assert!(page.contains("out: Xid 79 &lt;fell off&gt;"), "{page}");

        let (acme, _) = sign_in(&app, ACME).await;
        let page = send(&app, "/ui/workers", &acme, None).await.body;
        assert!(page.contains("/ui/jobs/a1"), "{page}");
        assert!(
            // Not `contains("b1")`: the page's random CSRF token holds "b1" about one time
            // in five.
            !page.contains("/ui/jobs/b1") && !page.contains(">b1<") && !page.contains("b1 segment"),
            "another tenant's job is not named: {page}"
        );
        assert!(page.contains("1 of other jobs"), "{page}");
    }
}
