//! Deliveries to object destinations that fail part-way leave nothing behind: the dispatcher
//! talks to Garage through a door ([`S3Faults`]) that refuses the server-side copies into one
//! destination prefix after a chosen number went through: the first copy, one amid the
//! package's media segments (with others in flight beside it), the first manifest and the last
//! one. Each job fails with an error that names the destination object and the store's reason,
//! and neither its package nor its file output is left in the bucket. The same for a job of
//! two file outputs whose second one is refused, and again while the store answers every
//! delete 503 SlowDown for 20 s: the rollback waits the outage out. Then the door is healed
//! and the next job is delivered whole. Apart: an output replaced in the work area after its
//! QC gate passed is never delivered (review N6).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tessera_tests::farm::{Farm, TOKEN};
use tessera_tests::s3_faults::S3Faults;
use tessera_tests::{fixture, Fixture};

const JOB_TIMEOUT: Duration = Duration::from_secs(240);

/// Submits a job of `outputs` on the uploaded clip and waits for its end.
fn run(farm: &Farm, outputs: Value) -> Value {
    let body = json!({"input": "s3://input/clip.mp4", "segment_seconds": 2, "outputs": outputs});
    let (code, job) = farm.http("POST", "/v1/jobs", Some(TOKEN), Some(&body.to_string()));
    assert_eq!(code, 202, "{job}");
    farm.wait_job(job["id"].as_str().expect("job id"), JOB_TIMEOUT)
}

/// A file output at `file` and a CMAF package under `package` (both keys in `output`).
fn file_and_package(file: &str, package: &str) -> Value {
    json!([
        {"destination": format!("s3://output/{file}"), "preset": "veryfast"},
        {"package": {"format": "cmaf", "segment_seconds": 1},
         "destination": format!("s3://output/{package}")}
    ])
}

fn is_manifest(key: &str) -> bool {
    key.ends_with(".m3u8") || key.ends_with(".mpd")
}

/// The job failed on a store error that names an object under `under` and the refusal.
fn assert_failed_on_delivery(job: &Value, under: &str, farm: &Farm) {
    assert_eq!(
        job["state"],
        "failed",
        "{job}\n{}",
        tessera_tests::run::tail(&farm.log("dispatcher.log"), 3000)
    );
    assert_eq!(job["error"]["code"], "store_error", "{job}");
    let message = job["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(under) && message.contains("AccessDenied"),
        "the error names neither the destination nor the reason: {message}"
    );
}

#[test]
fn a_delivery_refused_part_way_leaves_nothing_at_the_destinations() {
    let mut farm = Farm::start("delivery", 2);
    farm.upload(&fixture(Fixture::ClosedGopH264), "input", "clip.mp4");
    let door = S3Faults::start(&farm.garage.endpoint);
    farm.set_dispatcher_env("TESSERA_S3_ENDPOINT", &door.endpoint);
    farm.start_dispatcher();

    // Through the open door: the package's objects, media first and manifests last.
    let job = run(&farm, file_and_package("whole.mp4", "whole/"));
    assert_eq!(job["state"], "done", "{job}");
    let keys = farm.list("output", "whole/");
    let manifests = keys.iter().filter(|k| is_manifest(k)).count();
    let media = keys.len() - manifests;
    assert!(manifests >= 3 && media >= 8, "{keys:?}");

    // Refused at the first copy, amid the media, at the first manifest and at the last.
    for (n, pass) in [0, media / 2, media, media + manifests - 1]
        .into_iter()
        .enumerate()
    {
        let (file, package) = (format!("f{n}.mp4"), format!("p{n}/"));
        door.refuse_copies(&format!("/output/p{n}/"), pass);
        let job = run(&farm, file_and_package(&file, &package));
        assert!(
            !door.refused().is_empty(),
            "pass {pass}: nothing was refused"
        );
        assert_failed_on_delivery(&job, &package, &farm);
        let left = farm.list("output", &package);
        assert!(
            left.is_empty(),
            "pass {pass}: left under {package}: {left:?}"
        );
        let left = farm.list("output", &file);
        assert!(
            left.is_empty(),
            "pass {pass}: the file output was left: {left:?}"
        );
    }

    // Two file outputs, the second refused: the first is removed again.
    door.refuse_copies("/output/two-b", 0);
    let job = run(
        &farm,
        json!([
            {"destination": "s3://output/two-a.mp4", "preset": "veryfast"},
            {"destination": "s3://output/two-b.mp4", "preset": "veryfast", "height": 144}
        ]),
    );
    assert_failed_on_delivery(&job, "two-b.mp4", &farm);
    let left = farm.list("output", "two-");
    assert!(left.is_empty(), "left: {left:?}");

    // The same while every delete answers 503 SlowDown for 20 s (the store that refused the
    // copy is in trouble): the rollback retries until the first output is gone.
    door.refuse_copies("/output/slow-b", 0);
    door.unavailable_deletes("/output/slow-", Duration::from_secs(20));
    let job = run(
        &farm,
        json!([
            {"destination": "s3://output/slow-a.mp4", "preset": "veryfast"},
            {"destination": "s3://output/slow-b.mp4", "preset": "veryfast", "height": 144}
        ]),
    );
    assert_failed_on_delivery(&job, "slow-b.mp4", &farm);
    assert!(!door.unavailable().is_empty(), "no delete met the outage");
    let left = farm.list("output", "slow-");
    assert!(left.is_empty(), "left through the outage: {left:?}");

    // Healed: the next job is delivered whole, the same objects as the first.
    door.heal();
    let job = run(&farm, file_and_package("again.mp4", "again/"));
    assert_eq!(job["state"], "done", "{job}");
    let again: Vec<String> = farm
        .list("output", "again/")
        .iter()
        .map(|k| k.replacen("again/", "whole/", 1))
        .collect();
    assert_eq!(again, keys);
    assert_eq!(
        farm.list("output", "again.mp4"),
        vec!["again.mp4".to_string()]
    );
}

/// Review N6: the object delivered is the one the stitch stored after its QC gate passed. The
/// delivery's HEAD of the stitched work object is held at the door while the test writes other
/// bytes over it (any later writer of the key; a duplicate stitch has its own key since
/// C53, `farm_duplicates`); released,
/// the delivery is refused, the job fails naming the objects, and nothing is at the
/// destination. Before, the delivery copied what its HEAD found, the replacement: the job
/// ended `done` with bytes no QC gate had decoded. The whole-input path's case is in
/// `farm_whole`.
#[test]
fn an_output_replaced_after_its_qc_is_never_delivered() {
    let mut farm = Farm::start("delivery-qc", 2);
    farm.upload(&fixture(Fixture::ClosedGopH264), "input", "clip.mp4");
    let door = S3Faults::start(&farm.garage.endpoint);
    farm.set_dispatcher_env("TESSERA_S3_ENDPOINT", &door.endpoint);
    farm.start_dispatcher();
    // The stitched output's key in the work area: `jobs/<job>/<plan>/output/00.<attempt>.mp4`.
    door.hold_heads("/output/00.");
    let body = json!({"input": "s3://input/clip.mp4", "segment_seconds": 2,
        "outputs": [{"destination": "s3://output/checked.mp4", "preset": "veryfast"}]});
    let (code, job) = farm.http("POST", "/v1/jobs", Some(TOKEN), Some(&body.to_string()));
    assert_eq!(code, 202, "{job}");
    let id = job["id"].as_str().expect("job id").to_string();
    let started = Instant::now();
    while door.heads_held().is_empty() {
        assert!(
            started.elapsed() < JOB_TIMEOUT,
            "no delivery HEAD held: {}\n{}",
            farm.job(&id),
            tessera_tests::run::tail(&farm.log("dispatcher.log"), 3000)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let stitched = door.heads_held()[0]
        .trim_start_matches("/work/")
        .to_string();
    assert!(stitched.starts_with(&format!("jobs/{id}/")), "{stitched}");
    // Another valid file of other content: the source clip itself.
    farm.upload(&fixture(Fixture::ClosedGopH264), "work", &stitched);
    door.release_heads();
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(
        job["state"],
        "failed",
        "the replacement was delivered: {job}\n{}",
        tessera_tests::run::tail(&farm.log("dispatcher.log"), 3000)
    );
    assert_eq!(job["error"]["code"], "store_error", "{job}");
    let message = job["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("checked.mp4") && message.contains(&stitched),
        "the error names neither the destination nor the work object: {message}"
    );
    assert!(
        message.contains("not the object that was checked"),
        "{message}"
    );
    let left = farm.list("output", "checked");
    assert!(left.is_empty(), "delivered: {left:?}");
}
