//! Jobs from bucket uploads: the dispatcher's poller (ListObjectsV2 on `input/incoming/`,
//! every second) and its S3 event consumer (queue `tessera.s3events`), against a real Garage
//! and RabbitMQ, with the farm's real processes. One object version never makes two jobs,
//! across poll rounds, duplicate events and dispatcher restarts.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tessera_farm::queue::{dead_letter_queue, Queue};
use tessera_tests::farm::{Farm, WATCH_EVENTS_QUEUE};
use tessera_tests::fixture::{fixture, Fixture};
use tessera_tests::playback::Summary;
use tessera_tests::probe::streams_of;

const JOB_TIMEOUT: Duration = Duration::from_secs(180);

/// Publishes `body` to the events queue (declared by the dispatcher at start).
fn publish(farm: &Farm, body: Vec<u8>) {
    farm.with_broker(|q| async move {
        q.declare(WATCH_EVENTS_QUEUE).await.expect("declare");
        q.publish(WATCH_EVENTS_QUEUE, body).await.expect("publish")
    });
}

/// Waits until a job for `s3://input/{key}` exists, then until it ends; its last view.
fn wait_job_for(farm: &Farm, key: &str) -> Value {
    let started = Instant::now();
    let id = loop {
        if let Some(job) = farm.jobs_for("input", key).first() {
            break job["id"].as_str().expect("job id").to_string();
        }
        assert!(
            started.elapsed() < JOB_TIMEOUT,
            "no job for s3://input/{key}\n--- dispatcher\n{}",
            farm.log("dispatcher.log")
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(
        job["state"],
        "done",
        "{job}\n{}",
        farm.log("dispatcher.log")
    );
    job
}

/// A MinIO-style notification for one created object (key URL-encoded as MinIO does).
fn minio_event(bucket: &str, key: &str, etag: &str, size: u64) -> Vec<u8> {
    let encoded: String = key
        .bytes()
        .map(|b| match b {
            b' ' => "+".to_string(),
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    json!({
        "EventName": "s3:ObjectCreated:Put",
        "Key": format!("{bucket}/{encoded}"),
        "Records": [{
            "eventVersion": "2.0", "eventSource": "minio:s3", "awsRegion": "",
            "eventTime": "2024-05-01T10:00:00.000Z", "eventName": "s3:ObjectCreated:Put",
            "userIdentity": {"principalId": "minioadmin"},
            "requestParameters": {"principalId": "minioadmin", "region": "", "sourceIPAddress": "127.0.0.1"},
            "responseElements": {"x-amz-request-id": "17C9A1B2C3D4E5F6", "x-minio-origin-endpoint": "http://127.0.0.1:9000"},
            "s3": {
                "s3SchemaVersion": "1.0", "configurationId": "Config",
                "bucket": {"name": bucket, "ownerIdentity": {"principalId": "minioadmin"}, "arn": format!("arn:aws:s3:::{bucket}")},
                "object": {"key": encoded, "size": size, "eTag": etag, "contentType": "video/mp4",
                           "userMetadata": {"content-type": "video/mp4"}, "sequencer": "17C9A1B2C3D4E5F7"}
            },
            "source": {"host": "127.0.0.1", "port": "", "userAgent": "MinIO (linux; amd64) minio-go/v7.0.70"}
        }]
    })
    .to_string()
    .into_bytes()
}

#[test]
fn uploads_start_exactly_one_job_by_polling_sidecar_and_s3_events() {
    let mut farm = Farm::start("watch", 2);
    let src = fixture(Fixture::ClosedGopH264);
    let dir = farm.dir.path().to_path_buf();

    // A sidecar (uploaded before its video) and two videos; an empty object is ignored.
    let sidecar = dir.join("b.mp4.json");
    let side = json!({"destination": "s3://output/sidecar/b.mp4", "codec": "h264", "height": 120});
    std::fs::write(&sidecar, side.to_string()).expect("sidecar");
    farm.upload(&sidecar, "input", "incoming/b.mp4.json");
    farm.upload(&src, "input", "incoming/b.mp4");
    farm.upload(&src, "input", "incoming/clip.mp4");
    let empty = dir.join("empty.mp4");
    std::fs::write(&empty, b"").expect("empty file");
    farm.upload(&empty, "input", "incoming/empty.mp4");

    // (1) The poller starts the plain upload with the watch's profile.
    let clip = wait_job_for(&farm, "incoming/clip.mp4");
    assert_eq!(clip["outputs"][0], "s3://output/processed/clip.mp4");
    let out = dir.join("clip-out.mp4");
    farm.download("output", "processed/clip.mp4", &out);
    let (s, o) = (Summary::of(&src), Summary::of(&out));
    assert_eq!(o.frame_count, s.frame_count, "decoded frame counts");

    // (2) The sidecar's output replaces the profile.
    let b = wait_job_for(&farm, "incoming/b.mp4");
    assert_eq!(b["outputs"][0], "s3://output/sidecar/b.mp4");
    let out_b = dir.join("b-out.mp4");
    farm.download("output", "sidecar/b.mp4", &out_b);
    assert_eq!(streams_of(&out_b, "video")[0].height, Some(120));
    assert!(farm.list("output", "processed/b").is_empty());

    // More poll rounds and a restart: still one job per upload, none for the empty object.
    std::thread::sleep(Duration::from_secs(3));
    farm.start_dispatcher();
    std::thread::sleep(Duration::from_secs(3));
    for key in ["incoming/clip.mp4", "incoming/b.mp4"] {
        assert_eq!(farm.jobs_for("input", key).len(), 1, "jobs for {key}");
    }
    assert_eq!(farm.jobs().len(), 2, "{:?}", farm.jobs());

    // (3) S3 events: while the dispatcher is down, a video is uploaded and its event is
    // published twice, next to a malformed message. On start the consumer sees the events
    // before the poller's first round (one interval later).
    farm.kill_dispatcher();
    let key = "incoming/my clip.mp4";
    farm.upload(&src, "input", key);
    let etag = farm.etag("input", key);
    let size = std::fs::metadata(&src).expect("fixture size").len();
    let event = minio_event("input", key, &etag, size);
    publish(&farm, event.clone());
    publish(&farm, event.clone());
    publish(&farm, b"{ this is not an S3 event".to_vec());
    farm.start_dispatcher();
    let ev = wait_job_for(&farm, key);
    assert_eq!(ev["outputs"][0], "s3://output/processed/my clip.mp4");
    let log = farm.log("dispatcher.log");
    let started = log
        .lines()
        .find(|l| l.contains("upload started a job") && l.contains("my clip.mp4"));
    assert!(
        started.is_some_and(|l| l.contains("s3-event")),
        "the event, not the poller, started the job:\n{log}"
    );
    publish(&farm, event);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(farm.jobs_for("input", key).len(), 1, "jobs for {key}");
    assert_eq!(farm.jobs().len(), 3, "{:?}", farm.jobs());
    let dead = dead_letter_queue(WATCH_EVENTS_QUEUE);
    let (ready, dead_len) = farm.with_broker(|q| async move {
        let ready = q.ready_len(WATCH_EVENTS_QUEUE).await.expect("queue length");
        (ready, q.ready_len(&dead).await.expect("dead-letter length"))
    });
    assert_eq!((ready, dead_len), (0, 1), "events left, dead-lettered");
}
