//! The host's `tessera` CLI against the compose farm, as a user runs it: `tessera submit
//! FILE --wait` in the background (uploads through presigned URLs), `tessera status --json`
//! and `tessera list --json`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::Compose;
use crate::run::{run_command_env, tessera_bin};

/// Limit of one `tessera status` or `tessera list`.
const CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// One `tessera submit ... --wait` running in the background, its stdout and stderr in
/// files of the project's directory; killed on drop if it still runs.
pub struct Submit {
    /// What the test calls it (`submit0`): names its output files.
    pub name: String,
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Submit {
    /// Starts `tessera submit ARGS --wait` in `cwd` (the project's directory by default).
    pub fn start(farm: &Compose, name: &str, args: &[&OsStr], cwd: Option<&Path>) -> Submit {
        let out = farm.work.join(format!("{name}.out"));
        let err = farm.work.join(format!("{name}.err"));
        let file = |p: &Path| std::fs::File::create(p).expect("create a submit log");
        let child = Command::new(tessera_bin())
            .arg("submit")
            .args(args)
            .arg("--wait")
            .env("TESSERA_SERVER", farm.server())
            .env("TESSERA_TOKEN", &farm.token)
            .current_dir(cwd.unwrap_or(&farm.work))
            .stdin(Stdio::null())
            .stdout(file(&out))
            .stderr(file(&err))
            .spawn()
            .expect("start tessera submit");
        Submit {
            name: name.to_string(),
            child,
            out,
            err,
        }
    }

    /// Line `n` (from 0) of its stdout: 0 the job id, 1 the output URI once done.
    pub fn line(&self, n: usize) -> Option<String> {
        let text = std::fs::read_to_string(&self.out).ok()?;
        let line = text.lines().nth(n)?.trim();
        (!line.is_empty()).then(|| line.to_string())
    }

    /// Its stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits until it exits: Err (with its stderr) unless it exited 0, or when it still runs
    /// after `timeout` (then it is left running; drop kills it).
    pub fn wait(&mut self, timeout: Duration) -> Result<(), String> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for tessera submit") {
                if status.success() {
                    return Ok(());
                }
                return Err(format!(
                    "{}: {status}\n--- stderr ---\n{}",
                    self.name,
                    self.stderr()
                ));
            }
            if started.elapsed() > timeout {
                return Err(format!("{} still running after {timeout:?}", self.name));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Polls the job until a segment of it is encoded; false when none is within `limit`.
    pub fn wait_first_segment(&self, farm: &Compose, limit: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < limit {
            if self.line(0).is_some_and(|id| segments_done(farm, &id) > 0) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }
}

impl Drop for Submit {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs the host's `tessera ARGS` against the farm; its stdout when it exits 0.
fn tessera(farm: &Compose, args: &[&str]) -> Option<String> {
    let server = farm.server();
    let env = [
        ("TESSERA_SERVER", server.as_str()),
        ("TESSERA_TOKEN", farm.token.as_str()),
    ];
    let run = run_command_env(&tessera_bin(), args, &env, CLI_TIMEOUT);
    (run.status.success() && !run.timed_out).then_some(run.stdout)
}

/// `segments_done` of `tessera status ID --json`; 0 when it cannot be read.
pub fn segments_done(farm: &Compose, id: &str) -> u64 {
    tessera(farm, &["status", id, "--json"])
        .and_then(|out| serde_json::from_str::<serde_json::Value>(&out).ok())
        .and_then(|v| v["segments_done"].as_u64())
        .unwrap_or(0)
}

/// The states of the dispatcher's jobs (`tessera list --json --limit 50`), sorted.
pub fn job_states(farm: &Compose) -> Vec<String> {
    let out = tessera(farm, &["list", "--json", "--limit", "50"])
        .expect("tessera list --json --limit 50 failed");
    let list: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("tessera list --json: {e}\n{out}"));
    states_of(&list)
}

/// The sorted `state`s of a job list: an array of jobs, or an object with one under `jobs`.
pub fn states_of(list: &serde_json::Value) -> Vec<String> {
    let jobs = match list.get("jobs") {
        Some(jobs) => jobs,
        None => list,
    };
    let mut states: Vec<String> = jobs
        .as_array()
        .map(|a| {
            a.iter()
                .map(|j| j["state"].as_str().unwrap_or("?").to_string())
                .collect()
        })
        .unwrap_or_default();
    states.sort();
    states
}
