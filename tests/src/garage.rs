//! A real Garage (S3-compatible) server for tests: started on free ports, with a key and buckets.
//!
//! [`Garage::start`] writes a single-node config in a temporary directory, starts
//! `garage server` as a child process (its log in that directory), assigns the layout, creates
//! the access key `test-key` and the buckets, and hands back the endpoint and credentials. The
//! server is killed and its directory removed when the [`Garage`] is dropped.
//!
//! The binary: `$GARAGE_BIN`, else `garage` on `PATH`, else `~/.cargo/bin/garage`.

use std::fmt::Write as _;
use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tessera_farm::store::{S3Client, S3Config, S3Store};

use crate::run::{run_command, Run};

/// The S3 region Garage is configured with.
pub const REGION: &str = "garage";
/// Limit for one `garage` CLI command.
const CLI_TIMEOUT: Duration = Duration::from_secs(20);
/// Limit for the server to answer `garage status` after it was started.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Start attempts (a free port may be taken by someone else before Garage binds it).
const START_ATTEMPTS: usize = 3;

/// A running single-node Garage server with one access key allowed on its buckets.
pub struct Garage {
    /// S3 endpoint URL, `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// S3 region (`garage`).
    pub region: String,
    /// Access key id of `test-key`.
    pub access_key_id: String,
    /// Secret key of `test-key`.
    pub secret_access_key: String,
    /// The buckets created at start.
    pub buckets: Vec<String>,
    bin: PathBuf,
    config: PathBuf,
    log: PathBuf,
    child: Child,
    // Last, so the directory is removed after the server was killed (fields drop in order).
    _dir: tempfile::TempDir,
}

impl Garage {
    /// Starts a server with `test-key` allowed to read, write and own each of `buckets`.
    /// Panics (with the server log) if it does not come up within its time limits.
    pub fn start(buckets: &[&str]) -> Garage {
        let bin = garage_bin();
        let mut last_failure = String::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(&bin) {
                Ok(mut garage) => {
                    garage.setup(buckets);
                    return garage;
                }
                Err(why) => last_failure = why,
            }
        }
        panic!("garage did not start after {START_ATTEMPTS} attempts: {last_failure}");
    }

    /// Writes the config, starts the server and waits until it answers; Err on an early exit
    /// (a port taken meanwhile) so the caller can retry on other ports.
    fn try_start(bin: &Path) -> Result<Garage, String> {
        let dir = tempfile::Builder::new()
            .prefix("tessera-garage-")
            .tempdir()
            .expect("temporary directory for garage");
        let [s3_port, rpc_port, admin_port] = free_ports();
        let config = dir.path().join("garage.toml");
        let text = format!(
            r#"metadata_dir = "{meta}"
data_dir = "{data}"
db_engine = "sqlite"
replication_factor = 1
compression_level = "none"
rpc_bind_addr = "127.0.0.1:{rpc_port}"
rpc_public_addr = "127.0.0.1:{rpc_port}"
rpc_secret = "{secret}"

[s3_api]
s3_region = "{REGION}"
api_bind_addr = "127.0.0.1:{s3_port}"

[admin]
api_bind_addr = "127.0.0.1:{admin_port}"
"#,
            meta = dir.path().join("meta").display(),
            data = dir.path().join("data").display(),
            secret = random_hex(32),
        );
        fs::write(&config, text).expect("write garage config");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&config, fs::Permissions::from_mode(0o600))
                .expect("chmod garage config");
        }
        let log = dir.path().join("garage.log");
        let log_file = fs::File::create(&log).expect("create garage log");
        let child = Command::new(bin)
            .arg("-c")
            .arg(&config)
            .arg("server")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("clone log handle"))
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let mut garage = Garage {
            endpoint: format!("http://127.0.0.1:{s3_port}"),
            region: REGION.to_string(),
            access_key_id: String::new(),
            secret_access_key: String::new(),
            buckets: Vec::new(),
            bin: bin.to_path_buf(),
            config,
            log,
            child,
            _dir: dir,
        };
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = garage.child.try_wait() {
                return Err(format!("server exited ({status})\n{}", garage.log_text()));
            }
            let status = garage.run(&["status"]);
            if status.status.success() && !status.timed_out {
                return Ok(garage);
            }
            if start.elapsed() > READY_TIMEOUT {
                panic!(
                    "garage did not answer `status` within {READY_TIMEOUT:?}\n{}\n--- server log ---\n{}",
                    status.describe(),
                    garage.log_text()
                );
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Layout, key and buckets.
    fn setup(&mut self, buckets: &[&str]) {
        let id = self.cli(&["node", "id", "-q"]).stdout.trim().to_string();
        let node = id.split('@').next().unwrap_or_default().to_string();
        assert!(!node.is_empty(), "garage printed no node id");
        self.cli(&["layout", "assign", "-z", "dc1", "-c", "1G", &node]);
        self.cli(&["layout", "apply", "--version", "1"]);
        let key = self.cli(&["key", "create", "test-key"]);
        self.access_key_id = field(&key.stdout, "Key ID");
        self.secret_access_key = field(&key.stdout, "Secret key");
        for bucket in buckets {
            self.cli(&["bucket", "create", bucket]);
            self.cli(&[
                "bucket", "allow", "--read", "--write", "--owner", bucket, "--key", "test-key",
            ]);
            self.buckets.push(bucket.to_string());
        }
    }

    /// An [`S3Config`] for this server: its endpoint and key, path-style addressing, and
    /// short timeouts fit for a local server.
    pub fn s3_config(&self) -> S3Config {
        let mut cfg = S3Config::new(&self.region);
        cfg.endpoint = Some(self.endpoint.clone());
        cfg.access_key_id = Some(self.access_key_id.clone());
        cfg.secret_access_key = Some(self.secret_access_key.clone());
        cfg.force_path_style = true;
        cfg.connect_timeout = Duration::from_secs(5);
        cfg.op_timeout = Duration::from_secs(60);
        cfg
    }

    /// Stops the server abruptly (SIGKILL, as a crash or a lost host would): every S3 request
    /// is refused until [`Garage::restart`]. Its data, ports and keys stay.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again after [`Garage::stop`] with the same config (data directory,
    /// ports, keys, buckets) and waits until it answers `status` and serves S3 again.
    pub fn restart(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        let log = fs::OpenOptions::new()
            .append(true)
            .open(&self.log)
            .expect("open garage log");
        self.child = Command::new(&self.bin)
            .arg("-c")
            .arg(&self.config)
            .arg("server")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot restart {}: {e}", self.bin.display()));
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("restarted garage exited ({status})\n{}", self.log_text());
            }
            let status = self.run(&["status"]);
            let s3_up =
                std::net::TcpStream::connect(self.endpoint.trim_start_matches("http://")).is_ok();
            if status.status.success() && !status.timed_out && s3_up {
                return;
            }
            assert!(
                start.elapsed() < READY_TIMEOUT,
                "restarted garage did not answer within {READY_TIMEOUT:?}\n{}\n--- server log ---\n{}",
                status.describe(),
                self.log_text()
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs `garage -c CONFIG ARGS...` with a timeout; panics (with the server log) unless it
    /// succeeds. For tests that need admin operations (more keys, bucket info).
    pub fn cli(&self, args: &[&str]) -> Run {
        let run = self.run(args);
        assert!(
            run.status.success() && !run.timed_out,
            "garage command failed\n{}\n--- server log ---\n{}",
            run.describe(),
            self.log_text()
        );
        run
    }

    /// The server's log so far (for failure messages).
    pub fn log_text(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut text);
        }
        crate::run::tail(&text, 8000).to_string()
    }

    fn run(&self, args: &[&str]) -> Run {
        let mut all: Vec<&std::ffi::OsStr> = vec!["-c".as_ref(), self.config.as_os_str()];
        all.extend(args.iter().map(|a| std::ffi::OsStr::new(*a)));
        run_command(&self.bin, all, CLI_TIMEOUT)
    }
}

impl Drop for Garage {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `garage` binary: `$GARAGE_BIN`, `garage` on `PATH`, or `~/.cargo/bin/garage`.
pub fn garage_bin() -> PathBuf {
    let from_env = std::env::var_os("GARAGE_BIN").map(PathBuf::from);
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("garage"))
            .find(|p| p.is_file())
    });
    let in_cargo = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo/bin/garage"));
    from_env
        .or(on_path)
        .or(in_cargo.filter(|p| p.is_file()))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "garage binary not found ($GARAGE_BIN, PATH, ~/.cargo/bin): \
                 install with `cargo install garage --locked`"
            )
        })
}

/// Deterministic pseudo-random bytes (xorshift), different per seed: test objects whose
/// corruption or truncation a byte comparison catches.
pub fn test_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// PUTs the file at `src` to `url` (a presigned URL) the way a user's client would: with the
/// `curl` CLI when present, else [`raw_http_put`]. Returns the HTTP status.
pub fn http_put(url: &str, src: &Path) -> u16 {
    let args = [
        "-sS",
        "-g",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-m",
        "30",
        "-T",
    ];
    let args = args.iter().map(std::ffi::OsStr::new);
    let curl = run_command(
        Path::new("curl"),
        args.chain([src.as_os_str(), url.as_ref()]),
        CLI_TIMEOUT,
    );
    if curl.status.success() && !curl.timed_out {
        return curl.stdout.trim().parse().expect("curl status code");
    }
    raw_http_put(url, &fs::read(src).expect("read upload source"))
}

/// PUTs `body` to an `http://` `url` with a minimal HTTP/1.1 request (30 s socket timeouts);
/// returns the HTTP status.
pub fn raw_http_put(url: &str, body: &[u8]) -> u16 {
    use std::io::Write;
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut conn = std::net::TcpStream::connect(host).expect("connect");
    let limit = Some(Duration::from_secs(30));
    conn.set_read_timeout(limit).expect("read timeout");
    conn.set_write_timeout(limit).expect("write timeout");
    let len = body.len();
    let head = format!(
        "PUT {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).expect("send request head");
    conn.write_all(body).expect("send request body");
    let mut response = String::new();
    let _ = conn.read_to_string(&mut response);
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad HTTP response: {response:?}"))
}

/// The value after `label:` on a line of `garage key create` output.
fn field(output: &str, label: &str) -> String {
    output
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim() == label)
        .map(|(_, value)| value.trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| panic!("no `{label}` in garage output:\n{output}"))
}

/// Three distinct free TCP ports on 127.0.0.1 (held together while picked, so distinct).
fn free_ports() -> [u16; 3] {
    let listeners: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind a free port"))
        .collect();
    let port = |i: usize| listeners[i].local_addr().expect("local addr").port();
    [port(0), port(1), port(2)]
}

/// `n` random bytes from the OS, as hex.
fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("read /dev/urandom");
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A Garage server with the bucket `bucket`, a store on it (its settings changed by `tweak`)
/// and a temp dir: how every store test starts.
pub async fn store_on_garage(
    bucket: &str,
    tweak: impl FnOnce(&mut S3Config),
) -> (Garage, S3Store, tempfile::TempDir) {
    let garage = Garage::start(&[bucket]);
    let mut cfg = garage.s3_config();
    tweak(&mut cfg);
    let store = S3Client::new(cfg).await.expect("s3 client").store(bucket);
    (garage, store, tempfile::tempdir().expect("temp dir"))
}

/// Writes `bytes` to `dir/name`; returns its path.
pub fn write_file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("write the test file");
    path
}
