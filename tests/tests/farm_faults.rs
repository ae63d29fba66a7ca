//! The distributed farm under faults: a worker killed mid-segment, a worker drained by
//! SIGTERM, and a dispatcher killed mid-job. Every job must still end frame-exact.

use std::time::Duration;

use serde_json::json;
use tessera_tests::farm::Farm;
use tessera_tests::fixture::{fixture, Fixture};

const JOB_TIMEOUT: Duration = Duration::from_secs(300);

#[test]
fn worker_killed_mid_segment_the_job_still_completes_frame_exact() {
    let mut farm = Farm::start("kill", 2);
    let id = farm.start_slow_job("killed.mp4");
    farm.wait_for_segment_in_progress(0, Duration::from_secs(60));
    farm.signal_worker(0, "KILL");
    assert_eq!(
        farm.wait_worker_exit(0, Duration::from_secs(10)),
        None,
        "killed by a signal"
    );
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    farm.assert_frame_exact(&fixture(Fixture::Hd720Long), "killed.mp4");
    assert!(
        farm.list("work", "jobs/").is_empty(),
        "work area not cleaned"
    );
}

#[test]
fn sigterm_drains_the_segment_in_flight_and_exits_zero() {
    let mut farm = Farm::start("drain", 1);
    let id = farm.start_slow_job("drained.mp4");
    farm.wait_for_segment_in_progress(0, Duration::from_secs(60));
    farm.signal_worker(0, "TERM");
    assert_eq!(
        farm.wait_worker_exit(0, Duration::from_secs(60)),
        Some(0),
        "{}",
        farm.log("worker-0.log")
    );
    let log = farm.log("worker-0.log");
    assert!(log.contains("SIGTERM"), "{log}");
    assert!(!farm.worker_staging(0).exists(), "staging left behind");
    // The job is not done yet (one worker, twelve seconds of 720p); a new worker finishes it.
    let (_, mid) = farm.http(
        "GET",
        &format!("/v1/jobs/{id}"),
        Some(tessera_tests::farm::TOKEN),
        None,
    );
    assert_ne!(mid["state"], "done", "{mid}");
    assert!(
        mid["segments_done"].as_u64().unwrap_or(0) >= 1,
        "the drained segment was reported: {mid}"
    );
    farm.add_worker(1);
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    farm.assert_frame_exact(&fixture(Fixture::Hd720Long), "drained.mp4");
}

#[test]
fn dispatcher_killed_mid_job_resumes_without_redoing_segments() {
    let mut farm = Farm::start("restart", 2);
    let id = farm.start_slow_job("resumed.mp4");
    // Kill it once a segment is in (every segment task is on the queue by then).
    farm.wait_segments_done(&id, 1, Duration::from_secs(120));
    farm.kill_dispatcher();
    std::thread::sleep(Duration::from_secs(1));
    farm.start_dispatcher();
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(
        job["state"],
        "done",
        "{job}\n{}",
        farm.log("dispatcher.log")
    );
    assert_eq!(job["segments_done"], job["segments_total"], "{job}");
    farm.assert_frame_exact(&fixture(Fixture::Hd720Long), "resumed.mp4");
    // Every segment was encoded exactly once: the resumed run republished nothing.
    let encoded = (0..2)
        .map(|i| farm.log(&format!("worker-{i}.log")))
        .flat_map(|log| log.lines().map(str::to_string).collect::<Vec<_>>())
        .filter(|l| l.contains("segment encoded") && l.contains(&id))
        .count();
    assert_eq!(
        Some(encoded as u64),
        job["segments_total"].as_u64(),
        "{job}"
    );
}

#[test]
fn cancel_mid_job_stops_the_workers_and_leaves_nothing() {
    let mut farm = Farm::start("cancel", 2);
    let id = farm.start_slow_job("cancelled.mp4");
    farm.wait_for_segment_in_progress(0, Duration::from_secs(60));
    let (code, resp) = farm.http(
        "DELETE",
        &format!("/v1/jobs/{id}"),
        Some(tessera_tests::farm::TOKEN),
        None,
    );
    assert_eq!(code, 202, "{resp}");
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "cancelled", "{job}");
    // Within a few seconds the workers drop the job's segments and the work area is empty.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let busy = (0..2).any(|i| {
            std::fs::read_dir(farm.worker_staging(i))
                .map(|rd| rd.flatten().next().is_some())
                .unwrap_or(false)
        });
        let left = farm.list("work", &format!("jobs/{id}/"));
        if !busy && left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still busy={busy}, work area {left:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        farm.list("output", "").is_empty(),
        "an output appeared for a cancelled job"
    );
    assert!(farm.workers_alive());
    let (code, again) = farm.http(
        "DELETE",
        &format!("/v1/jobs/{id}"),
        Some(tessera_tests::farm::TOKEN),
        None,
    );
    assert_eq!(code, 409, "{again}");
}

#[test]
fn a_worker_with_a_full_disk_pauses_and_spends_no_delivery() {
    // Worker 0's staging "disk" is always short of its floor: every task it takes is its own
    // fault. It must give tasks back without spending their deliveries (limit 3 here) and
    // stop taking work, so worker 1 does the job.
    let mut farm = Farm::start("unfit", 0);
    farm.add_worker_with(0, &["--min-free-mib", "999999999"]);
    let src = fixture(Fixture::ClosedGopH264);
    farm.upload(&src, "input", "unfit.mp4");
    let id = farm.submit(
        "s3://input/unfit.mp4",
        "s3://output/unfit.mp4",
        json!({}),
        json!({"segment_seconds": 1}),
    );
    let started = std::time::Instant::now();
    while !farm.log("worker-0.log").contains("worker unfit") {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{}",
            farm.log("worker-0.log")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    farm.add_worker(1);
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    farm.assert_frame_exact(&src, "unfit.mp4");
    assert!(farm.workers_alive(), "the unfit worker must stay up");
    let log = farm.log("worker-0.log");
    assert!(
        !log.contains("segment encoded"),
        "the unfit worker encoded:\n{log}"
    );
    // What the name promises: each task the unfit worker gave back reached worker 1 as a
    // fresh message, on its first delivery; a nack would have raised its delivery count.
    let given_back = log.matches("task attempt failed").count();
    assert!(
        given_back >= 1,
        "the unfit worker gave nothing back:\n{log}"
    );
    let done = farm.log("worker-1.log");
    let encoded: Vec<&str> = done
        .lines()
        .filter(|l| l.contains("segment encoded") && l.contains(id.as_str()))
        .collect();
    assert!(!encoded.is_empty(), "worker 1 encoded nothing:\n{done}");
    for line in &encoded {
        assert!(
            line.contains("attempt=1"),
            "a segment reached worker 1 on a later delivery:\n{line}"
        );
    }
}
