//! Priority scheduling: with a window of one admitted segment, an urgent job submitted after
//! a long one overtakes it instead of waiting behind every one of its segments.
//!
//! The long job is a 12 s 720p source at one segment per second with the `medium` preset:
//! its remaining segments take far longer than the urgent job's prepare stage on any
//! machine, so the assertion does not depend on how fast the runner is (a 4 s 320x240
//! source finished all its segments while the urgent job was still being split on a fast one).

use std::time::{Duration, Instant};

use serde_json::json;
use tessera_tests::farm::Farm;
use tessera_tests::fixture::{fixture, Fixture};
use tessera_tests::probe::frame_count;

#[test]
fn an_urgent_job_overtakes_a_long_one() {
    // Inherited by the dispatcher the harness starts.
    std::env::set_var("TESSERA_QUEUE_WINDOW", "1");
    let farm = Farm::start("prio", 1);
    let long_src = fixture(Fixture::Hd720Long);
    let urgent_src = fixture(Fixture::NoAudio);
    farm.upload(&long_src, "input", "prio/long.mp4");
    farm.upload(&urgent_src, "input", "prio/urgent.mp4");

    let long = farm.submit(
        "s3://input/prio/long.mp4",
        "s3://output/prio/long.mp4",
        json!({"preset": "medium"}),
        json!({"segment_seconds": 1, "priority": 0}),
    );
    // Wait until the long job is encoding, so its segments are waiting at the gate.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, j) = farm.http(
            "GET",
            &format!("/v1/jobs/{long}"),
            Some(tessera_tests::farm::TOKEN),
            None,
        );
        if j["segments_done"].as_u64().unwrap_or(0) >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "long job never started: {j}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let urgent = farm.submit(
        "s3://input/prio/urgent.mp4",
        "s3://output/prio/urgent.mp4",
        json!({"preset": "ultrafast"}),
        json!({"segment_seconds": 1, "priority": 9}),
    );
    let u = farm.wait_job(&urgent, Duration::from_secs(300));
    assert_eq!(u["state"], "done", "{u}");
    let (_, l) = farm.http(
        "GET",
        &format!("/v1/jobs/{long}"),
        Some(tessera_tests::farm::TOKEN),
        None,
    );
    assert_ne!(l["state"], "done", "the long job finished first: {l}\n{u}");
    assert!(
        l["segments_done"].as_u64() < l["segments_total"].as_u64(),
        "long job had no segments left when the urgent one finished: {l}"
    );
    assert_eq!(l["priority"], 0);
    assert_eq!(u["priority"], 9);

    let l = farm.wait_job(&long, Duration::from_secs(300));
    assert_eq!(l["state"], "done", "{l}");
    for (src, key) in [
        (&long_src, "prio/long.mp4"),
        (&urgent_src, "prio/urgent.mp4"),
    ] {
        let out = farm.dir.path().join(key.replace('/', "_"));
        farm.download("output", key, &out);
        assert_eq!(frame_count(&out), frame_count(src), "{key}");
    }
}
