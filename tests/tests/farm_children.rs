//! A job's media operations on one worker share a warm child (issue 31): the cuts, encodes
//! and the stitch with its QC gate of one job start one child between them, not one each,
//! and the next job still gets a child of its own. Read from the worker's `/metrics`
//! (`tessera_media_operations_total{op}`, where `start` counts children that served their
//! first operation).
//!
//! Why a test: a fresh child of a Debian FFmpeg costs about 50 ms of CPU in the dynamic
//! loader; the batch benchmark measured the workers' child starts at 8 % of the farm's CPU
//! while each cut and stitch took a spare of its own.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_model::wire::QUEUE_CUT_CPU;
use tessera_tests::bench::batch::media_ops;
use tessera_tests::farm::Farm;
use tessera_tests::fixture::{fixture, Fixture};
use tessera_tests::imds::free_port;
use tessera_tests::probe::frame_count;

/// `tessera_media_operations_total` by `op` from the worker's `/metrics` at `url`.
fn operations(url: &str) -> BTreeMap<String, u64> {
    let text = media_ops::metrics_text(url);
    (media_ops::series(&text, "tessera_media_operations_total").into_iter())
        .map(|(op, n)| (op, n as u64))
        .collect()
}

fn delta(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>, op: &str) -> u64 {
    after.get(op).copied().unwrap_or(0) - before.get(op).copied().unwrap_or(0)
}

#[test]
fn one_jobs_cuts_encodes_and_stitch_on_a_worker_start_one_child() {
    let mut farm = Farm::start("children", 0);
    let listen = format!("127.0.0.1:{}", free_port());
    farm.add_worker_with(0, &["--metrics-listen", &listen]);
    let url = format!("http://{listen}/metrics");
    let waited = (farm.vhost).wait_for_consumers(QUEUE_CUT_CPU, 1, Duration::from_secs(60));
    assert!(waited.is_ok(), "the worker never consumed {QUEUE_CUT_CPU}");
    let started = Instant::now();
    while std::process::Command::new("curl")
        .args(["-sf", "-m", "5", "-o", "/dev/null", &url])
        .status()
        .map_or(true, |s| !s.success())
    {
        assert!(started.elapsed() < Duration::from_secs(60), "no /metrics");
        std::thread::sleep(Duration::from_millis(200));
    }
    let src = fixture(Fixture::Hd720Long);
    farm.upload(&src, "input", "children/long.mp4");
    let mut seen = operations(&url);
    for n in 0..2 {
        let id = farm.submit(
            "s3://input/children/long.mp4",
            &format!("s3://output/children/{n}.mp4"),
            json!({"preset": "ultrafast"}),
            json!({"segment_seconds": 2}),
        );
        let j = farm.wait_job(&id, Duration::from_secs(300));
        assert_eq!(j["state"], "done", "{j}");
        let segments = j["segments_total"].as_u64().unwrap_or(0);
        assert!(segments >= 4, "{j}");
        let now = operations(&url);
        let (cuts, encodes) = (delta(&now, &seen, "split"), delta(&now, &seen, "encode"));
        let (stitches, starts) = (delta(&now, &seen, "stitch"), delta(&now, &seen, "start"));
        let said = format!(
            "job {n}: {cuts} cuts, {encodes} encodes, {stitches} stitches, {starts} child \
             starts\n{now:?}\n{}",
            farm.log("worker-0.log")
        );
        assert_eq!((cuts, encodes, stitches), (segments, segments, 1), "{said}");
        // Every operation of the job in the child the job's first one started (the first
        // job's is the one started with the worker): never one per cut or stitch, and never
        // none after a first job (no child serves two jobs).
        assert_eq!(starts, 1, "{said}");
        seen = now;
        let out = farm.dir.path().join(format!("{n}.mp4"));
        farm.download("output", &format!("children/{n}.mp4"), &out);
        assert_eq!(frame_count(&out), frame_count(&src), "job {n}");
    }
}
