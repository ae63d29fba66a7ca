//! The distributed farm across outages of its services: S3 (Garage) stopped and restarted
//! mid-job, and the RabbitMQ vhost refusing and dropping every connection mid-job.
//!
//! What these prove: after each outage the workers (and the dispatcher) reconnect by
//! themselves, the job in progress still ends `done` with every segment recorded, its output
//! holds exactly the source's frames, both workers are still running and both encode
//! segments again after the outage (RabbitMQ: of a job submitted once both consumers are
//! back, since a worker's reconnect backoff may outlast the first job).
//! Each test also checks that the outage really hit the job (it was not done yet when the
//! service came back, and the clients had lost their connections).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_model::wire::{QUEUE_CUT_CPU, QUEUE_ENCODE_CPU};
use tessera_tests::farm::Farm;
use tessera_tests::fixture::{fixture, Fixture};
use tessera_tests::probe::frame_count;

const JOB_TIMEOUT: Duration = Duration::from_secs(150);
/// How long S3 stays down after the first worker's S3 call failed: a short outage.
const S3_DOWN_AFTER_FIRST_FAILURE: Duration = Duration::from_secs(2);
/// An outage longer than the delivery limit's retries would last (the harness allows 3
/// deliveries, about 7 s of backoff): workers must wait for the store, not spend deliveries.
const S3_LONG_OUTAGE: Duration = Duration::from_secs(20);
/// How long the broker refuses the vhost's connections.
const RABBIT_OUTAGE: Duration = Duration::from_secs(8);
const WORKERS: usize = 2;

/// Uploads the 12 s 720p fixture and submits it in 1 s segments with a slow preset, so the
/// job is still encoding (two workers, one thread each) when the outage starts.
fn submit_long_job(farm: &Farm, dest: &str) -> String {
    let src = fixture(Fixture::Hd720Long);
    farm.upload(&src, "input", "long.mp4");
    farm.submit(
        "s3://input/long.mp4",
        &format!("s3://output/{dest}"),
        json!({"preset": "medium"}),
        json!({"segment_seconds": 1}),
    )
}

/// Every worker's and the dispatcher's log, for failure messages.
fn logs(farm: &Farm) -> String {
    let mut all = String::new();
    for name in ["dispatcher.log", "worker-0.log", "worker-1.log"] {
        let text = farm.log(name);
        all += &format!("--- {name}\n{}\n", tessera_tests::run::tail(&text, 6000));
    }
    all
}

/// Asserts the job ended `done` with every segment in and its output frame-exact.
fn assert_done_frame_exact(farm: &Farm, job: &serde_json::Value, src: &Path, key: &str) {
    assert_eq!(job["state"], "done", "{job}\n{}", logs(farm));
    assert_eq!(job["segments_done"], job["segments_total"], "{job}");
    let out = farm.dir.path().join(key);
    farm.download("output", key, &out);
    assert_eq!(
        frame_count(&out),
        frame_count(src),
        "output and source frame counts"
    );
}

/// "segment encoded" lines of job `id` in each worker's log.
fn encoded_by_worker(farm: &Farm, id: &str) -> Vec<usize> {
    (0..WORKERS)
        .map(|i| farm.worker_log_count(i, &["segment encoded", id]))
        .collect()
}

/// Asserts every worker encoded at least one more segment of `id` than in `before`.
fn assert_each_worker_worked_again(farm: &Farm, id: &str, before: &[usize]) {
    let after = encoded_by_worker(farm, id);
    for i in 0..WORKERS {
        assert!(
            after[i] > before[i],
            "worker {i} encoded nothing after the outage ({} before, {} after)\n{}",
            before[i],
            after[i],
            logs(farm)
        );
    }
}

/// Asserts the job has not ended (the outage overlapped its encoding).
fn assert_still_running(farm: &Farm, job: &serde_json::Value) {
    let state = job["state"].as_str().unwrap_or("");
    assert!(
        !matches!(state, "done" | "failed" | "cancelled"),
        "the job ended during the outage: {job}\n{}",
        logs(farm)
    );
}

fn s3_listening(farm: &Farm) -> bool {
    std::net::TcpStream::connect(farm.garage.endpoint.trim_start_matches("http://")).is_ok()
}

/// Stops S3 once a segment is done, keeps it down until a worker's S3 call failed and then
/// `hold` longer, restarts it, and checks that the job still ends done and frame-exact.
fn s3_outage_mid_job(tag: &str, hold: Duration) {
    let mut farm = Farm::start(tag, WORKERS);
    let src = fixture(Fixture::Hd720Long);
    let id = submit_long_job(&farm, "s3-outage.mp4");
    farm.wait_segments_done(&id, 1, Duration::from_secs(90));

    let failed_attempts = |farm: &Farm| -> usize {
        (0..WORKERS)
            .map(|i| farm.worker_log_count(i, &["task attempt failed", &id]))
            .sum()
    };
    let stopped = Instant::now();
    farm.garage.stop();
    assert!(!s3_listening(&farm), "S3 still answers after stop");
    // Down until the outage hit a worker (its S3 call failed), then `hold` longer.
    while failed_attempts(&farm) == 0 {
        assert!(
            stopped.elapsed() < Duration::from_secs(60),
            "no worker noticed the S3 outage\n{}",
            logs(&farm)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(hold);
    let during = farm.job(&id);
    assert_still_running(&farm, &during);
    let before = encoded_by_worker(&farm, &id);
    farm.garage.restart();
    let outage = stopped.elapsed();

    let job = farm.wait_job(&id, JOB_TIMEOUT);
    eprintln!(
        "S3 outage of {outage:.1?}: {} failed task attempts; job {job}",
        failed_attempts(&farm)
    );
    assert_done_frame_exact(&farm, &job, &src, "s3-outage.mp4");
    assert!(farm.workers_alive(), "a worker exited\n{}", logs(&farm));
    assert_each_worker_worked_again(&farm, &id, &before);
    assert!(
        farm.list("work", &format!("jobs/{id}/")).is_empty(),
        "work area not cleaned"
    );
}

#[test]
fn s3_outage_mid_job_the_job_completes_frame_exact() {
    s3_outage_mid_job("s3outage", S3_DOWN_AFTER_FIRST_FAILURE);
}

/// A store that is unreachable (connection refused, timeouts, 5xx) is not the task's fault:
/// the worker waits until S3 answers and gives the task back as a fresh message, so a 20 s
/// outage spends none of the 3 deliveries (before this, the job failed within ~10 s).
#[test]
fn s3_outage_longer_than_the_retry_budget_the_job_still_completes() {
    s3_outage_mid_job("s3long", S3_LONG_OUTAGE);
}

#[test]
fn rabbitmq_connection_loss_mid_job_workers_reconnect_and_keep_working() {
    let mut farm = Farm::start("mqoutage", WORKERS);
    let src = fixture(Fixture::Hd720Long);
    let id = submit_long_job(&farm, "mq-outage.mp4");
    farm.wait_segments_done(&id, 1, Duration::from_secs(90));
    let connected = farm.vhost.connection_count();
    assert!(
        connected > WORKERS,
        "{connected} connections before the outage"
    );

    farm.vhost.block();
    let deadline = Instant::now() + Duration::from_secs(10);
    while farm.vhost.connection_count() > 0 {
        assert!(
            Instant::now() < deadline,
            "connections survived the block:\n{}",
            farm.vhost.list_connections(&["name", "state"])
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(RABBIT_OUTAGE);
    assert_eq!(farm.vhost.connection_count(), 0, "a client got in");
    let during = farm.job(&id);
    assert_still_running(&farm, &during);
    farm.vhost.unblock();

    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_done_frame_exact(&farm, &job, &src, "mq-outage.mp4");
    assert!(farm.workers_alive(), "a worker exited\n{}", logs(&farm));
    for i in 0..WORKERS {
        let log = farm.log(&format!("worker-{i}.log"));
        assert!(
            log.contains("connection lost") || log.contains("consumer lost"),
            "worker {i} never noticed the outage\n{log}"
        );
    }

    // Every worker's consumer comes back by itself. A worker whose reconnect backoff had
    // grown during the outage may come back after the first job's last segment was taken,
    // so the proof that each one works again is a job submitted once all are back.
    wait_for_consumers(&farm, QUEUE_ENCODE_CPU, WORKERS);
    wait_for_consumers(&farm, QUEUE_CUT_CPU, WORKERS);
    let second = submit_long_job(&farm, "after-outage.mp4");
    let job2 = farm.wait_job(&second, JOB_TIMEOUT);
    assert_done_frame_exact(&farm, &job2, &src, "after-outage.mp4");
    assert_each_worker_worked_again(&farm, &second, &[0; WORKERS]);
    assert!(farm.workers_alive(), "a worker exited\n{}", logs(&farm));
}

/// Waits until `queue` has `want` consumers: each worker reconnected and consumes again.
/// The wait covers the connection's longest backoff (30 s) with room to spare.
fn wait_for_consumers(farm: &Farm, queue: &str, want: usize) {
    let waited = (farm.vhost).wait_for_consumers(queue, want as u64, Duration::from_secs(90));
    if let Err(have) = waited {
        panic!(
            "{queue} has {have} consumers, not {want}, 90 s after the outage\n{}",
            logs(farm)
        );
    }
}

/// S3 down when a job starts: the dispatcher cannot fetch the input; it waits for the store
/// (instead of failing the job as unreadable input) and the job completes once S3 is back.
#[test]
fn s3_down_when_a_job_starts_the_dispatcher_waits_for_it() {
    let mut farm = Farm::start("s3start", 1);
    let src = fixture(Fixture::NoAudio);
    farm.upload(&src, "input", "start.mp4");
    farm.garage.stop();
    let id = farm.submit(
        "s3://input/start.mp4",
        "s3://output/start.mp4",
        json!({"preset": "ultrafast"}),
        json!({"segment_seconds": 1}),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while !farm
        .log("dispatcher.log")
        .contains("store unavailable; waiting")
    {
        assert!(
            Instant::now() < deadline,
            "dispatcher never waited:\n{}",
            logs(&farm)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(3));
    let job = farm.job(&id);
    assert_ne!(job["state"], "failed", "{job}");
    farm.garage.restart();
    let done = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(done["state"], "done", "{done}\n{}", logs(&farm));
    let out = farm.dir.path().join("start-out.mp4");
    farm.download("output", "start.mp4", &out);
    assert_eq!(frame_count(&out), frame_count(&src));
}

/// A dispatcher started while the broker refuses it waits for the broker (logging it), and
/// serves once it is back: before, it exited at once ("cannot connect") and left its start
/// to a supervisor (found by chaos: a broker restart while the dispatcher restarts).
#[test]
fn a_dispatcher_started_while_the_broker_is_down_waits_for_it() {
    let mut farm = Farm::start("mqstart", 1);
    farm.kill_dispatcher();
    farm.vhost.block();
    let name = farm.vhost.name.clone();
    let unblock = std::thread::spawn(move || {
        std::thread::sleep(RABBIT_OUTAGE);
        tessera_tests::rabbit::rabbitmqctl(&["clear_vhost_limits", "-p", &name]).assert_success();
    });
    let started = farm.try_start_dispatcher();
    unblock.join().expect("unblock the vhost");
    assert!(
        started,
        "the dispatcher did not wait for the broker:\n{}",
        logs(&farm)
    );
    assert!(farm.log("dispatcher.log").contains("broker unavailable"));
    let src = fixture(Fixture::NoAudio);
    farm.upload(&src, "input", "after-start.mp4");
    let id = farm.submit(
        "s3://input/after-start.mp4",
        "s3://output/after-start.mp4",
        json!({"preset": "ultrafast"}),
        json!({"segment_seconds": 1}),
    );
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_done_frame_exact(&farm, &job, &src, "after-start.mp4");
}
