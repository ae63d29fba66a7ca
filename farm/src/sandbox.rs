//! Runs media operations in a child process with a timeout and resource limits.
//!
//! Why: FFmpeg decoders on untrusted uploads can crash, hang or balloon; in a child process
//! that costs one attempt of one operation, never the worker or the one-process farm. The
//! child is the `tessera-media` executable (found beside the running binary, see
//! [`media_child_exe`]) started with [`CHILD_ARG`]; it reads one JSON request on stdin and
//! writes `progress N` lines and one `result {json}` line on stdout. Only that executable
//! links FFmpeg: the `tessera`, `tessera-worker` and `tessera-dispatcher` processes start
//! without binding FFmpeg's 160-odd libraries (about 60 ms of CPU per start).
//!
//! [`Sandbox::run`] runs each operation in a child of its own (the dispatcher's probe, split,
//! audio, stitch), started ahead of need when the sandbox keeps spares
//! ([`Sandbox::with_spares`]), or reused within the one-process farm's single job
//! ([`Sandbox::reusing_children`]). [`SandboxSlot`] keeps a warm child that serves many operations in sequence (a
//! worker slot's segment encodes), so start-up costs are paid once per child.
//!
//! Each child starts with an empty environment, rlimits, no capabilities and no new
//! privileges, under Landlock (reads: system directories and what [`Confinement`] names;
//! writes: only its work directories) and a seccomp filter refusing network sockets; the
//! parent is not dumpable, so no child reads its environment or memory (`confine` module).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tessera_model::error_code::{ErrorClass, ErrorCode};
use tokio::io::AsyncWriteExt;

use crate::FarmError;

mod child;
mod confine;
pub mod ledger;
use confine::{child_may_see, set_limit};
mod media_child;
mod op;
mod pipes;
mod pool;
mod spare;
mod warm;

pub use child::{child_main, peak_rss, SERVE_ARG};
pub use confine::{
    report as confinement_report, support as confinement_support, Confinement, Support,
};
pub use media_child::{media_child_exe, MEDIA_CHILD_ENV, MEDIA_CHILD_NAME};
pub use op::MediaOp;
pub use pool::SlotPool;
pub use warm::{SandboxSlot, WarmPolicy};

/// The first argument a media child is started with: `tessera-media` refuses to run without
/// it, so a user who starts it by hand is told what it is instead of it waiting on stdin.
pub const CHILD_ARG: &str = "__tessera-media-child";

/// Limits for one child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock limit; the child is killed past it.
    pub timeout: Duration,
    /// Memory limit in bytes: the address space (RLIMIT_AS), or with `bound_by_rss` the
    /// resident memory, watched by the parent.
    pub memory_bytes: u64,
    /// Largest file the child may write, in bytes (RLIMIT_FSIZE).
    pub max_file_bytes: u64,
    /// Bound the child's memory by its resident set (checked every 250 ms, killed above
    /// `memory_bytes`) instead of by RLIMIT_AS. Why: the CUDA driver reserves host address
    /// space on the order of the card's memory (and more for its pools) when it creates a
    /// context, so an address-space limit makes every GPU child fail at `cuInit`.
    pub bound_by_rss: bool,
}

impl Limits {
    /// These limits for a child that opens a CUDA context: memory bounded by RSS.
    pub fn for_gpu(self) -> Limits {
        Limits {
            bound_by_rss: true,
            ..self
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(1800),
            memory_bytes: 8 << 30,
            max_file_bytes: 512 << 30,
            bound_by_rss: false,
        }
    }
}

/// Figures about one finished operation, for metrics and the bench report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ChildStats {
    /// The child's peak resident memory (VmHWM) during the operation: a warm child resets its
    /// peak before each operation (where the kernel allows; else it is the child's lifetime
    /// peak), so this stays the operation's own peak.
    pub peak_rss_bytes: u64,
    /// Wall time of the operation as the parent saw it: from spawn to exit for a one-shot
    /// child, from request to result for a warm one (plus the spawn when it started a child).
    pub wall_seconds: f64,
    /// CPU-seconds (user and system, all threads) the child spent on the operation, as it
    /// measured itself: a one-shot child's whole life, a warm child's time from request to
    /// result (0 from a child too old to say).
    #[serde(default)]
    pub cpu_seconds: f64,
}

#[derive(Debug, Serialize, Deserialize)]
struct ChildError {
    code: ErrorCode,
    class: ErrorClass,
    message: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct ChildResponse {
    ok: Option<serde_json::Value>,
    error: Option<ChildError>,
    peak_rss_bytes: u64,
    /// The child's CPU-seconds for the operation ([`ChildStats::cpu_seconds`]).
    #[serde(default)]
    cpu_seconds: f64,
    /// A serving child's CPU-seconds before its first request (exec, dynamic linking,
    /// FFmpeg's set-up), told with its first result only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start_cpu_seconds: Option<f64>,
    /// The request's sequence number (serve mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
}

/// Starts media children from a given executable.
#[derive(Debug, Clone)]
pub struct Sandbox {
    exe: PathBuf,
    /// Children started ahead for [`Sandbox::run`], shared by the clones of this sandbox.
    ready: Option<Arc<spare::Ready>>,
    /// What the child's FFmpeg can do, asked once and shared by the clones.
    caps: Arc<tokio::sync::OnceCell<tessera_model::capabilities::Capabilities>>,
    /// The paths children may read and write beyond the system's ([`confine`]).
    confinement: Arc<Confinement>,
}

impl Sandbox {
    /// Children are started from `exe` (normally [`media_child_exe`]), confined to reading
    /// the system's directories and the executable's, writing nowhere but a few device nodes
    /// until [`Sandbox::confined`] names more. Makes this process not dumpable, so children
    /// cannot read its environment or memory (see the `confine` module).
    pub fn new(exe: PathBuf) -> Self {
        confine::hide_parent();
        Sandbox {
            exe,
            ready: None,
            caps: Arc::default(),
            confinement: Arc::default(),
        }
    }

    /// These children may also read and write what `confinement` names (their work
    /// directories, a local input). Call before [`Sandbox::with_spares`] or
    /// [`Sandbox::reusing_children`], which start children at once.
    pub fn confined(self, confinement: Confinement) -> Self {
        Sandbox {
            confinement: Arc::new(confinement),
            ..self
        }
    }

    /// A sandbox that starts the installed media child ([`media_child_exe`]).
    pub fn current() -> Result<Self, FarmError> {
        Ok(Sandbox::new(media_child_exe()?))
    }

    /// Keeps `count` children started ahead under `limits`, so [`Sandbox::run`] does not wait
    /// for a child to start; each still serves one operation only (services: nothing of one
    /// job reaches another). Call within a Tokio runtime.
    pub fn with_spares(self, count: usize, limits: Limits) -> Self {
        self.with_ready(count, limits, spare::Use::OnePerOperation)
    }

    /// Lets [`Sandbox::run`] reuse `count` warm children (started now under `limits`) for
    /// operation after operation; an operation waits for a free one. Only for a process that
    /// serves a single job (the one-process farm): its probe, split, audio, encodes and stitch
    /// then pay `count` child starts, not one each. Call within a Tokio runtime.
    pub fn reusing_children(self, count: usize, limits: Limits) -> Self {
        self.with_ready(count.max(1), limits, spare::Use::Reuse)
    }

    /// Whether [`Sandbox::run`] reuses warm children ([`Sandbox::reusing_children`]): workers
    /// then run their software encodes through it instead of their own warm slots.
    pub fn reuses_children(&self) -> bool {
        self.shared_children().is_some()
    }

    /// How many warm children [`Sandbox::run`] shares among its operations (the one-process
    /// farm's workers and its dispatcher), when it reuses them: the dispatcher then starts a
    /// short job's audio step only once a segment has freed a child.
    pub fn shared_children(&self) -> Option<usize> {
        self.ready
            .as_ref()
            .filter(|r| r.reuses())
            .map(|r| r.target())
    }

    fn with_ready(self, count: usize, limits: Limits, mode: spare::Use) -> Self {
        let plain = Sandbox {
            ready: None,
            ..self.clone()
        };
        Sandbox {
            ready: Some(Arc::new(spare::Ready::new(plain, count, limits, mode))),
            ..self
        }
    }

    /// Children started ahead and idle now (0 when every operation starts its own).
    pub fn children_ready(&self) -> usize {
        self.ready.as_ref().map_or(0, |s| s.idle_count())
    }

    /// The command for a child under `limits`: piped stdio, killed when its handle is dropped,
    /// rlimits and a parent-death signal set before exec. `serve` makes it a serving child.
    fn command(&self, limits: Limits, serve: bool) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.arg(CHILD_ARG);
        if serve {
            cmd.arg(SERVE_ARG);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // An empty environment but for what the libraries and the GPU driver read: no S3
        // key, broker password, API token or webhook secret reaches code that parses
        // untrusted media.
        cmd.env_clear();
        for (key, value) in std::env::vars_os() {
            if key.to_str().is_some_and(child_may_see) {
                cmd.env(key, value);
            }
        }
        // CUDA ordinals in PCI bus order, as NVML numbers the cards (CUDA's default is
        // fastest first): the worker maps NVML cards to ordinals on that basis.
        cmd.env("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        if let Some(dir) = self.confinement.cuda_cache_dir() {
            cmd.env("CUDA_CACHE_PATH", dir);
        }
        let (mem, fsize) = (limits.memory_bytes, limits.max_file_bytes);
        let address_space = !limits.bound_by_rss;
        // No parent secrets, no network, writes only in the work directories: prepared
        // here, applied by the child before exec.
        let confine = confine::Prepared::new(&self.exe, &self.confinement);
        // SAFETY: the closure runs in the forked child before exec and only calls
        // async-signal-safe functions (setrlimit, prctl, and the raw system calls of
        // `Prepared::apply`) on stack values and memory prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                if address_space {
                    set_limit(libc::RLIMIT_AS, mem);
                }
                set_limit(libc::RLIMIT_FSIZE, fsize);
                set_limit(libc::RLIMIT_CORE, 0);
                // Die with the parent: a killed worker must not leave encoders running.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                confine.apply()
            });
        }
        cmd
    }

    /// Runs `op` in a child; `progress` receives the child's running frame counts.
    pub async fn run<T: DeserializeOwned>(
        &self,
        op: &MediaOp,
        limits: Limits,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<(T, ChildStats), FarmError> {
        if let Some(ready) = &self.ready {
            return ready.run(op, limits, progress).await;
        }
        let started = Instant::now();
        let what = op.name().to_string();
        let crashed = |detail: String| FarmError::ChildCrashed {
            what: what.clone(),
            detail,
        };
        let mut child = self
            .command(limits, false)
            .spawn()
            .map_err(|e| crashed(format!("cannot start: {e}")))?;
        let request = serde_json::to_vec(op).map_err(|e| FarmError::BadMessage(e.to_string()))?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| crashed("no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| crashed("no stdout".into()))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| crashed("no stderr".into()))?;
        let (stderr_tail, stderr_task) = pipes::stderr_tail(stderr);
        let pid = child.id();
        let io = async {
            stdin.write_all(&request).await?;
            drop(stdin);
            let mut lines = tokio::io::BufReader::new(stdout);
            let mut result = None;
            while let Some(line) =
                pipes::next_line_capped(&mut lines, pipes::MAX_LINE_BYTES).await?
            {
                if let Some(json) = read_line(&line, progress) {
                    result = Some(json.to_string());
                }
            }
            let status = child.wait().await?;
            Ok::<_, std::io::Error>((result, status))
        };
        let outcome = tokio::time::timeout(limits.timeout, async {
            tokio::select! {
                r = io => Ok(r),
                rss = child::rss_exceeds(pid, limits) => Err(rss),
            }
        })
        .await;
        let outcome = match outcome {
            Ok(Err(rss)) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                return Err(crashed(child::rss_killed(rss, limits)));
            }
            Ok(Ok(r)) => Ok(r),
            Err(e) => Err(e),
        };
        let (result, status) = match outcome {
            Err(_) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                return Err(FarmError::ChildTimeout {
                    what,
                    seconds: limits.timeout.as_secs(),
                });
            }
            Ok(Err(e)) => return Err(crashed(format!("pipe error: {e}"))),
            Ok(Ok(v)) => v,
        };
        let _ = stderr_task.await;
        let stderr_tail = tail_of(&stderr_tail.lock().unwrap_or_else(|p| p.into_inner()));
        let wall_seconds = started.elapsed().as_secs_f64();
        let Some(json) = result else {
            return Err(crashed(format!("{status}; stderr: {}", stderr_tail.trim())));
        };
        let resp: ChildResponse =
            serde_json::from_str(&json).map_err(|e| crashed(format!("unreadable result ({e})")))?;
        let stats = ChildStats {
            peak_rss_bytes: resp.peak_rss_bytes,
            wall_seconds,
            cpu_seconds: resp.cpu_seconds,
        };
        ledger::record(op.name(), &stats);
        let typed = into_result(resp, &crashed)?;
        Ok((typed, stats))
    }
}

/// One stdout line of a child: a `progress N` line goes to `progress`; a `result {json}` line
/// returns its JSON; anything else is ignored.
fn read_line<'a>(line: &'a str, progress: &mut (dyn FnMut(u64) + Send)) -> Option<&'a str> {
    if let Some(n) = line.strip_prefix("progress ") {
        if let Ok(n) = n.trim().parse() {
            progress(n);
        }
        None
    } else {
        line.strip_prefix("result ")
    }
}

/// The typed value of a response, or its media error (code and class kept).
fn into_result<T: DeserializeOwned>(
    resp: ChildResponse,
    crashed: &dyn Fn(String) -> FarmError,
) -> Result<T, FarmError> {
    if let Some(err) = resp.error {
        return Err(FarmError::Media {
            code: err.code,
            class: err.class,
            message: err.message,
        });
    }
    let value = resp.ok.ok_or_else(|| crashed("empty result".into()))?;
    serde_json::from_value(value).map_err(|e| crashed(format!("result of unexpected shape ({e})")))
}

/// The last 2000 characters of a child's stderr, for error messages.
fn tail_of(text: &str) -> String {
    let skip = text.chars().count().saturating_sub(2000);
    text.chars().skip(skip).collect()
}

#[cfg(test)]
mod confine_tests;
#[cfg(test)]
mod limits_tests;
#[cfg(test)]
mod tests;
