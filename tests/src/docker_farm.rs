//! The compose farm (`docker/compose.yaml`) on a real Docker engine, as the fault test drives
//! it: a private copy of the compose project with its own secrets and free ports, `compose`
//! and `docker` commands, and the farm's S3 store read back from the host.
//!
//! Why a module: `scripts/docker-farm-test.sh` builds the images; the scenario and its checks
//! (`tests/tests/docker_farm.rs`) run here, in Rust, with the harness's oracle.
//! [`submit`] runs the host's `tessera` CLI against the farm; [`exact`] checks its outputs.

pub mod exact;
pub mod submit;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tessera_farm::store::{S3Config, S3Store};

use crate::farm::with_s3_store;
use crate::run::{run_command, run_command_env, tail, Run};

/// Limit of one `docker` or `compose` command (`docker stop -t 110` waits up to 110 s).
const DOCKER_TIMEOUT: Duration = Duration::from_secs(300);
/// The farm's bucket of inputs and outputs.
pub const MEDIA_BUCKET: &str = "tessera-media";
/// The farm's work bucket.
pub const WORK_BUCKET: &str = "tessera-work";
/// The compose project's files that the test copies (the secrets are made in the copy).
const PROJECT_FILES: [&str; 4] = [
    "compose.yaml",
    "garage.toml",
    "garage-init.sh",
    "make-secrets.sh",
];

/// A compose project of its own (`tessera-ci<pid>`), taken down with its volumes on drop.
/// On a failure (a panic) the last compose logs are printed and its directory is kept.
pub struct Compose {
    /// The project's directory: the compose files, `secrets/`, and what the test writes.
    pub work: PathBuf,
    /// The project name.
    pub project: String,
    /// `docker compose` or `docker-compose`.
    command: Vec<String>,
    /// The host port of the dispatcher's API.
    pub api_port: u16,
    /// The host port of Garage's S3 API.
    pub s3_port: u16,
    /// `TESSERA_TOKEN` of `secrets/client.env`.
    pub token: String,
    /// The farm's S3 key (`secrets/s3.env`).
    key: (String, String),
}

impl Compose {
    /// Copies the project from `docker/` into a new directory, makes its secrets and picks
    /// two free ports. Panics when no Docker engine answers.
    pub fn prepare() -> Compose {
        assert!(
            docker(&["info"]).status.success(),
            "no Docker engine answers here (docker info)"
        );
        let v2 = docker(&["compose", "version"]).status.success();
        let command = if v2 {
            "docker compose"
        } else {
            "docker-compose"
        };
        let work = tempfile::Builder::new()
            .prefix("tessera-docker-farm.")
            .tempdir()
            .expect("temporary directory")
            .keep();
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the workspace");
        let docker_dir = root.join("docker");
        for name in PROJECT_FILES {
            std::fs::copy(docker_dir.join(name), work.join(name))
                .unwrap_or_else(|e| panic!("copy docker/{name}: {e}"));
        }
        let secrets = run_command(
            Path::new("sh"),
            [work.join("make-secrets.sh")],
            DOCKER_TIMEOUT,
        );
        secrets.assert_success();
        let env = |file: &str, key: &str| env_value(&work.join("secrets").join(file), key);
        let [api_port, s3_port] = free_ports();
        Compose {
            token: env("client.env", "TESSERA_TOKEN"),
            key: (
                env("s3.env", "TESSERA_S3_ACCESS_KEY_ID"),
                env("s3.env", "TESSERA_S3_SECRET_ACCESS_KEY"),
            ),
            project: format!("tessera-ci{}", std::process::id()),
            command: command.split(' ').map(String::from).collect(),
            api_port,
            s3_port,
            work,
        }
    }

    /// The dispatcher's API as the host reaches it.
    pub fn server(&self) -> String {
        format!("http://127.0.0.1:{}", self.api_port)
    }

    /// Runs `compose -f compose.yaml -p PROJECT ARGS` with the farm's ports, 2 s segments and
    /// parallelism 4.
    pub fn compose(&self, args: &[&str]) -> Run {
        let settings = [
            ("TESSERA_SEGMENT_SECONDS", "2"),
            ("TESSERA_PARALLELISM", "4"),
        ];
        self.compose_with(args, &settings, DOCKER_TIMEOUT)
    }

    /// Runs `compose -f compose.yaml -p PROJECT ARGS` with the farm's ports and `env` besides
    /// (the farm's settings, the release to run), within `timeout`. Why: the rolling upgrade
    /// drives the same farm with other settings and releases.
    pub fn compose_with(&self, args: &[&str], env: &[(&str, &str)], timeout: Duration) -> Run {
        let file = self.work.join("compose.yaml");
        let mut all: Vec<&std::ffi::OsStr> =
            self.command[1..].iter().map(std::ffi::OsStr::new).collect();
        all.extend([
            "-f".as_ref(),
            file.as_os_str(),
            "-p".as_ref(),
            self.project.as_ref(),
        ]);
        all.extend(args.iter().map(std::ffi::OsStr::new));
        let (api, s3) = (self.api_port.to_string(), self.s3_port.to_string());
        let mut all_env = vec![
            ("TESSERA_API_PORT", api.as_str()),
            ("TESSERA_S3_PORT", s3.as_str()),
        ];
        all_env.extend_from_slice(env);
        run_command_env(Path::new(&self.command[0]), all, &all_env, timeout)
    }

    /// `compose up ARGS` (e.g. `-d --scale worker=4`); panics with its output if it fails.
    pub fn up(&self, args: &[&str]) {
        let mut all = vec!["up"];
        all.extend_from_slice(args);
        let run = self.compose(&all);
        assert!(
            run.status.success() && !run.timed_out,
            "compose up {args:?} failed\n{}",
            run.describe()
        );
    }

    /// Ids of the running containers of `service`, sorted.
    pub fn containers(&self, service: &str) -> Vec<String> {
        let project = format!("label=com.docker.compose.project={}", self.project);
        let service = format!("label=com.docker.compose.service={service}");
        let run = docker(&["ps", "-q", "--filter", &project, "--filter", &service]);
        run.assert_success();
        let mut ids: Vec<String> = run.stdout.split_whitespace().map(String::from).collect();
        ids.sort();
        ids
    }

    /// Exit codes of the `service` containers that died between `since` and `until` (Unix
    /// seconds), from `docker events`, one per death.
    pub fn exit_codes(&self, service: &str, since: u64, until: u64) -> Vec<String> {
        let project = format!("label=com.docker.compose.project={}", self.project);
        let service = format!("label=com.docker.compose.service={service}");
        let run = docker(&[
            "events",
            "--since",
            &since.to_string(),
            "--until",
            &until.to_string(),
            "--filter",
            "event=die",
            "--filter",
            &project,
            "--filter",
            &service,
            "--format",
            "{{.Actor.Attributes.exitCode}}",
        ]);
        run.assert_success();
        run.stdout.split_whitespace().map(String::from).collect()
    }

    /// Waits up to a minute for the dispatcher's `/healthz` to answer.
    pub fn wait_api(&self) {
        let url = format!("{}/healthz", self.server());
        for _ in 0..120 {
            let run = run_command(
                Path::new("curl"),
                ["-fsS", "-m", "10", &url],
                DOCKER_TIMEOUT,
            );
            if run.status.success() {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("the dispatcher API does not answer at {}", self.server());
    }

    /// An [`S3Config`] for the farm's Garage on its published port.
    pub fn s3_config(&self) -> S3Config {
        let mut cfg = S3Config::new("garage");
        cfg.endpoint = Some(format!("http://127.0.0.1:{}", self.s3_port));
        cfg.access_key_id = Some(self.key.0.clone());
        cfg.secret_access_key = Some(self.key.1.clone());
        cfg.force_path_style = true;
        cfg.connect_timeout = Duration::from_secs(5);
        cfg.op_timeout = Duration::from_secs(60);
        cfg
    }

    /// Downloads `s3://tessera-media/{key}` to `dst`; Err when it cannot be read.
    pub fn download(&self, key: &str, dst: &Path) -> Result<(), String> {
        use tessera_farm::store::Store;
        with_s3_store(self.s3_config(), MEDIA_BUCKET, |s: S3Store| async move {
            s.get_file(key, dst)
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
    }

    /// The keys under `prefix` in `bucket`, sorted.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let mut keys = with_s3_store(self.s3_config(), bucket, |s: S3Store| async move {
            let objects = s.list(prefix, None, 1000).await;
            objects.unwrap_or_else(|e| panic!("cannot list s3://{bucket}/{prefix}: {e}"))
        })
        .into_iter()
        .map(|o| o.key)
        .collect::<Vec<_>>();
        keys.sort();
        keys
    }
}

impl Drop for Compose {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        if failed {
            let logs = self.compose(&["logs", "--no-color", "--tail=80"]);
            let text = format!("{}{}", logs.stdout, logs.stderr);
            let _ = std::fs::write(self.work.join("logs.txt"), &text);
            let last: Vec<&str> = text.lines().rev().take(150).collect();
            let last: Vec<&str> = last.into_iter().rev().collect();
            eprintln!(
                "--- last compose logs ({}) ---\n{}",
                self.work.join("logs.txt").display(),
                tail(&last.join("\n"), 60_000)
            );
        }
        let _ = self.compose(&["down", "-v", "--remove-orphans"]);
        if !failed {
            let _ = std::fs::remove_dir_all(&self.work);
        }
    }
}

/// Runs `docker ARGS` (5 minutes at most).
pub fn docker(args: &[&str]) -> Run {
    run_command(Path::new("docker"), args, DOCKER_TIMEOUT)
}

/// Runs `docker ARGS` and panics with its output unless it succeeds; its stdout, trimmed.
pub fn docker_ok(args: &[&str]) -> String {
    let run = docker(args);
    run.assert_success();
    run.stdout.trim().to_string()
}

/// Seconds since the Unix epoch (for `docker events --since`).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The value of `KEY=` in an env file.
fn env_value(file: &Path, key: &str) -> String {
    let text =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key} in {}", file.display()))
        .to_string()
}

/// Two distinct free TCP ports on 127.0.0.1.
fn free_ports() -> [u16; 2] {
    let a = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let b = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let port = |l: &TcpListener| l.local_addr().expect("local addr").port();
    [port(&a), port(&b)]
}
