//! Tenants' data on one farm (review N1, H6, H7, M3): a tenant's jobs read and write only
//! under its own prefixes, so no job shape of one tenant reaches another's objects; jobs a
//! watch starts count toward the watch's tenant's quota; upload URLs carry their size and a
//! tenant is given only so many.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tessera_tests::farm::{test_dispatcher_args, Farm, ACME_TOKEN, BETA_TOKEN, TOKEN};
use tessera_tests::fixture::{fixture, Fixture};

fn submit(farm: &Farm, token: &str, job: &Value) -> (u16, Value) {
    farm.http("POST", "/v1/jobs", Some(token), Some(&job.to_string()))
}

/// PUTs `len` bytes to a presigned URL; the HTTP status.
fn put(url: &str, len: usize, dir: &std::path::Path) -> u16 {
    let file = dir.join(format!("body-{len}"));
    std::fs::write(&file, vec![b'x'; len]).unwrap();
    let out = Command::new("curl")
        .args([
            "-sS",
            "-m",
            "20",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "PUT",
        ])
        .arg("--data-binary")
        .arg(format!("@{}", file.display()))
        .arg(url)
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// Every job shape that names `theirs` somewhere: as the input, as the only destination, as a
/// second destination after one of beta's own, as a package folder holding it, and as a
/// package folder beside it; the rest of each job is beta's own.
fn shapes(theirs: &str) -> Vec<(String, Value)> {
    let own_in = "s3://input/beta/a.mp4";
    let own_out = json!({"destination": "s3://output/beta/a.mp4"});
    let folder = format!("{}/", theirs.rsplit_once('/').map_or(theirs, |(d, _)| d));
    let package = |d: &str| json!({"destination": d, "package": {"format": "hls"}});
    vec![
        (
            "input".into(),
            json!({"input": theirs, "outputs": [own_out]}),
        ),
        (
            "destination".into(),
            json!({"input": own_in, "outputs": [{"destination": theirs}]}),
        ),
        (
            "second destination".into(),
            json!({"input": own_in, "outputs": [own_out, {"destination": theirs}]}),
        ),
        (
            "package folder".into(),
            json!({"input": own_in, "outputs": [package(&folder)]}),
        ),
        (
            "package beside".into(),
            json!({"input": own_in, "outputs": [package(&format!("{theirs}-pkg/"))]}),
        ),
    ]
}

#[test]
fn no_job_of_one_tenant_reaches_another_tenants_objects() {
    let farm = Farm::start("scopes", 0);
    let clip = fixture(Fixture::NoAudio);
    let size = std::fs::metadata(&clip).unwrap().len();
    // acme's upload, through its presigned URL, and its input and output.
    let body = json!({"filename": "clip.mp4", "size": size}).to_string();
    let (code, up) = farm.http("POST", "/v1/uploads", Some(ACME_TOKEN), Some(&body));
    assert_eq!(code, 201, "{up}");
    let upload = up["input"].as_str().unwrap().to_string();
    let upload_key = upload.trim_start_matches("s3://input/").to_string();
    farm.upload(&clip, "input", &upload_key);
    farm.upload(&clip, "input", "acme/a.mp4");
    farm.upload(&clip, "output", "acme/done/a.mp4");
    farm.upload(&clip, "input", "beta/a.mp4");
    // beta's job on acme's upload: refused (before: 202, and the job ended done).
    let theirs = [
        upload.clone(),
        "s3://input/acme/a.mp4".to_string(),
        "s3://output/acme/done/a.mp4".to_string(),
    ];
    for object in &theirs {
        for (shape, job) in shapes(object) {
            let (code, resp) = submit(&farm, BETA_TOKEN, &job);
            assert_eq!(code, 403, "{shape} {object}: {resp}");
            assert_eq!(resp["error"]["code"], "object_not_allowed", "{resp}");
            let msg = resp["error"]["message"].as_str().unwrap_or("");
            assert!(msg.contains("'beta'"), "{shape}: {msg}");
        }
    }
    // Nothing of acme's moved, and no job of beta's exists to move it.
    let (_, list) = farm.http("GET", "/v1/jobs", Some(BETA_TOKEN), None);
    assert_eq!(list["jobs"].as_array().map(Vec::len), Some(0), "{list}");
    assert_eq!(farm.list("output", "acme/"), ["acme/done/a.mp4"]);
    // Beside the refusals: beta's own job is accepted, acme's job on its upload too, and
    // the admin (the bare token) may use any key of the allowed buckets.
    let own = json!({"input": "s3://input/beta/a.mp4", "outputs": [{"destination": "s3://output/beta/a.mp4"}]});
    assert_eq!(submit(&farm, BETA_TOKEN, &own).0, 202);
    let mine = json!({"input": upload, "outputs": [{"destination": "s3://output/acme/up.mp4"}]});
    assert_eq!(submit(&farm, ACME_TOKEN, &mine).0, 202);
    let admin = json!({"input": "s3://input/acme/a.mp4", "outputs": [{"destination": "s3://output/x.mp4"}]});
    assert_eq!(submit(&farm, TOKEN, &admin).0, 202);
    // No job writes into a watched prefix (input/incoming/): its output would start a job.
    let into = json!({"input": "s3://input/acme/a.mp4", "outputs": [{"destination": "s3://input/incoming/x.mp4"}]});
    let (code, resp) = submit(&farm, TOKEN, &into);
    assert_eq!(
        (code, resp["error"]["code"].as_str()),
        (422, Some("invalid_job")),
        "{resp}"
    );
}

/// The ids of the jobs `token` sees.
fn jobs_of(farm: &Farm, token: &str) -> Vec<String> {
    let (_, list) = farm.http("GET", "/v1/jobs", Some(token), None);
    let jobs = list["jobs"].as_array().cloned().unwrap_or_default();
    jobs.iter()
        .filter_map(|j| j["id"].as_str().map(String::from))
        .collect()
}

fn wait_for_jobs(farm: &Farm, token: &str, n: usize) -> Vec<String> {
    let started = Instant::now();
    loop {
        let ids = jobs_of(farm, token);
        if ids.len() >= n {
            return ids;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{n} jobs never appeared: {ids:?}\n{}",
            farm.log("dispatcher")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn jobs_a_watch_starts_count_toward_its_tenants_quota() {
    let mut args = test_dispatcher_args();
    args.extend([
        "--watch".into(),
        "acme:input/acme/incoming/=output/acme/processed/".into(),
    ]);
    let farm = Farm::start_with_args(
        "watch-quota",
        0,
        args,
        &[("TESSERA_MAX_JOBS_PER_TENANT", "1")],
    );
    let clip = fixture(Fixture::NoAudio);
    farm.upload(&clip, "input", "acme/incoming/one.mp4");
    // The watch's job is acme's: acme sees it, and it fills acme's quota of one.
    let ids = wait_for_jobs(&farm, ACME_TOKEN, 1);
    farm.upload(&clip, "input", "acme/a.mp4");
    let job = json!({"input": "s3://input/acme/a.mp4", "outputs": [{"destination": "s3://output/acme/a.mp4"}]});
    let (code, resp) = submit(&farm, ACME_TOKEN, &job);
    // Before: 202 (the watch's jobs belonged to `watch`, which had no quota).
    let (_, seen) = farm.http("GET", "/v1/jobs", Some(ACME_TOKEN), None);
    assert_eq!(
        (code, resp["error"]["code"].as_str()),
        (429, Some("too_many_jobs")),
        "{resp} {seen}"
    );
    // A second upload waits while acme is at its quota, and starts once the first ends.
    farm.upload(&clip, "input", "acme/incoming/two.mp4");
    let (code, _) = farm.http(
        "DELETE",
        &format!("/v1/jobs/{}", ids[0]),
        Some(ACME_TOKEN),
        None,
    );
    assert_eq!(code, 202);
    let ids = wait_for_jobs(&farm, ACME_TOKEN, 2);
    let (_, list) = farm.http("GET", "/v1/jobs", Some(ACME_TOKEN), None);
    let inputs: Vec<&str> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|j| j["input"]["key"].as_str())
        .collect();
    assert!(inputs.contains(&"acme/incoming/two.mp4"), "{ids:?} {list}");
}

#[test]
fn upload_urls_carry_their_size_and_a_tenant_is_given_only_so_many() {
    let farm = Farm::start_with(
        "upload-limits",
        0,
        &[
            ("TESSERA_MAX_UPLOAD_URLS", "3"),
            ("TESSERA_MAX_UPLOAD_BYTES", "1000"),
        ],
    );
    let ask = |token: &str, body: Value| {
        farm.http("POST", "/v1/uploads", Some(token), Some(&body.to_string()))
    };
    // A tenant must say how large its upload is, and within the limit.
    let (code, resp) = ask(ACME_TOKEN, json!({"filename": "a.mp4"}));
    assert_eq!(
        (code, resp["error"]["code"].as_str()),
        (422, Some("invalid_upload")),
        "{resp}"
    );
    let (code, resp) = ask(ACME_TOKEN, json!({"filename": "a.mp4", "size": 1001}));
    assert_eq!(code, 422, "{resp}");
    // The URL accepts exactly its size: a longer or shorter body is refused by the store.
    let (code, up) = ask(ACME_TOKEN, json!({"filename": "a.mp4", "size": 100}));
    assert_eq!((code, up["size"].as_u64()), (201, Some(100)), "{up}");
    let url = up["url"].as_str().unwrap();
    let dir = farm.dir.path();
    assert!(
        !(200..300).contains(&put(url, 5000, dir)),
        "a body over the signed size was stored"
    );
    assert!(
        !(200..300).contains(&put(url, 99, dir)),
        "a body under the signed size was stored"
    );
    assert_eq!(put(url, 100, dir), 200);
    // Three URLs per 15 minutes for acme: the refusals above did not count, two more do.
    for _ in 0..2 {
        assert_eq!(
            ask(ACME_TOKEN, json!({"filename": "b.mp4", "size": 1})).0,
            201
        );
    }
    let (code, resp) = ask(ACME_TOKEN, json!({"filename": "c.mp4", "size": 1}));
    assert_eq!(
        (code, resp["error"]["code"].as_str()),
        (429, Some("too_many_uploads")),
        "{resp}"
    );
    // Another tenant has its own count; the admin has none, and may omit the size.
    assert_eq!(
        ask(BETA_TOKEN, json!({"filename": "b.mp4", "size": 1})).0,
        201
    );
    for _ in 0..4 {
        assert_eq!(ask(TOKEN, json!({"filename": "b.mp4"})).0, 201);
    }
}
