//! How long the dashboard's pages take with 10,000 jobs in the database and 500 workers
//! reporting (docs/operations.md, Dashboard): each page through the router in-process, the
//! median of 15 requests.
//!
//! Ignored (it fills a database for a few seconds); run it with
//! `cargo test -p tessera-dispatcher ui::bench -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use super::tests::{dashboard_with, send, sign_in};
use crate::db::{Db, JobState};

/// Jobs in the database.
const JOBS: usize = 10_000;
/// Segment runs recorded per job.
const RUNS: u32 = 5;
/// The slowest median a page may take.
const LIMIT: Duration = Duration::from_millis(100);
/// Workers reporting (a tenth of them with two cards), each with 4 tasks in hand.
const WORKERS: usize = 500;

/// `WORKERS` workers' status reports, their tasks on jobs of every tenant.
fn fleet() -> crate::fleet::Fleet {
    use tessera_model::wire::{CardStatus, TaskInHand, TaskRef, WorkerStatus, WIRE_VERSION};
    let fleet = crate::fleet::Fleet::default();
    let now = Instant::now();
    for w in 0..WORKERS {
        let task = |t: usize| TaskInHand {
            job_id: format!("job{:05}", (w * 4 + t) % (JOBS - 1)),
            task: TaskRef::Segment(t as u32),
            queue: "tessera.encode.cpu".into(),
            running_s: 10,
        };
        let card = |index| CardStatus {
            index,
            name: "Tesla T4".into(),
            encode_in_use: 2,
            encode_budget: 3,
            decode_in_use: 2,
            decode_budget: 4,
            foreign_encode: 0,
            encoder_pct: Some(70),
            decoder_pct: Some(40),
            healthy: true,
            fault: None,
        };
        let status = WorkerStatus {
            v: WIRE_VERSION,
            worker: format!("worker-{w:04}"),
            release: "0.1.0".into(),
            queue: "tessera.encode.cpu".into(),
            slots: 4,
            draining: None,
            unfit: None,
            tasks: (0..4).map(task).collect(),
            cards: if w % 10 == 0 {
                vec![card(0), card(1)]
            } else {
                vec![]
            },
        };
        fleet.heard(status, now);
    }
    fleet
}

/// The median of 15 requests for `path`.
async fn median(app: &axum::Router, path: &str, cookie: &str) -> Duration {
    let mut times = Vec::new();
    for _ in 0..15 {
        let t = Instant::now();
        let page = send(app, path, cookie, None).await;
        times.push(t.elapsed());
        assert_eq!(page.status, axum::http::StatusCode::OK, "{path}");
    }
    times.sort();
    eprintln!(
        "{path}: median {:.2?}, slowest {:.2?}",
        times[times.len() / 2],
        times[times.len() - 1]
    );
    times[times.len() / 2]
}

/// A database of `JOBS` jobs of three tenants, most done, some failed or cancelled, a few
/// running; the job `running` with 120 segments, 60 recorded done; `RUNS` segment runs a
/// job on 8 workers, all in the last hour (the workers page's worst case).
fn filled(path: &std::path::Path) -> Db {
    let db = Db::open(path).unwrap();
    for i in 0..JOBS {
        let owner = ["acme", "beta", "gamma"][i % 3];
        let id = if i == JOBS - 1 {
            "running".to_string()
        } else {
            format!("job{i:05}")
        };
        let request = serde_json::json!({
            "input": {"bucket": "input", "key": format!("{owner}/uploads/clip-{i}.mov")},
            "outputs": [{"destination": {"bucket": "output", "key": format!("{owner}/out/clip-{i}.mp4")},
                         "codec": "h264", "crf": 23}],
            "hardware": "cpu", "priority": 5, "segment_seconds": 4.0,
        });
        db.insert(&id, owner, None, &request).unwrap();
        let now = crate::db::now_ms();
        for segment in 0..RUNS {
            let run = crate::db::SegmentRun {
                segment,
                worker: format!("worker-{}", (i + segment as usize) % 8),
                card: (i % 4 == 0).then_some(segment % 2),
                attempt: 1 + u32::from(i % 50 == 0),
                started_ms: now - 60_000,
                ended_ms: now - 50_000,
                media_s: 8.0,
                frames: 100,
            };
            db.record_segment_run(&id, &run).unwrap();
        }
        match i % 10 {
            0 => db
                .fail(
                    &id,
                    JobState::Failed,
                    ["qc_failed", "source_corrupt", "input_unreadable"][i % 3],
                    "why",
                )
                .unwrap(),
            1 => drop(db.cancel(&id, "cancelled by request").unwrap()),
            2..=8 => db
                .finish(
                    &id,
                    &serde_json::json!({"frames": 1500, "wall_s": 12.5, "encode_fps": 120.0}),
                )
                .unwrap(),
            _ => db.set_state(&id, JobState::Encoding).unwrap(),
        }
    }
    db.set_segments("running", 120, 60).unwrap();
    db.record_plan("running", 42).unwrap();
    for s in 0..60 {
        db.record_segment("running", (s, 100), &[]).unwrap();
    }
    db
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "fills a 10,000-job database; run by hand for docs/operations.md"]
async fn pages_answer_in_under_100_ms_with_10000_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let db = filled(&dir.path().join("jobs.db"));
    eprintln!("{JOBS} jobs written in {:?}", started.elapsed());
    let (app, _) = dashboard_with(db, fleet(), super::tests::no_backlog());
    let (cookie, _) = sign_in(&app, super::tests::OPS).await;
    let mut worst = Duration::ZERO;
    for path in [
        "/ui/jobs",
        "/ui/jobs?state=failed&code=source_corrupt",
        "/ui/jobs?tenant=beta&page=20",
        "/ui/jobs?page=150",
        "/ui/jobs/running",
        "/ui/jobs/job05002",
        "/ui/queues",
        "/ui/throughput",
        "/ui/workers",
    ] {
        worst = worst.max(median(&app, path, &cookie).await);
    }
    // A tenant's workers page looks up which of the fleet's tasks are its own.
    let (tenant, _) = sign_in(&app, super::tests::ACME).await;
    eprint!("as tenant acme, ");
    worst = worst.max(median(&app, "/ui/workers", &tenant).await);
    assert!(worst < LIMIT, "slowest page median {worst:?}");
}
