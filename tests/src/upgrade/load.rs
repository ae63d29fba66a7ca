//! The steady load of a rolling upgrade: clips made with the `ffmpeg` CLI and put in the
//! farm's store, jobs of two outputs each submitted through the HTTP API so that a few are
//! always in flight, and every job followed to its end, tagged with the phase of the upgrade
//! it was submitted in and the one it ended in.
//!
//! Why through the API with curl and not `tessera submit`: a job here has two outputs, and
//! the client must keep working while the dispatcher it talks to is away (a submit is retried
//! with the same `Idempotency-Key`, so a retry whose first answer was lost cannot make a
//! second job).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{json, Value};

use crate::docker_farm::{Compose, MEDIA_BUCKET};
use crate::farm::with_s3_store;
use crate::run::run_ffmpeg_tool;

/// The two outputs of every job: (name suffix, height).
pub const OUTPUTS: [(&str, u32); 2] = [("a", 180), ("b", 120)];

/// A source clip, local and in the farm's store.
#[derive(Debug, Clone)]
pub struct Clip {
    /// The local file (the oracle's reference).
    pub path: PathBuf,
    /// Its key in the media bucket.
    pub key: String,
    /// Its length (s).
    pub seconds: u32,
}

/// Makes one 320x180 25 fps H.264 + AAC clip per length (keyframes every 2 s, each its own
/// tone) in `dir` and uploads each to `s3://tessera-media/inputs/`.
pub fn make_clips(farm: &Compose, dir: &Path, lengths: &[u32]) -> Vec<Clip> {
    lengths
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            let path = dir.join(format!("clip{i}.mp4"));
            let args = format!(
                "-v error -y -f lavfi -i testsrc2=size=320x180:rate=25:duration={d} \
                 -f lavfi -i sine=frequency={}:duration={d} -c:v libx264 -preset ultrafast \
                 -g 50 -c:a aac -b:a 64k -shortest",
                300 + 100 * i
            );
            let mut all: Vec<&OsStr> = args.split_whitespace().map(OsStr::new).collect();
            all.push(path.as_os_str());
            run_ffmpeg_tool("ffmpeg", all).assert_success();
            let key = format!("inputs/clip{i}.mp4");
            upload(farm, &path, &key);
            Clip {
                path,
                key,
                seconds: d,
            }
        })
        .collect()
}

/// Puts a local file at `s3://tessera-media/{key}`.
fn upload(farm: &Compose, src: &Path, key: &str) {
    use tessera_farm::store::Store;
    with_s3_store(farm.s3_config(), MEDIA_BUCKET, |s| async move {
        s.put_file(key, src)
            .await
            .unwrap_or_else(|e| panic!("upload {key}: {e}"))
    });
}

/// An HTTP request to the farm's API with curl (10 s at most): (status, JSON body or Null);
/// None when the API does not answer (the dispatcher is being replaced).
pub fn api(
    farm: &Compose,
    method: &str,
    path: &str,
    body: Option<&Value>,
    key: Option<&str>,
) -> Option<(u16, Value)> {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-m", "10", "-X", method, "-w", "\n%{http_code}"])
        .arg(format!("{}{path}", farm.server()))
        .args(["-H", "content-type: application/json"])
        .args(["-H", &format!("authorization: Bearer {}", farm.token)]);
    if let Some(k) = key {
        cmd.args(["-H", &format!("idempotency-key: {k}")]);
    }
    if let Some(b) = body {
        cmd.args(["--data-binary", &b.to_string()]);
    }
    let out = cmd.output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (json, code) = text.rsplit_once('\n')?;
    let code: u16 = code.trim().parse().ok().filter(|c| *c != 0)?;
    Some((code, serde_json::from_str(json).unwrap_or(Value::Null)))
}

/// One job of the load.
#[derive(Debug, Clone)]
pub struct Tracked {
    /// Its number in the load (names its outputs and idempotency key).
    pub n: usize,
    /// The clip it transcodes.
    pub clip: usize,
    /// The id the API gave it; None until a submit was answered.
    pub id: Option<String>,
    /// The phase it was submitted in.
    pub phase_submitted: usize,
    /// Its last state seen (`queued`, ..., `done`, `failed`, `cancelled`).
    pub state: String,
    /// Its error code and message when it failed.
    pub error: Option<String>,
    /// The phase it ended in, and when.
    pub ended: Option<(usize, Instant)>,
}

impl Tracked {
    /// The keys of its two outputs.
    pub fn output_keys(&self) -> Vec<String> {
        OUTPUTS
            .iter()
            .map(|(s, _)| format!("outputs/job{:03}-{s}.mp4", self.n))
            .collect()
    }

    /// Whether it has ended (done, failed or cancelled).
    pub fn is_final(&self) -> bool {
        self.ended.is_some()
    }
}

/// The load: jobs submitted so that `in_flight` are running until at least `min_jobs` were
/// submitted and the last phase has begun, clips taken in turn.
pub struct Load {
    /// Every job submitted (or being submitted), in order.
    pub jobs: Vec<Tracked>,
    /// How many unfinished jobs it keeps.
    pub in_flight: usize,
    /// How many jobs it submits at least.
    pub min_jobs: usize,
    /// How many clips there are (job `n` takes clip `n % clips`).
    pub clips: usize,
    /// Submits that got no answer, or not 202, and were tried again.
    pub submit_retries: u32,
    /// The project name, for idempotency keys.
    project: String,
}

impl Load {
    /// A load of `in_flight` jobs at a time over `clips` clips, `min_jobs` at least.
    pub fn new(farm: &Compose, in_flight: usize, min_jobs: usize, clips: usize) -> Load {
        Load {
            jobs: Vec::new(),
            in_flight,
            min_jobs,
            clips,
            submit_retries: 0,
            project: farm.project.clone(),
        }
    }

    /// One round: follows every unfinished job, then submits while fewer than `in_flight`
    /// are unfinished and more are wanted (`last_phase`: the upgrade's last phase has begun).
    pub fn tick(&mut self, farm: &Compose, clips: &[Clip], phase: usize, last_phase: bool) {
        for job in self.jobs.iter_mut().filter(|j| !j.is_final()) {
            if job.id.is_none() {
                continue;
            }
            follow(farm, job, phase);
        }
        let wanted = |load: &Load| load.jobs.len() < load.min_jobs || !last_phase;
        while self.unfinished() < self.in_flight && wanted(self) {
            let n = self.jobs.len();
            self.jobs.push(Tracked {
                n,
                clip: n % self.clips,
                id: None,
                phase_submitted: phase,
                state: "submitting".into(),
                error: None,
                ended: None,
            });
        }
        let project = self.project.clone();
        let mut retries = 0;
        for job in self.jobs.iter_mut().filter(|j| j.id.is_none()) {
            match submit(farm, job, &clips[job.clip], &project) {
                Some(id) => {
                    job.id = Some(id);
                    job.state = "queued".into();
                }
                None => retries += 1,
            }
        }
        self.submit_retries += retries;
    }

    /// Jobs not yet ended (those still being submitted among them).
    pub fn unfinished(&self) -> usize {
        self.jobs.iter().filter(|j| !j.is_final()).count()
    }

    /// Jobs that ended in `phase`, and how many of them are done.
    pub fn ended_in(&self, phase: usize) -> (usize, usize) {
        let ended = self
            .jobs
            .iter()
            .filter(|j| j.ended.is_some_and(|(p, _)| p == phase));
        let (mut all, mut done) = (0, 0);
        for j in ended {
            all += 1;
            done += usize::from(j.state == "done");
        }
        (all, done)
    }

    /// The state of job `n`, if it exists.
    pub fn state(&self, n: usize) -> Option<&str> {
        self.jobs.get(n).map(|j| j.state.as_str())
    }
}

/// POST /v1/jobs for `job`: its clip to its two outputs, ultrafast; the job id when the API
/// took it (202, or 200 for a repeated idempotency key).
fn submit(farm: &Compose, job: &Tracked, clip: &Clip, project: &str) -> Option<String> {
    let outputs: Vec<Value> = OUTPUTS
        .iter()
        .zip(job.output_keys())
        .map(|((_, height), key)| {
            json!({"codec": "h264", "preset": "ultrafast", "crf": 30, "height": height,
                   "destination": format!("s3://{MEDIA_BUCKET}/{key}")})
        })
        .collect();
    let body = json!({"input": format!("s3://{MEDIA_BUCKET}/{}", clip.key), "outputs": outputs});
    let key = format!("{project}-job{}", job.n);
    let (code, answer) = api(farm, "POST", "/v1/jobs", Some(&body), Some(&key))?;
    if !(200..=202).contains(&code) {
        eprintln!("[upgrade] submit job {}: {code} {answer}", job.n);
        return None;
    }
    answer["id"].as_str().map(String::from)
}

/// Reads `job`'s state; marks it ended in `phase` when it reached a final state.
fn follow(farm: &Compose, job: &mut Tracked, phase: usize) {
    let Some(id) = &job.id else { return };
    let Some((200, view)) = api(farm, "GET", &format!("/v1/jobs/{id}"), None, None) else {
        return;
    };
    let state = view["state"].as_str().unwrap_or("?").to_string();
    if matches!(state.as_str(), "done" | "failed" | "cancelled") {
        job.ended = Some((phase, Instant::now()));
        if state != "done" {
            job.error = Some(format!(
                "{}: {}",
                view["error"]["code"].as_str().unwrap_or("?"),
                view["error"]["message"]
                    .as_str()
                    .unwrap_or(&view.to_string())
            ));
        }
    }
    job.state = state;
}
