//! `tessera submit/status/list/cancel` against a real farm (dispatcher and workers as
//! processes, RabbitMQ, Garage): a local file uploaded through `POST /v1/uploads` and
//! followed to its output, an `s3://` input with the default output, the readable and JSON
//! views, cancelling, and the errors a user meets first.

use std::time::Duration;

use serde_json::Value;
use tessera_tests::farm::{Farm, TOKEN};
use tessera_tests::fixture::{fixture, random_file, Fixture};
use tessera_tests::playback::Summary;
use tessera_tests::run::{run_command, tessera_bin, Run};

const JOB_TIMEOUT: Duration = Duration::from_secs(180);

/// Runs `tessera` against the farm's API as a user would: the server in `TESSERA_SERVER`, the
/// token (when given) in `TESSERA_TOKEN`, no config file.
fn tessera(farm: &Farm, token: Option<&str>, args: &[&str]) -> Run {
    let mut argv: Vec<String> = ["-u", "TESSERA_TOKEN", "-u", "TESSERA_CONFIG"]
        .map(String::from)
        .to_vec();
    argv.push(format!("TESSERA_SERVER={}", farm.api));
    if let Some(t) = token {
        argv.push(format!("TESSERA_TOKEN={t}"));
    }
    argv.push(tessera_bin().to_string_lossy().into_owned());
    argv.extend(args.iter().map(|a| a.to_string()));
    run_command(std::path::Path::new("env"), argv, Duration::from_secs(300))
}

fn fails_with(run: &Run, words: &[&str]) {
    assert!(
        !run.status.success() && !run.timed_out,
        "should fail\n{}",
        run.describe()
    );
    for w in words {
        assert!(
            run.stderr.contains(w),
            "stderr lacks '{w}'\n{}",
            run.describe()
        );
    }
}

fn json_of(run: &Run) -> Value {
    run.assert_success();
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}\n{}", run.describe()))
}

#[test]
fn cli_uploads_submits_follows_and_manages_jobs() {
    let mut farm = Farm::start("cli", 2);
    let clip = farm.dir.path().join("my clip.mp4");
    std::fs::copy(fixture(Fixture::ClosedGopH264), &clip).expect("copy fixture");
    let clip_arg = clip.to_str().expect("utf-8 path");

    // What a user meets first: a missing file, a wrong token, a server that is not there.
    let missing = farm.dir.path().join("no-such-clip.mp4");
    let run = tessera(&farm, Some(TOKEN), &["submit", missing.to_str().unwrap()]);
    fails_with(&run, &["no-such-clip.mp4", "no such file"]);
    let run = tessera(
        &farm,
        Some("wrong-token"),
        &["submit", clip_arg, "-o", "s3://output/w.mp4"],
    );
    fails_with(&run, &["unauthorized"]);
    let run = tessera(&farm, Some("wrong-token"), &["submit", "s3://input/a.mp4"]);
    fails_with(&run, &["401", "unauthorized"]);
    fails_with(&tessera(&farm, None, &["list"]), &["TESSERA_TOKEN"]);
    let run = tessera(
        &farm,
        Some(TOKEN),
        &["list", "--server", "http://127.0.0.1:1"],
    );
    fails_with(&run, &["cannot reach", "http://127.0.0.1:1"]);

    // The upload route's rules.
    let post = |token, body: &str| farm.http("POST", "/v1/uploads", token, Some(body));
    assert_eq!(post(None, r#"{"filename": "a.mp4"}"#).0, 401);
    let (code, err) = post(Some(TOKEN), r#"{"bucket": "private", "key": "a.mp4"}"#);
    assert_eq!(
        (code, err["error"]["code"].as_str()),
        (403, Some("bucket_not_allowed"))
    );
    let (code, err) = post(Some(TOKEN), r#"{"bucket": "input", "key": "a/../b.mp4"}"#);
    assert_eq!(code, 422, "{err}");
    assert_eq!(post(Some(TOKEN), r#"{"filename": "a", "key": "b"}"#).0, 422);
    let (code, up) = post(Some(TOKEN), r#"{"filename": "../x/My Clip (2).mp4"}"#);
    assert_eq!(code, 201, "{up}");
    let input = up["input"].as_str().unwrap_or_default();
    assert!(
        input.starts_with("s3://input/uploads/") && input.ends_with("/My_Clip__2_.mp4"),
        "{up}"
    );
    assert_eq!(up["expires_in"], 900);
    assert!(
        up["url"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&farm.garage.endpoint),
        "{up}"
    );

    // A local file: uploaded, transcoded, followed to the end.
    let run = tessera(
        &farm,
        Some(TOKEN),
        &[
            "submit",
            clip_arg,
            "--output",
            "s3://output/x.mp4",
            "--wait",
            "--preset",
            "veryfast",
        ],
    );
    run.assert_success();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "job id, then output\n{}", run.describe());
    let (id, output) = (lines[0].to_string(), lines[1]);
    assert_eq!(output, "s3://output/x.mp4");
    assert!(
        run.stderr.contains(&format!("job {id}: done")),
        "{}",
        run.describe()
    );
    let out = farm.dir.path().join("x.mp4");
    farm.download("output", "x.mp4", &out);
    let source = Summary::of(&clip);
    assert_eq!(
        Summary::of(&out).frame_count,
        source.frame_count,
        "decoded frames"
    );

    // The uploaded object, submitted by its s3:// URI with the default output, no --wait.
    let uploads = farm.list("input", "uploads/");
    assert_eq!(uploads.len(), 1, "{uploads:?}");
    assert!(uploads[0].ends_with("/my_clip.mp4"), "{uploads:?}");
    let uploaded = format!("s3://input/{}", uploads[0]);
    let run = tessera(
        &farm,
        Some(TOKEN),
        &["submit", &uploaded, "--preset", "veryfast"],
    );
    run.assert_success();
    let id2 = run.stdout.trim().to_string();
    assert!(!id2.is_empty() && !id2.contains('\n'), "{}", run.describe());
    let run = tessera(&farm, Some(TOKEN), &["status", &id2]);
    run.assert_success();
    assert!(
        run.stdout.contains(&format!("job:      {id2}\n")),
        "{}",
        run.describe()
    );
    assert!(
        run.stdout.contains("input:    s3://input/uploads/"),
        "{}",
        run.describe()
    );
    let job = farm.wait_job(&id2, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    let run = tessera(&farm, Some(TOKEN), &["status", &id2]);
    run.assert_success();
    for line in [
        "state:    done\n",
        "output:   s3://input/outputs/my_clip-h264.mp4\n",
    ] {
        assert!(
            run.stdout.contains(line),
            "lacks {line:?}\n{}",
            run.describe()
        );
    }
    let job = json_of(&tessera(&farm, Some(TOKEN), &["status", &id2, "--json"]));
    assert_eq!(job["percent"], 100.0, "{job}");
    let out2 = farm.dir.path().join("default.mp4");
    farm.download("input", "outputs/my_clip-h264.mp4", &out2);
    assert_eq!(Summary::of(&out2).frame_count, source.frame_count);

    // list: a table, a state filter, JSON.
    let run = tessera(&farm, Some(TOKEN), &["list"]);
    run.assert_success();
    assert!(run.stdout.starts_with("ID "), "{}", run.describe());
    assert!(
        run.stdout.contains(&id) && run.stdout.contains(&id2),
        "{}",
        run.describe()
    );
    let listed = json_of(&tessera(
        &farm,
        Some(TOKEN),
        &["list", "--state", "done", "--json"],
    ));
    let ids: Vec<&str> = listed["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["id"].as_str().unwrap_or(""))
        .collect();
    assert!(
        ids.contains(&id.as_str()) && ids.contains(&id2.as_str()),
        "{listed}"
    );
    let run = tessera(&farm, Some(TOKEN), &["list", "--state", "failed"]);
    assert_eq!(run.assert_success().stdout, "no jobs\n");

    // cancel: a running job, a finished one, an unknown one.
    let run = tessera(
        &farm,
        Some(TOKEN),
        &["submit", &uploaded, "-o", "s3://output/c.mp4"],
    );
    let id3 = run.assert_success().stdout.trim().to_string();
    let run = tessera(&farm, Some(TOKEN), &["cancel", &id3]);
    assert_eq!(
        run.assert_success().stdout,
        format!("job {id3} cancelled\n")
    );
    let job = farm.wait_job(&id3, JOB_TIMEOUT);
    assert_eq!(job["state"], "cancelled", "{job}");
    fails_with(
        &tessera(&farm, Some(TOKEN), &["cancel", &id]),
        &["409", "job_finished"],
    );
    fails_with(
        &tessera(&farm, Some(TOKEN), &["status", "nope"]),
        &["404", "not_found"],
    );

    // A job that fails: --wait exits 1 with the error's code and message.
    let junk = random_file(farm.dir.path(), "junk.mp4", 100_000, 3);
    let run = tessera(
        &farm,
        Some(TOKEN),
        &[
            "submit",
            junk.to_str().unwrap(),
            "-o",
            "s3://output/j.mp4",
            "--wait",
        ],
    );
    assert_eq!(run.status.code(), Some(1), "{}", run.describe());
    assert!(
        run.stderr.contains("failed: input_invalid"),
        "{}",
        run.describe()
    );
    assert!(farm.workers_alive(), "a worker died");
}
