//! The scaling signal against backlogs of known size: with no worker running, two 12 s jobs
//! in 2 s segments are 24 s of backlog in 12 segments; at 0.5 media seconds per second per
//! worker and an 8 s drain target that is 6 workers (`/scaling` and
//! `tessera_desired_workers{pool="cpu"}`). A worker then drains it, and the signal goes back
//! to 0.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tessera_tests::farm::Farm;
use tessera_tests::fixture::{fixture, Fixture};

fn scaling(farm: &Farm) -> Value {
    let (status, body) = farm.http("GET", "/scaling", None, None);
    assert_eq!(status, 200, "{body}");
    body
}

/// Waits until the CPU pool's backlog holds `segments` segments.
fn wait_backlog(farm: &Farm, segments: u64) -> Value {
    let started = Instant::now();
    loop {
        let s = scaling(farm);
        if s["pools"]["cpu"]["backlog_segments"] == segments {
            return s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "backlog never reached {segments} segments: {s}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn desired_workers_follow_a_backlog_of_known_size() {
    let mut farm = Farm::start_with(
        "scaling",
        0,
        &[
            ("TESSERA_SCALING_TARGET_SECONDS", "8"),
            ("TESSERA_SCALING_CPU_THROUGHPUT", "0.5"),
        ],
    );
    let s = scaling(&farm);
    assert_eq!(s["target_drain_seconds"], 8.0, "{s}");
    assert_eq!(s["pools"]["cpu"]["desired_workers"], 0, "{s}");
    assert_eq!(farm.metric("tessera_desired_workers{pool=\"cpu\"}"), 0.0);

    // 12 s at 30 fps with a keyframe every second: six 2 s segments per job.
    let src = fixture(Fixture::Hd720Long);
    farm.upload(&src, "input", "long.mp4");
    let submit = |key: &str| {
        farm.submit(
            "s3://input/long.mp4",
            &format!("s3://output/{key}"),
            json!({}),
            json!({"segment_seconds": 2}),
        )
    };
    let a = submit("a.mp4");
    let s = wait_backlog(&farm, 6);
    let cpu = &s["pools"]["cpu"];
    let seconds = cpu["backlog_segment_seconds"].as_f64().unwrap();
    assert!((seconds - 12.0).abs() < 0.05, "{s}");
    // 12 s / (0.5 s/s x 8 s) = 3.
    assert_eq!(cpu["desired_workers"], 3, "{s}");
    let b = submit("b.mp4");
    let s = wait_backlog(&farm, 12);
    let cpu = &s["pools"]["cpu"];
    let seconds = cpu["backlog_segment_seconds"].as_f64().unwrap();
    assert!((seconds - 24.0).abs() < 0.1, "{s}");
    assert_eq!(cpu["desired_workers"], 6, "{s}");
    assert_eq!(cpu["worker_throughput"], 0.5, "{s}");
    assert_eq!(s["pools"]["gpu"]["desired_workers"], 0, "{s}");
    assert_eq!(farm.metric("tessera_desired_workers{pool=\"cpu\"}"), 6.0);
    assert_eq!(farm.metric("tessera_desired_workers{pool=\"gpu\"}"), 0.0);
    let exposed = farm.metric("tessera_backlog_segment_seconds{pool=\"cpu\"}");
    assert!((exposed - 24.0).abs() < 0.1, "{exposed}");

    // A worker drains it; the signal follows and ends at 0, with the throughput measured.
    farm.add_worker(0);
    for id in [&a, &b] {
        let job = farm.wait_job(id, Duration::from_secs(300));
        assert_eq!(job["state"], "done", "{job}");
    }
    let s = scaling(&farm);
    assert_eq!(s["pools"]["cpu"]["backlog_segments"], 0, "{s}");
    assert_eq!(s["pools"]["cpu"]["desired_workers"], 0, "{s}");
    let measured = s["pools"]["cpu"]["worker_throughput"].as_f64().unwrap();
    assert!(
        measured > 0.0 && measured != 0.5,
        "throughput not measured: {s}"
    );
    farm.assert_frame_exact(&src, "a.mp4");
}
