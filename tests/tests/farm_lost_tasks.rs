//! Tasks that end without a result must end their job, with a reason, and never stall the
//! farm (review C1, H1, H3): a segment whose deliveries run out as its workers are killed;
//! tasks a worker cannot read (from a newer release, or garbled); a task lost from the queue
//! without being dead-lettered; a stale end marker of a resumed job; a second dispatcher on
//! the same farm.

use std::time::{Duration, Instant};

use serde_json::json;
use tessera_farm::queue::Queue;
use tessera_model::wire::QUEUE_ENCODE_CPU;
use tessera_tests::farm::Farm;
use tessera_tests::fixture::{fixture, Fixture};

const JOB_TIMEOUT: Duration = Duration::from_secs(240);

/// Submits `fixture` to `s3://output/{key}` with 1 s segments.
fn submit(farm: &Farm, kind: Fixture, key: &str, output: serde_json::Value) -> String {
    let src = fixture(kind);
    let name = format!("{key}.src.mp4");
    farm.upload(&src, "input", &name);
    farm.submit(
        &format!("s3://input/{name}"),
        &format!("s3://output/{key}"),
        output,
        json!({"segment_seconds": 1}),
    )
}

/// Waits until the job's every segment task sits on the CPU queue (the farm has no worker).
fn wait_published(farm: &Farm, id: &str) -> u64 {
    let started = Instant::now();
    loop {
        let (_, job) = farm.http(
            "GET",
            &format!("/v1/jobs/{id}"),
            Some(tessera_tests::farm::TOKEN),
            None,
        );
        let total = job["segments_total"].as_u64().unwrap_or(0);
        if total > 0 && farm.vhost.ready(QUEUE_ENCODE_CPU) == total {
            return total;
        }
        assert!(
            started.elapsed() < JOB_TIMEOUT,
            "segments never all published: {job}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Polls until worker `i` holds a segment (`Some(true)`) or the job has ended (`None`);
/// `Some(false)` after a minute of neither.
fn busy_or_ended(farm: &Farm, i: usize, id: &str) -> Option<bool> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        let (_, job) = farm.http(
            "GET",
            &format!("/v1/jobs/{id}"),
            Some(tessera_tests::farm::TOKEN),
            None,
        );
        if matches!(job["state"].as_str(), Some("done" | "failed" | "cancelled")) {
            return None;
        }
        let busy = std::fs::read_dir(farm.worker_staging(i))
            .map(|rd| rd.flatten().any(|e| e.path().join("chunk.nut").is_file()))
            .unwrap_or(false);
        if busy {
            return Some(true);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(false)
}

fn publish_raw(farm: &Farm, queue: &str, body: &[u8]) {
    farm.with_broker(|q| async move { q.publish(queue, body.to_vec()).await.expect("publish") });
}

fn error_of(job: &serde_json::Value) -> (String, String) {
    (
        job["error"]["code"].as_str().unwrap_or("").to_string(),
        job["error"]["message"].as_str().unwrap_or("").to_string(),
    )
}

#[test]
fn a_segment_whose_deliveries_run_out_fails_its_job_and_the_farm_moves_on() {
    // Delivery limit 3: the third worker killed while holding the segment dead-letters it.
    let mut farm = Farm::start("lost", 1);
    let id = submit(
        &farm,
        Fixture::Hd720Long,
        "lost.mp4",
        json!({"preset": "medium"}),
    );
    let mut worker = 0;
    while let Some(busy) = busy_or_ended(&farm, worker, &id) {
        assert!(
            busy && worker < 8,
            "worker {worker} idle while the job runs"
        );
        farm.signal_worker(worker, "KILL");
        farm.wait_worker_exit(worker, Duration::from_secs(10));
        worker += 1;
        farm.add_worker(worker);
    }
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "failed", "{job}");
    let (code, message) = error_of(&job);
    assert_eq!(code, "task_lost", "{job}");
    assert!(message.contains("deliveries ran out"), "{message}");
    assert!(worker <= 6, "{worker} kills before the job failed");
    // Nothing reached the destination, the work area is cleaned, and the farm takes the
    // next job (the lost segment's priority-gate place was given back).
    assert!(farm.list("output", "lost.mp4").is_empty(), "partial output");
    let next = submit(&farm, Fixture::ClosedGopH264, "next.mp4", json!({}));
    let done = farm.wait_job(&next, JOB_TIMEOUT);
    assert_eq!(done["state"], "done", "{done}");
    farm.assert_frame_exact(&fixture(Fixture::ClosedGopH264), "next.mp4");
    let started = Instant::now();
    while !farm.list("work", &format!("jobs/{id}/")).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "work area of the failed job left"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn tasks_no_worker_can_read_fail_their_jobs_with_the_reason() {
    let mut farm = Farm::start("unreadable", 0);
    // Each job's tasks are replaced by one the workers cannot read: for `newer`, a task from a
    // newer dispatcher; for `garbled`, one that no release can read.
    let newer = submit(&farm, Fixture::ClosedGopH264, "newer.mp4", json!({}));
    wait_published(&farm, &newer);
    farm.vhost.purge(QUEUE_ENCODE_CPU);
    let garbled = submit(&farm, Fixture::ClosedGopH264, "garbled.mp4", json!({}));
    let started = Instant::now();
    while farm.vhost.ready(QUEUE_ENCODE_CPU) == 0 {
        assert!(
            started.elapsed() < JOB_TIMEOUT,
            "no task of the second job published"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    farm.vhost.purge(QUEUE_ENCODE_CPU);
    let task = json!({"v": 99, "job_id": newer, "segment": 0, "chunk_key": "x"});
    publish_raw(&farm, QUEUE_ENCODE_CPU, task.to_string().as_bytes());
    let task = json!({"v": 1, "job_id": garbled, "segment": 0, "chunk_key": 5});
    publish_raw(&farm, QUEUE_ENCODE_CPU, task.to_string().as_bytes());
    farm.add_worker(0);

    // During a rolling upgrade a newer worker could take the newer task, so each old worker
    // requeues it until its deliveries run out; then its job fails, naming the version.
    let job = farm.wait_job(&newer, JOB_TIMEOUT);
    assert_eq!(job["state"], "failed", "{job}");
    let (code, message) = error_of(&job);
    assert_eq!(code, "task_lost", "{job}");
    assert!(
        message.contains("segment 0") && message.contains("wire version 99"),
        "{message}"
    );
    let requeued = farm.worker_log_count(0, &["newer release requeued"]);
    assert!(
        requeued >= 2,
        "requeued {requeued} times before the dead letters"
    );
    // The garbled task is dead-lettered at once.
    let job = farm.wait_job(&garbled, JOB_TIMEOUT);
    assert_eq!(job["state"], "failed", "{job}");
    let (code, message) = error_of(&job);
    assert_eq!(code, "task_lost", "{job}");
    assert!(
        message.contains("segment 0") && message.contains("unreadable"),
        "{message}"
    );
}

#[test]
fn tasks_lost_from_the_queue_are_republished_after_the_deadline() {
    let mut farm = Farm::start_with("purged", 0, &[("TESSERA_TASK_DEADLINE_SECONDS", "3")]);
    let id = submit(&farm, Fixture::ClosedGopH264, "purged.mp4", json!({}));
    wait_published(&farm, &id);
    // Lost without a trace: no dead letter, no event. Until a worker listens the job waits.
    farm.vhost.purge(QUEUE_ENCODE_CPU);
    std::thread::sleep(Duration::from_secs(4));
    farm.add_worker(0);
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    farm.assert_frame_exact(&fixture(Fixture::ClosedGopH264), "purged.mp4");
    assert!(
        farm.log("dispatcher.log")
            .contains("republishing the outstanding tasks"),
        "{}",
        farm.log("dispatcher.log")
    );
}

#[test]
fn a_resumed_job_with_a_stale_end_marker_still_finishes() {
    let mut farm = Farm::start("stale", 0);
    let id = submit(&farm, Fixture::ClosedGopH264, "stale.mp4", json!({}));
    wait_published(&farm, &id);
    farm.kill_dispatcher();
    // An end marker the job's outcome never reached the database for (a dispatcher stopped
    // between the two in the old order, or a marker written by hand).
    let marker = farm.dir.path().join("marker");
    std::fs::write(&marker, b"").expect("marker");
    farm.upload(&marker, "work", &format!("ended/{id}"));
    farm.start_dispatcher();
    farm.add_worker(0);
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    farm.assert_frame_exact(&fixture(Fixture::ClosedGopH264), "stale.mp4");
}

#[test]
fn a_second_dispatcher_on_the_farm_is_refused_with_the_reason() {
    let farm = Farm::start("second", 0);
    // The same database: refused at once.
    let (code, log) = farm.run_second_dispatcher("jobs.db", Duration::from_secs(30));
    assert_ne!(code, Some(0), "{log}");
    assert_ne!(code, Some(-1), "still running: {log}");
    assert!(
        log.contains("another dispatcher uses this job database"),
        "{log}"
    );
    // Its own database, the same broker: refused once the events queue stays held.
    let (code, log) = farm.run_second_dispatcher("other.db", Duration::from_secs(60));
    assert_ne!(code, Some(0), "{log}");
    assert_ne!(code, Some(-1), "still running: {log}");
    assert!(
        log.contains("another dispatcher runs on this broker"),
        "{log}"
    );
    // The first one still serves.
    let (status, _) = farm.http("GET", "/healthz", None, None);
    assert_eq!(status, 200);
}
