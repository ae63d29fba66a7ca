//! Routing by hardware on a farm without GPUs: the worker finds no NVIDIA driver, says so
//! once and runs CPU-only; "any" jobs run on it, "gpu" jobs wait on the GPU queue for GPU
//! workers (nothing encodes them here) and can be cancelled; a GPU job this FFmpeg cannot
//! encode on NVENC is refused; the worker's /metrics counts what it did; a worker told to
//! require a GPU exits with the reason instead.

use std::time::{Duration, Instant};

use serde_json::json;
use tessera_tests::farm::{Farm, TOKEN};
use tessera_tests::fixture::{fixture, Fixture};
use tessera_tests::probe::frame_count;

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn cpu_workers_take_any_jobs_and_gpu_jobs_wait_for_gpu_workers() {
    // Inherited by the worker the harness starts: serve /metrics on a free port.
    std::env::set_var("TESSERA_METRICS_LISTEN", "127.0.0.1:0");
    let farm = Farm::start("route", 1);
    let log = wait_for("the worker's GPU line", Duration::from_secs(30), || {
        let log = farm.log("worker-0.log");
        log.contains("CPU-only worker").then_some(log)
    });
    assert!(log.contains("no NVIDIA GPU usable"), "{log}");
    assert_eq!(log.matches("CPU-only worker").count(), 1, "{log}");

    let src = fixture(Fixture::NoAudio);
    farm.upload(&src, "input", "route/a.mp4");
    let any = farm.submit(
        "s3://input/route/a.mp4",
        "s3://output/route/any.mp4",
        json!({"preset": "ultrafast"}),
        json!({"segment_seconds": 1, "hardware": "any"}),
    );
    let done = farm.wait_job(&any, Duration::from_secs(120));
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["hardware"], "any");
    let out = farm.dir.path().join("any.mp4");
    farm.download("output", "route/any.mp4", &out);
    assert_eq!(frame_count(&out), frame_count(&src));

    let gpu = farm.submit(
        "s3://input/route/a.mp4",
        "s3://output/route/gpu.mp4",
        json!({"preset": "p4"}),
        json!({"segment_seconds": 1, "hardware": "gpu"}),
    );
    let path = format!("/v1/jobs/{gpu}");
    wait_for("the GPU job's segments", Duration::from_secs(60), || {
        let (_, j) = farm.http("GET", &path, Some(TOKEN), None);
        (j["segments_total"].as_u64().unwrap_or(0) > 0).then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    let (_, j) = farm.http("GET", &path, Some(TOKEN), None);
    assert_eq!(j["state"], "encoding", "{j}");
    assert_eq!(
        j["segments_done"], 0,
        "a CPU worker took a GPU segment: {j}"
    );
    assert_eq!(farm.http("DELETE", &path, Some(TOKEN), None).0, 202);
    let cancelled = farm.wait_job(&gpu, Duration::from_secs(60));
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert!(farm.list("output", "route/gpu").is_empty());

    let av1 = json!({"input": "s3://input/route/a.mp4", "hardware": "gpu",
        "outputs": [{"destination": "s3://output/route/av1.mp4", "codec": "av1"}]});
    let (code, err) = farm.http("POST", "/v1/jobs", Some(TOKEN), Some(&av1.to_string()));
    assert_eq!(code, 422, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("NVENC"),
        "{err}"
    );

    let log = farm.log("worker-0.log");
    let addr = log
        .lines()
        .find(|l| l.contains("metrics endpoint listening"))
        .and_then(|l| l.split("bound=").nth(1))
        .map(|a| a.split_whitespace().next().unwrap_or("").to_string())
        .unwrap_or_else(|| panic!("no metrics line in the worker log:\n{log}"));
    let out = std::process::Command::new("curl")
        .args(["-sS", "-m", "10", &format!("http://{addr}/metrics")])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout);
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
    };
    let segments = done["segments_total"].as_f64().unwrap_or(0.0);
    assert!(
        value("tessera_worker_segments_done_total") >= segments,
        "{text}"
    );
    assert!(value("tessera_worker_stitches_done_total") >= 1.0, "{text}");
    assert_eq!(
        value("tessera_worker_frames_encoded_total"),
        frame_count(&src) as f64
    );
    assert_eq!(value("tessera_worker_gpus"), 0.0);
}

/// Review M2 / H2: an "any" job whose GPU workers refuse its segments (a request the cards'
/// NVENC cannot do) runs again, whole, on the CPU path and is delivered frame-exact. The
/// refusing GPU worker here is a client of the real broker speaking the task protocol: it
/// answers every GPU task with `gpu_request_unsupported`, as a worker on a T4 does for a
/// rendition the card refuses; a "gpu" job would fail with that reason instead.
#[test]
fn an_any_job_the_gpus_refuse_runs_again_on_the_cpu() {
    use tessera_farm::queue::{Queue, RabbitQueue};
    use tessera_model::wire::{
        decode_message, encode_message, SegmentOutcome, SegmentTask, TaskEvent, QUEUE_ENCODE_GPU,
        QUEUE_EVENTS,
    };
    let farm = Farm::start("refuse", 1);
    let config = farm.vhost.config(3);
    let refused = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = refused.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let gpu_worker = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let q = RabbitQueue::connect(config).await.unwrap();
            q.declare(QUEUE_ENCODE_GPU).await.unwrap();
            let mut consumer = q.consume(QUEUE_ENCODE_GPU, 4).await.unwrap();
            ready_tx.send(()).unwrap();
            loop {
                if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                let next = tokio::time::timeout(Duration::from_millis(500), consumer.next()).await;
                let Ok(next) = next else { continue };
                let Ok(Some(d)) = next else { return };
                let task: SegmentTask = decode_message(&d.body).unwrap();
                let event = TaskEvent {
                    v: task.v,
                    job_id: task.job_id.clone(),
                    plan: task.plan,
                    task: tessera_model::wire::TaskRef::Segment(task.segment),
                    worker: "refusing-gpu".into(),
                    outcome: SegmentOutcome::Failed {
                        code: tessera_model::error_code::ErrorCode::GpuRequestUnsupported,
                        class: tessera_model::error_code::ErrorClass::Abort,
                        message: "gpu 0: the card cannot encode this request: 10 bit encode not supported".into(),
                    },
                };
                q.publish(QUEUE_EVENTS, encode_message(&event)).await.unwrap();
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                d.acker.ack().await.unwrap();
            }
        })
    });
    ready_rx.recv_timeout(Duration::from_secs(30)).unwrap();

    let src = fixture(Fixture::NoAudio);
    farm.upload(&src, "input", "refuse/a.mp4");
    let any = farm.submit(
        "s3://input/refuse/a.mp4",
        "s3://output/refuse/any.mp4",
        json!({"preset": "ultrafast"}),
        json!({"segment_seconds": 1, "hardware": "any"}),
    );
    let done = farm.wait_job(&any, Duration::from_secs(180));
    assert_eq!(done["state"], "done", "{done}");
    assert!(
        refused.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "the job went to the GPU queue first"
    );
    farm.assert_frame_exact(&src, "refuse/any.mp4");
    assert!(
        farm.log("dispatcher.log")
            .contains("running it again on the CPU path"),
        "the fallback is logged"
    );

    // A job that asks for the GPU fails with the cards' reason.
    let gpu = farm.submit(
        "s3://input/refuse/a.mp4",
        "s3://output/refuse/gpu.mp4",
        json!({"preset": "p4"}),
        json!({"segment_seconds": 1, "hardware": "gpu"}),
    );
    let failed = farm.wait_job(&gpu, Duration::from_secs(120));
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(
        failed["error"]["code"], "gpu_request_unsupported",
        "{failed}"
    );
    assert!(
        farm.list("output", "refuse/gpu").is_empty(),
        "nothing delivered"
    );

    // An HDR source (10-bit HEVC, PQ, BT.2020, HDR10 metadata) never goes to the GPU, whose path keeps no
    // HDR (GPU re-review, failure 4): "any" runs on the CPU at once, while the GPU queue has
    // a consumer, and keeps its PQ tag; "gpu" is refused before any task, naming HDR.
    let hdr = tessera_tests::fixture::hdr_source(farm.dir.path(), "smpte2084");
    farm.upload(&hdr, "input", "refuse/hdr.mkv");
    let before = refused.load(std::sync::atomic::Ordering::SeqCst);
    let any = farm.submit(
        "s3://input/refuse/hdr.mkv",
        "s3://output/refuse/hdr-any.mkv",
        json!({"codec": "hevc", "preset": "ultrafast"}),
        json!({"segment_seconds": 1, "hardware": "any"}),
    );
    let done = farm.wait_job(&any, Duration::from_secs(180));
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(
        refused.load(std::sync::atomic::Ordering::SeqCst),
        before,
        "an HDR job's task went to the GPU queue"
    );
    farm.assert_frame_exact(&hdr, "refuse/hdr-any.mkv");
    let out = farm.dir.path().join("refuse_hdr-any.mkv");
    let video = tessera_tests::probe::streams_of(&out, "video");
    assert_eq!(video[0].color_transfer.as_deref(), Some("smpte2084"));
    let gpu = farm.submit(
        "s3://input/refuse/hdr.mkv",
        "s3://output/refuse/hdr-gpu.mkv",
        json!({"codec": "hevc", "preset": "p4"}),
        json!({"segment_seconds": 1, "hardware": "gpu"}),
    );
    let failed = farm.wait_job(&gpu, Duration::from_secs(120));
    assert_eq!(
        failed["error"]["code"], "gpu_request_unsupported",
        "{failed}"
    );
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("HDR") && message.contains("smpte2084"),
        "{message}"
    );
    assert_eq!(refused.load(std::sync::atomic::Ordering::SeqCst), before);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    gpu_worker.join().unwrap();
}

/// `--gpu require` (TESSERA_GPU=require, the GPU ScaledJob's setting) on a machine where no
/// card can encode: the worker exits non-zero naming why, instead of becoming a CPU worker
/// that takes the CPU queue while the GPU queue stays full (review gap 4).
#[test]
fn a_worker_that_requires_a_gpu_exits_with_the_reason_where_none_can_encode() {
    let mut farm = Farm::start("route_require", 0);
    farm.add_worker_with(0, &["--gpu", "require"]);
    let code = farm.wait_worker_exit(0, Duration::from_secs(60));
    let log = farm.log("worker-0.log");
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("TESSERA_GPU=require"), "{log}");
    assert!(log.contains("cannot encode on a GPU"), "{log}");
    assert!(!log.contains("CPU-only worker"), "{log}");
}
