//! Fifty small jobs submitted at once all complete, each frame-exact, on two workers.

use std::time::Duration;

use serde_json::json;
use tessera_tests::farm::Farm;
use tessera_tests::fixture::{fixture, Fixture};
use tessera_tests::probe::frame_count;

#[test]
fn fifty_concurrent_small_jobs_all_complete() {
    let farm = Farm::start("many", 2);
    let src = fixture(Fixture::NoAudio);
    let want = frame_count(&src);
    farm.upload(&src, "input", "many/src.mp4");
    let ids: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..50)
            .map(|i| {
                let farm = &farm;
                s.spawn(move || {
                    farm.submit(
                        "s3://input/many/src.mp4",
                        &format!("s3://output/many/{i:02}.mp4"),
                        json!({"preset": "ultrafast"}),
                        json!({"segment_seconds": 1}),
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("submit thread"))
            .collect()
    });
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 50, "every submission is its own job");
    for id in &ids {
        let job = farm.wait_job(id, Duration::from_secs(600));
        assert_eq!(job["state"], "done", "{job}");
    }
    let outputs = farm.list("output", "many/");
    assert_eq!(outputs.len(), 50, "{outputs:?}");
    for key in outputs {
        let local = farm.dir.path().join(key.replace('/', "_"));
        farm.download("output", &key, &local);
        assert_eq!(frame_count(&local), want, "{key}");
    }
    assert!(
        farm.list("work", "jobs/").is_empty(),
        "work area not cleaned"
    );
}
