//! The distributed farm as real processes: Garage, a RabbitMQ vhost, `tessera-dispatcher` on
//! port 0 and `tessera-worker`s, each killed when the test ends.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::garage::Garage;
use crate::rabbit::TestVhost;

/// The test farm's admin token (a bare token: tenant `default`, sees every tenant's jobs).
pub const TOKEN: &str = "test-token-0123456789";
/// Tokens of two tenants, `acme` and `beta`, who must not see each other's jobs.
pub const ACME_TOKEN: &str = "acme-token-0123456789";
/// See [`ACME_TOKEN`].
pub const BETA_TOKEN: &str = "beta-token-0123456789";
/// The dispatcher's webhook signing key.
pub const WEBHOOK_SECRET: &str = "webhook-secret-for-tests";

/// A running farm.
pub struct Farm {
    /// The S3 server (buckets `input`, `output`, `work`, `private`; the farm may use `input` and `output`).
    pub garage: Garage,
    /// The broker vhost.
    pub vhost: TestVhost,
    /// `http://127.0.0.1:PORT` of the dispatcher.
    pub api: String,
    pub(crate) dispatcher: Child,
    pub(crate) workers: Vec<Child>,
    /// Extra environment of the dispatcher (applied at each (re)start).
    dispatcher_env: Vec<(String, String)>,
    /// The dispatcher's flags besides `--listen`, `--db` and `--staging-dir` (see
    /// [`test_dispatcher_args`]).
    dispatcher_args: Vec<String>,
    /// Temporary directory holding databases, staging and logs.
    pub dir: tempfile::TempDir,
    /// The dispatcher's database, relative to `dir` (used at each (re)start).
    pub db: String,
    /// Deliveries of a task that may vanish with their worker, for every process of the farm
    /// (its queues are declared with it): 3, or `TESSERA_LOST_LIMIT` among the dispatcher's
    /// settings given at start.
    lost_limit: String,
}

/// The test farm's admission limit on input frames: far above every fixture, low enough that
/// a test can make a longer input in a second or two.
pub const MAX_INPUT_FRAMES: u64 = 50_000;

pub(crate) fn bin(name: &str) -> PathBuf {
    let dir = crate::run::tessera_bin();
    let path = dir.with_file_name(name);
    assert!(
        path.is_file(),
        "{} not found: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

impl Farm {
    /// Starts Garage, a vhost, the dispatcher and `workers` workers.
    pub fn start(tag: &str, workers: usize) -> Farm {
        Farm::start_with(tag, workers, &[])
    }

    /// [`Farm::start`] with extra `TESSERA_*` settings for the dispatcher.
    pub fn start_with(tag: &str, workers: usize, dispatcher_env: &[(&str, &str)]) -> Farm {
        Farm::start_with_args(tag, workers, test_dispatcher_args(), dispatcher_env)
    }

    /// [`Farm::start_with`], the dispatcher's flags ([`test_dispatcher_args`]) replaced by
    /// `dispatcher_args`: a farm set up as a user would (the benchmark's: default segment
    /// length, no bucket watch), on the same Garage, vhost, tokens and binaries.
    pub fn start_with_args(
        tag: &str,
        workers: usize,
        dispatcher_args: Vec<String>,
        dispatcher_env: &[(&str, &str)],
    ) -> Farm {
        let garage = Garage::start(&["input", "output", "work", "private"]);
        let vhost = TestVhost::new(tag);
        let dir = tempfile::tempdir().expect("tempdir");
        let mut farm = Farm {
            garage,
            vhost,
            api: String::new(),
            dispatcher: Command::new("true").spawn().expect("spawn true"),
            workers: Vec::new(),
            dispatcher_env: dispatcher_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            dispatcher_args,
            dir,
            db: "jobs.db".into(),
            lost_limit: (dispatcher_env.iter())
                .find(|(k, _)| *k == "TESSERA_LOST_LIMIT")
                .map_or("3", |(_, v)| v)
                .to_string(),
        };
        farm.start_dispatcher();
        for i in 0..workers {
            let w = farm.spawn_worker(i);
            farm.workers.push(w);
        }
        farm
    }

    pub(crate) fn env(&self, cmd: &mut Command) {
        cmd.env("TESSERA_AMQP_URL", self.vhost.uri())
            .env("TESSERA_S3_ENDPOINT", &self.garage.endpoint)
            .env("TESSERA_S3_REGION", &self.garage.region)
            .env("TESSERA_S3_ACCESS_KEY_ID", &self.garage.access_key_id)
            .env(
                "TESSERA_S3_SECRET_ACCESS_KEY",
                &self.garage.secret_access_key,
            )
            .env("TESSERA_WORK_BUCKET", "work")
            .env("TESSERA_DELIVERY_LIMIT", "3")
            // As few deliveries lost with their worker unless told: kill tests stay short.
            .env("TESSERA_LOST_LIMIT", &self.lost_limit)
            .env("TESSERA_LOG", "info");
    }

    /// (Re)starts the dispatcher (same database), waiting for its listen line.
    pub fn start_dispatcher(&mut self) {
        if !self.try_start_dispatcher() {
            panic!("dispatcher did not start:\n{}", self.log("dispatcher.log"));
        }
    }

    /// [`Farm::start_dispatcher`] once: whether it came to listen within 30 s (false when it
    /// exited first, e.g. on a broker it cannot reach). Why: a test playing the supervisor
    /// (systemd, Kubernetes) starts it again.
    pub fn try_start_dispatcher(&mut self) -> bool {
        let _ = self.dispatcher.kill();
        let _ = self.dispatcher.wait();
        // Appended to across restarts: a run's whole story stays readable.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("dispatcher.log"))
            .expect("log");
        let mut cmd = self.dispatcher_command(&self.db);
        cmd.stdout(Stdio::piped()).stderr(log);
        let mut child = cmd.spawn().expect("spawn dispatcher");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("tessera-dispatcher listening on ") {
                    let _ = tx.send(addr.to_string());
                }
            }
        });
        // The sender goes when stdout closes: a dispatcher that exits is seen at once.
        let listening = rx.recv_timeout(Duration::from_secs(30));
        self.dispatcher = child;
        match listening {
            Ok(addr) => {
                self.api = addr;
                true
            }
            Err(_) => false,
        }
    }

    /// Runs another dispatcher on this farm's broker and store, with database `db` (a file
    /// in the farm's directory), until it exits or `timeout`: (exit code, stderr). A farm
    /// allows one dispatcher, so it should exit with a reason.
    pub fn run_second_dispatcher(&self, db: &str, timeout: Duration) -> (Option<i32>, String) {
        let err = self.dir.path().join("second-dispatcher.log");
        let mut cmd = self.dispatcher_command(db);
        cmd.stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).expect("log"));
        let mut child = cmd.spawn().expect("spawn second dispatcher");
        let started = Instant::now();
        let code = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break status.code();
            }
            if started.elapsed() > timeout {
                let _ = child.kill();
                let _ = child.wait();
                break Some(-1);
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        (code, std::fs::read_to_string(err).unwrap_or_default())
    }

    fn dispatcher_command(&self, db: &str) -> Command {
        let mut cmd = Command::new(bin("tessera-dispatcher"));
        self.env(&mut cmd);
        cmd.args(["--listen", "127.0.0.1:0"])
            .args(&self.dispatcher_args)
            .arg("--db")
            .arg(self.dir.path().join(db))
            .arg("--staging-dir")
            .arg(self.dir.path().join("dispatcher-staging"))
            .env(
                "TESSERA_API_TOKENS",
                format!("{TOKEN},acme={ACME_TOKEN},beta={BETA_TOKEN}"),
            )
            .env("TESSERA_WEBHOOK_SECRET", WEBHOOK_SECRET)
            .env("TESSERA_MAX_INPUT_FRAMES", MAX_INPUT_FRAMES.to_string());
        for (k, v) in &self.dispatcher_env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Sets a `TESSERA_*` variable of the dispatcher (replacing one set before); it applies
    /// from the next [`Farm::start_dispatcher`].
    pub fn set_dispatcher_env(&mut self, key: &str, value: &str) {
        self.dispatcher_env.retain(|(k, _)| k != key);
        self.dispatcher_env
            .push((key.to_string(), value.to_string()));
    }

    /// Kills the dispatcher with SIGKILL (its database stays).
    pub fn kill_dispatcher(&mut self) {
        let _ = self.dispatcher.kill();
        let _ = self.dispatcher.wait();
    }

    /// Submits a job; extra JSON fields of the output (e.g. preset) and of the job are merged in.
    pub fn submit(
        &self,
        input: &str,
        dest: &str,
        output: serde_json::Value,
        job: serde_json::Value,
    ) -> String {
        let mut out = serde_json::json!({"destination": dest});
        if let (Some(o), Some(extra)) = (out.as_object_mut(), output.as_object()) {
            o.extend(extra.clone());
        }
        let mut body = serde_json::json!({"input": input, "outputs": [out]});
        if let (Some(b), Some(extra)) = (body.as_object_mut(), job.as_object()) {
            b.extend(extra.clone());
        }
        let (code, resp) = self.http("POST", "/v1/jobs", Some(TOKEN), Some(&body.to_string()));
        assert_eq!(code, 202, "submit: {resp}");
        resp["id"].as_str().expect("job id").to_string()
    }

    /// The text of a log file in the farm's directory.
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    /// Whether every worker process is still running.
    pub fn workers_alive(&mut self) -> bool {
        self.workers
            .iter_mut()
            .all(|w| matches!(w.try_wait(), Ok(None)))
    }

    /// Runs `f` with an S3 store of `bucket` on a one-off runtime.
    pub(crate) fn with_store<R, F>(
        &self,
        bucket: &str,
        f: impl FnOnce(tessera_farm::store::S3Store) -> F,
    ) -> R
    where
        F: std::future::Future<Output = R>,
    {
        with_s3_store(self.garage.s3_config(), bucket, f)
    }

    /// Uploads a local file to `s3://bucket/key`.
    pub fn upload(&self, src: &Path, bucket: &str, key: &str) {
        use tessera_farm::store::Store;
        self.with_store(bucket, |s| async move {
            s.put_file(key, src).await.expect("upload")
        });
    }

    /// Downloads `s3://bucket/key` to a local file.
    pub fn download(&self, bucket: &str, key: &str, dst: &Path) {
        use tessera_farm::store::Store;
        self.with_store(bucket, |s| async move {
            s.get_file(key, dst).await.expect("download")
        });
    }

    /// Keys under `prefix` in `bucket`.
    pub fn list(&self, bucket: &str, prefix: &str) -> Vec<String> {
        self.with_store(bucket, |s| async move {
            let objects = s.list(prefix, None, 1000).await.expect("list");
            objects.into_iter().map(|o| o.key).collect()
        })
    }

    /// An HTTP request with curl: (status, JSON body or Null).
    pub fn http(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> (u16, serde_json::Value) {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "-m", "20", "-X", method, "-w", "\n%{http_code}"])
            .arg(format!("{}{path}", self.api))
            .args(["-H", "content-type: application/json"]);
        if let Some(t) = token {
            cmd.args(["-H", &format!("authorization: Bearer {t}")]);
        }
        if let Some(b) = body {
            cmd.args(["--data-binary", b]);
        }
        let out = cmd.output().expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (json, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (
            code.trim().parse().unwrap_or(0),
            serde_json::from_str(json).unwrap_or(serde_json::Value::Null),
        )
    }

    /// Downloads `s3://output/{key}` and checks it against `src` frame by frame: the same
    /// decoded frame count, each frame's time within the source's shortest frame interval.
    pub fn assert_frame_exact(&self, src: &Path, key: &str) {
        let out = self.dir.path().join(key.replace('/', "_"));
        self.download("output", key, &out);
        let (s, o) = (
            crate::playback::Summary::of(src),
            crate::playback::Summary::of(&out),
        );
        assert_eq!(o.frame_count, s.frame_count, "{key}: decoded frame counts");
        let tol = s.min_frame_interval();
        for (i, (a, b)) in s.rel_times().iter().zip(o.rel_times()).enumerate() {
            assert!(
                (a - b).abs() <= tol,
                "{key}: frame {i}: source {a:.4} s, output {b:.4} s"
            );
        }
    }

    /// Polls a job until it ends (done/failed/cancelled) or `timeout`; returns its last view.
    pub fn wait_job(&self, id: &str, timeout: Duration) -> serde_json::Value {
        let started = Instant::now();
        loop {
            let (code, job) = self.http("GET", &format!("/v1/jobs/{id}"), Some(TOKEN), None);
            assert_eq!(code, 200, "GET job: {job}");
            let state = job["state"].as_str().unwrap_or("");
            if matches!(state, "done" | "failed" | "cancelled") {
                return job;
            }
            assert!(
                started.elapsed() < timeout,
                "job {id} still {state} after {timeout:?}: {job}\n--- dispatcher\n{}\n--- worker 0\n{}",
                crate::run::tail(&self.log("dispatcher.log"), 4000),
                crate::run::tail(&self.log("worker-0.log"), 4000)
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Farm {
    fn drop(&mut self) {
        for w in &mut self.workers {
            let _ = w.kill();
            let _ = w.wait();
        }
        let _ = self.dispatcher.kill();
        let _ = self.dispatcher.wait();
    }
}

/// The RabbitMQ queue the test farm's dispatcher consumes S3 event notifications from (its
/// watch: `input/incoming/` to `output/processed/`, listed every second).
pub const WATCH_EVENTS_QUEUE: &str = "tessera.s3events";

/// The dispatcher flags of the test farm: the listed buckets, 1 s segments (several per
/// fixture), the bucket watch `input/incoming/` to `output/processed/` (listed every second)
/// and the S3 event queue [`WATCH_EVENTS_QUEUE`].
pub fn test_dispatcher_args() -> Vec<String> {
    [
        "--buckets",
        "input,output",
        "--segment-seconds",
        "1",
        "--watch",
        "input/incoming/=output/processed/",
        "--watch-interval-seconds",
        "1",
        "--s3-events-queue",
        WATCH_EVENTS_QUEUE,
        // Every input split, as the tests that compare runs (chaos against its fault-free
        // reference, resumes against first runs) need: the whole-input path (on by default)
        // cuts a busy farm's short inputs in one piece, an idle one's in several.
        // tests/tests/farm_whole.rs turns it on.
        "--whole-input-max-seconds",
        "0",
    ]
    .map(String::from)
    .to_vec()
}

/// Runs `f` with a store of `bucket` on the S3 server of `cfg`, on a one-off runtime: how
/// synchronous test code reads and writes objects (the test farm's Garage, or the compose
/// farm's).
pub fn with_s3_store<R, F>(
    cfg: tessera_farm::store::S3Config,
    bucket: &str,
    f: impl FnOnce(tessera_farm::store::S3Store) -> F,
) -> R
where
    F: std::future::Future<Output = R>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let client = tessera_farm::store::S3Client::new(cfg)
            .await
            .expect("s3 client");
        f(client.store(bucket)).await
    })
}
