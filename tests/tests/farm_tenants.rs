//! Tenants on one farm (review H6, H7): a token stands for a tenant; a tenant sees, lists and
//! cancels only its own jobs, its idempotency keys are its own, and its upload URLs write
//! only under its upload prefix. The admin token sees everything. Each tenant's jobs read and
//! write under `<bucket>/<tenant>/` (farm_tenant_scopes.rs checks that boundary).

use std::time::Duration;

use serde_json::{json, Value};
use tessera_tests::farm::{Farm, ACME_TOKEN, BETA_TOKEN, TOKEN};
use tessera_tests::fixture::{fixture, Fixture};

/// Submits, as the tenant of `token`, `s3://input/<tenant>/a.mp4` to `dest`.
fn submit_as(farm: &Farm, token: &str, key: Option<&str>, dest: &str) -> (u16, Value) {
    let tenant = if token == ACME_TOKEN { "acme" } else { "beta" };
    let input = format!("s3://input/{tenant}/a.mp4");
    let body = json!({"input": input, "outputs": [{"destination": dest}]});
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-sS", "-m", "20", "-X", "POST", "-w", "\n%{http_code}"])
        .arg(format!("{}/v1/jobs", farm.api))
        .args(["-H", "content-type: application/json"])
        .args(["-H", &format!("authorization: Bearer {token}")])
        .args(["--data-binary", &body.to_string()]);
    if let Some(k) = key {
        cmd.args(["-H", &format!("idempotency-key: {k}")]);
    }
    let out = cmd.output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (json, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (
        code.trim().parse().unwrap_or(0),
        serde_json::from_str(json).unwrap_or(Value::Null),
    )
}

fn ids(list: &Value) -> Vec<String> {
    list["jobs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|j| j["id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn tenants_see_and_cancel_only_their_own_jobs() {
    let farm = Farm::start("tenants", 0);
    farm.upload(&fixture(Fixture::NoAudio), "input", "acme/a.mp4");
    farm.upload(&fixture(Fixture::NoAudio), "input", "beta/a.mp4");
    let (code, a) = submit_as(
        &farm,
        ACME_TOKEN,
        Some("same-key"),
        "s3://output/acme/acme.mp4",
    );
    assert_eq!(code, 202, "{a}");
    let acme_job = a["id"].as_str().unwrap().to_string();
    // The same idempotency key from another tenant is another job, not acme's.
    let (code, b) = submit_as(
        &farm,
        BETA_TOKEN,
        Some("same-key"),
        "s3://output/beta/beta.mp4",
    );
    assert_eq!(code, 202, "{b}");
    let beta_job = b["id"].as_str().unwrap().to_string();
    assert_ne!(
        acme_job, beta_job,
        "a key of another tenant returned its job"
    );
    // The same key again from acme with another body: refused, not silently acme's job.
    let (code, again) = submit_as(
        &farm,
        ACME_TOKEN,
        Some("same-key"),
        "s3://output/acme/other.mp4",
    );
    assert_eq!(code, 409, "{again}");
    let (code, same) = submit_as(
        &farm,
        ACME_TOKEN,
        Some("same-key"),
        "s3://output/acme/acme.mp4",
    );
    assert_eq!(
        (code, same["id"].as_str()),
        (202, Some(acme_job.as_str())),
        "{same}"
    );

    // beta cannot read or cancel acme's job: it does not exist for beta.
    let path = format!("/v1/jobs/{acme_job}");
    let (code, _) = farm.http("GET", &path, Some(BETA_TOKEN), None);
    assert_eq!(code, 404);
    let (code, _) = farm.http("DELETE", &path, Some(BETA_TOKEN), None);
    assert_eq!(code, 404);
    let (code, view) = farm.http("GET", &path, Some(ACME_TOKEN), None);
    assert_eq!(code, 200, "{view}");
    assert_ne!(view["state"], "cancelled", "{view}");
    // Lists: each tenant its own; the admin all.
    let (_, list) = farm.http("GET", "/v1/jobs", Some(BETA_TOKEN), None);
    assert_eq!(ids(&list), vec![beta_job.clone()]);
    let (_, list) = farm.http("GET", "/v1/jobs", Some(TOKEN), None);
    let all = ids(&list);
    assert!(all.contains(&acme_job) && all.contains(&beta_job), "{list}");
    // acme cancels its own.
    let (code, _) = farm.http("DELETE", &path, Some(ACME_TOKEN), None);
    assert_eq!(code, 202);
    let job = farm.wait_job(&acme_job, Duration::from_secs(60));
    assert_eq!(job["state"], "cancelled", "{job}");
}

#[test]
fn a_tenant_uploads_only_under_its_own_prefix() {
    let farm = Farm::start("uploads", 0);
    let post = |token: &str, body: Value| {
        farm.http("POST", "/v1/uploads", Some(token), Some(&body.to_string()))
    };
    let (code, ok) = post(ACME_TOKEN, json!({"filename": "clip.mp4", "size": 1000}));
    assert_eq!(code, 201, "{ok}");
    let input = ok["input"].as_str().unwrap_or("");
    assert!(
        input.starts_with("s3://input/uploads/acme/") && input.ends_with("/clip.mp4"),
        "{ok}"
    );
    assert!(ok["expires_in"].as_u64().is_some_and(|s| s <= 900), "{ok}");
    // A key outside the tenant's prefix (an output, another tenant's upload): refused as an
    // object the tenant may not use, naming the key and the tenant (as a job's would be).
    for key in ["t/a.mp4", "uploads/beta/x.mp4", "processed/out.mp4"] {
        let (code, resp) = post(
            ACME_TOKEN,
            json!({"bucket": "input", "key": key, "size": 1}),
        );
        assert_eq!(code, 403, "{key}: {resp}");
        assert_eq!(resp["error"]["code"], "object_not_allowed", "{resp}");
        let message = resp["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains(&format!("s3://input/{key}")) && message.contains("'acme'"),
            "{resp}"
        );
    }
    let (code, resp) = post(
        ACME_TOKEN,
        json!({"bucket": "input", "key": "uploads/acme/x.mp4", "size": 1}),
    );
    assert_eq!(code, 201, "{resp}");
    // The admin may name any key of an allowed bucket, never the work bucket.
    let (code, _) = post(TOKEN, json!({"bucket": "input", "key": "t/b.mp4"}));
    assert_eq!(code, 201);
    let (code, resp) = post(TOKEN, json!({"bucket": "work", "key": "ended/x"}));
    assert_eq!(code, 403, "{resp}");
}

fn state_of(farm: &Farm, id: &str) -> String {
    let (_, job) = farm.http("GET", &format!("/v1/jobs/{id}"), Some(TOKEN), None);
    job["state"].as_str().unwrap_or("").to_string()
}

fn wait_state(farm: &Farm, id: &str, want: &str) {
    let started = std::time::Instant::now();
    while state_of(farm, id) != want {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "job {id} never {want}: {}",
            state_of(farm, id)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn admission_limits_running_jobs_tenant_quotas_and_input_size() {
    let (small, large) = (fixture(Fixture::NoAudio), fixture(Fixture::Hd720Long));
    let size = |p: &std::path::Path| std::fs::metadata(p).expect("fixture").len();
    assert!(size(&large) > size(&small));
    let max_bytes = size(&small).to_string();
    let farm = Farm::start_with(
        "admission",
        0,
        &[
            ("TESSERA_MAX_RUNNING_JOBS", "1"),
            ("TESSERA_MAX_JOBS_PER_TENANT", "2"),
            ("TESSERA_MAX_INPUT_BYTES", max_bytes.as_str()),
        ],
    );
    farm.upload(&small, "input", "acme/a.mp4");
    farm.upload(&large, "input", "beta/large.mp4");
    // Too large: refused before any download, with the sizes in the reason.
    let body = json!({"input": "s3://input/beta/large.mp4", "outputs": [{"destination": "s3://output/beta/l.mp4"}]});
    let (code, big) = farm.http(
        "POST",
        "/v1/jobs",
        Some(BETA_TOKEN),
        Some(&body.to_string()),
    );
    assert_eq!(code, 202, "{big}");
    let job = farm.wait_job(big["id"].as_str().unwrap(), Duration::from_secs(60));
    assert_eq!(job["error"]["code"], "input_too_large", "{job}");
    assert!(
        job["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("s3://input/beta/large.mp4"),
        "{job}"
    );
    // One job runs (no worker: it stays encoding); the next waits queued.
    let (_, x) = submit_as(&farm, ACME_TOKEN, None, "s3://output/acme/x.mp4");
    let x = x["id"].as_str().unwrap().to_string();
    wait_state(&farm, &x, "encoding");
    let (_, y) = submit_as(&farm, ACME_TOKEN, None, "s3://output/acme/y.mp4");
    let y = y["id"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(state_of(&farm, &y), "queued");
    // acme has 2 unfinished jobs, its quota: a third is refused; beta is not limited by it.
    let (code, z) = submit_as(&farm, ACME_TOKEN, None, "s3://output/acme/z.mp4");
    assert_eq!(
        (code, z["error"]["code"].as_str()),
        (429, Some("too_many_jobs")),
        "{z}"
    );
    let (code, b) = submit_as(&farm, BETA_TOKEN, None, "s3://output/beta/b.mp4");
    assert_eq!(code, 202, "{b}");
    // The running job's end admits the next one.
    let (code, _) = farm.http("DELETE", &format!("/v1/jobs/{x}"), Some(ACME_TOKEN), None);
    assert_eq!(code, 202);
    wait_state(&farm, &y, "encoding");
}
