//! A task delivered twice runs twice. Each copy of a stitch stores its output under a key of
//! its own, so neither replaces the object the other checked and reported, and the job
//! delivers one of them (chaos finding C53: a second copy's PUT replaced the checked object,
//! and the delivery's ETag pin, review N6, refused it and failed the job).
//!
//! How the copies are made to finish before the job can end: the dispatcher reaches the broker
//! through a door that publishes every message twice, and the store through a door that holds
//! the delivery's copy; the worker runs both copies of the stitch meanwhile.

use std::time::{Duration, Instant};

use serde_json::json;
use tessera_tests::chaos::Rig;
use tessera_tests::farm::Farm;
use tessera_tests::{fixture, Fixture};

const TIMEOUT: Duration = Duration::from_secs(240);

/// The stored keys of the `output stitched` lines of `job` in worker 0's log.
fn stitched_keys(farm: &Farm, job: &str) -> Vec<String> {
    farm.log("worker-0.log")
        .lines()
        .filter(|l| l.contains("output stitched") && l.contains(job))
        .map(|l| {
            let at = l.find("key=").map_or(l.len(), |i| i + 4);
            let key: String = l[at..].chars().take_while(|c| !c.is_whitespace()).collect();
            key.trim_matches('"').to_string()
        })
        .collect()
}

#[test]
fn each_copy_of_a_stitch_stores_under_its_own_key_and_one_is_delivered() {
    let rig = Rig::start(1, false);
    let farm = &rig.farm;
    let src = fixture(Fixture::ClosedGopH264);
    farm.upload(&src, "input", "dup/in.mp4");
    rig.broker_door.twice(true);
    rig.store_door.stall_copies("/output/dup/");
    let body = json!({"input": "s3://input/dup/in.mp4", "segment_seconds": 1,
        "outputs": [{"destination": "s3://output/dup/a.mkv", "preset": "ultrafast"}]});
    let id = farm
        .submit_retrying(&body, 10, Duration::from_millis(300))
        .expect("submitted");

    let started = Instant::now();
    let keys = loop {
        let keys = stitched_keys(farm, &id);
        if keys.len() >= 2 && !rig.store_door.stalled().is_empty() {
            break keys;
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "job {id}: stitched {keys:?}, copies held {:?}: {}\n{}",
            rig.store_door.stalled(),
            farm.job(&id),
            tessera_tests::run::tail(&farm.log("worker-0.log"), 4000)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(keys.len(), 2, "two copies of the one stitch: {keys:?}");
    assert_ne!(keys[0], keys[1], "each copy its own key");
    let work = farm.list("work", &format!("jobs/{id}/"));
    for key in &keys {
        assert!(
            key.starts_with(&format!("jobs/{id}/")) && work.contains(key),
            "{key} stored in the job's work area: {work:?}"
        );
    }
    assert_eq!(farm.job(&id)["state"], "delivering");

    rig.broker_door.twice(false);
    rig.store_door.end_stall();
    let job = farm.wait_job(&id, TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    farm.assert_frame_exact(&src, "dup/a.mkv");
    // The copy not delivered goes with the rest of the work area.
    let started = Instant::now();
    while !farm.list("work", &format!("jobs/{id}/")).is_empty() {
        assert!(started.elapsed() < TIMEOUT, "work area of {id} not emptied");
        std::thread::sleep(Duration::from_millis(200));
    }
}
