//! The distributed farm end to end: dispatcher and two workers as real processes over a real
//! RabbitMQ vhost and a real Garage, driven through the HTTP API.

use std::time::Duration;

use serde_json::json;
use tessera_tests::farm::{Farm, TOKEN};
use tessera_tests::fixture::{fixture, random_file, Fixture};
use tessera_tests::playback::Summary;
use tessera_tests::probe::psnr;

const JOB_TIMEOUT: Duration = Duration::from_secs(180);

fn submit(farm: &Farm, input: &str, dest: &str, key: Option<&str>) -> (u16, serde_json::Value) {
    submit_outputs(
        farm,
        input,
        &[json!({"destination": dest, "preset": "veryfast"})],
        key,
    )
}

fn submit_outputs(
    farm: &Farm,
    input: &str,
    outputs: &[serde_json::Value],
    key: Option<&str>,
) -> (u16, serde_json::Value) {
    let body = json!({"input": input, "outputs": outputs}).to_string();
    match key {
        None => farm.http("POST", "/v1/jobs", Some(TOKEN), Some(&body)),
        Some(k) => {
            // curl through the harness does not take extra headers; build the call here.
            let out = std::process::Command::new("curl")
                .args(["-sS", "-m", "20", "-X", "POST", "-w", "\n%{http_code}"])
                .arg(format!("{}/v1/jobs", farm.api))
                .args(["-H", "content-type: application/json"])
                .args(["-H", &format!("authorization: Bearer {TOKEN}")])
                .args(["-H", &format!("idempotency-key: {k}")])
                .args(["--data-binary", &body])
                .output()
                .expect("curl");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let (j, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
            (
                code.trim().parse().unwrap_or(0),
                serde_json::from_str(j).unwrap_or_default(),
            )
        }
    }
}

#[test]
fn api_submit_to_output_in_s3_is_frame_exact_and_api_guards_hold() {
    let mut farm = Farm::start("e2e", 2);
    let src = fixture(Fixture::ClosedGopH264);
    farm.upload(&src, "input", "uploads/a.mp4");

    // Auth and bucket rules first.
    let body = json!({"input": "s3://input/uploads/a.mp4", "outputs": [{"destination": "s3://output/a.mp4"}]}).to_string();
    assert_eq!(farm.http("POST", "/v1/jobs", None, Some(&body)).0, 401);
    assert_eq!(
        farm.http("POST", "/v1/jobs", Some("wrong-token"), Some(&body))
            .0,
        401
    );
    assert_eq!(
        farm.http("GET", "/v1/jobs", Some("wrong-token"), None).0,
        401
    );
    let (code, err) = submit(&farm, "s3://private/a.mp4", "s3://output/a.mp4", None);
    assert_eq!(code, 403, "{err}");
    assert_eq!(err["error"]["code"], "bucket_not_allowed");
    assert_eq!(
        submit(
            &farm,
            "s3://input/uploads/a.mp4",
            "s3://private/a.mp4",
            None
        )
        .0,
        403
    );
    assert_eq!(farm.http("GET", "/healthz", None, None).0, 200);
    assert_eq!(farm.http("GET", "/v1/jobs/nope", Some(TOKEN), None).0, 404);

    // A job with two outputs (one decode, two encodes), submitted twice with one
    // idempotency key: one job.
    let outputs = [
        json!({"destination": "s3://output/results/a.mp4", "preset": "veryfast"}),
        json!({"destination": "s3://output/results/a small.mkv", "preset": "ultrafast", "height": 144}),
    ];
    let (code, first) = submit_outputs(&farm, "s3://input/uploads/a.mp4", &outputs, Some("k-1"));
    assert_eq!(code, 202, "{first}");
    let id = first["id"].as_str().expect("id").to_string();
    let (code, again) = submit_outputs(&farm, "s3://input/uploads/a.mp4", &outputs, Some("k-1"));
    assert_eq!((code, again["id"].as_str()), (202, Some(id.as_str())));

    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(
        job["state"],
        "done",
        "{job}\n{}",
        farm.log("dispatcher.log")
    );
    assert_eq!(job["percent"], 100.0);
    assert!(job["segments_total"].as_u64().unwrap_or(0) >= 3, "{job}");
    assert_eq!(job["segments_total"], job["segments_done"]);
    assert_eq!(job["outputs"][0], "s3://output/results/a.mp4");

    // The dispatcher's metrics count the job, its segments and its outputs.
    let segments = job["segments_total"].as_u64().unwrap_or(0) as f64;
    assert!(farm.metric("tessera_segments_done_total") >= segments);
    assert!(farm.metric("tessera_jobs_finished_total{outcome=\"done\"}") >= 1.0);
    assert!(farm.metric("tessera_job_wall_seconds_count") >= 1.0);
    assert!(farm.metric("tessera_output_bytes_total") > 0.0);
    assert_eq!(farm.metric("tessera_jobs{state=\"done\"}"), 1.0);

    let out = farm.dir.path().join("a-out.mp4");
    farm.download("output", "results/a.mp4", &out);
    let (s, o) = (Summary::of(&src), Summary::of(&out));
    assert_eq!(o.frame_count, s.frame_count, "decoded frame counts");
    let (st, ot) = (s.rel_times(), o.rel_times());
    let tol = s.min_frame_interval();
    for (i, (a, b)) in st.iter().zip(&ot).enumerate() {
        assert!(
            (a - b).abs() <= tol,
            "frame {i}: source {a:.4} s, output {b:.4} s"
        );
    }
    assert_eq!(o.audio.len(), s.audio.len());
    assert!((o.audio[0].duration() - s.audio[0].duration()).abs() <= 0.1);
    let db = psnr(&out, &src);
    assert!(db >= 30.0, "PSNR {db:.2} dB");

    // The second output: same frames and timestamps, 144 lines high, Matroska.
    assert_eq!(job["outputs"][1], "s3://output/results/a small.mkv");
    let small = farm.dir.path().join("a-small.mkv");
    farm.download("output", "results/a small.mkv", &small);
    let m = Summary::of(&small);
    assert_eq!(m.frame_count, s.frame_count, "second output's frame count");
    for (i, (a, b)) in st.iter().zip(&m.rel_times()).enumerate() {
        assert!(
            (a - b).abs() <= tol,
            "small frame {i}: {a:.4} s vs {b:.4} s"
        );
    }
    assert_eq!(m.video_info.height, Some(144));
    assert_eq!(m.audio.len(), s.audio.len());
    assert!(std::fs::read(&small)
        .expect("small")
        .starts_with(&[0x1a, 0x45, 0xdf, 0xa3]));
    assert_eq!(farm.list("output", "results/").len(), 2);

    // The work area is cleaned.
    let left = farm.list("work", "jobs/");
    assert!(left.is_empty(), "work area not cleaned: {left:?}");

    // A poison input fails with its reason; workers stay up and the next job still works.
    let junk = random_file(farm.dir.path(), "junk.mp4", 200_000, 7);
    farm.upload(&junk, "input", "uploads/junk.mp4");
    let (code, bad) = submit(
        &farm,
        "s3://input/uploads/junk.mp4",
        "s3://output/results/junk.mp4",
        None,
    );
    assert_eq!(code, 202, "{bad}");
    let bad = farm.wait_job(bad["id"].as_str().expect("id"), JOB_TIMEOUT);
    assert_eq!(bad["state"], "failed", "{bad}");
    assert_eq!(bad["error"]["code"], "input_invalid", "{bad}");
    assert!(farm.metric("tessera_jobs_failed_total{code=\"input_invalid\"}") >= 1.0);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("not a readable media file"),
        "{bad}"
    );
    assert!(farm.workers_alive(), "a worker died");

    // The dispatcher restarts with its database: the finished job is still done.
    farm.start_dispatcher();
    let (code, after) = farm.http("GET", &format!("/v1/jobs/{id}"), Some(TOKEN), None);
    assert_eq!((code, after["state"].as_str()), (200, Some("done")));
    let (code, list) = farm.http("GET", "/v1/jobs?state=failed", Some(TOKEN), None);
    assert_eq!(code, 200);
    assert_eq!(list["jobs"].as_array().map(Vec::len), Some(1));
}
