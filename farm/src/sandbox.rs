//! Runs media operations in a child process with a timeout and resource limits.
//!
//! Why: FFmpeg decoders on untrusted uploads can crash, hang or balloon; in a child process
//! that costs one attempt of one operation, never the worker or the one-process farm. The
//! child is this same executable started with [`CHILD_ARG`]; it reads one JSON request on
//! stdin and writes `progress N` lines and one `result {json}` line on stdout.

use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tessera_media::{
    AudioRequest, EncodeRequest, ErrorClass, MediaError, SegmentPlan, StitchRequest,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::FarmError;

/// The first argument that turns a tessera binary into a media child.
pub const CHILD_ARG: &str = "__tessera-media-child";

/// One media operation, as sent to the child.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum MediaOp {
    /// Probe an input.
    Probe {
        /// The input file.
        input: PathBuf,
    },
    /// Cut chunks; its progress values are the indices of finished chunks.
    Split {
        /// The input file.
        input: PathBuf,
        /// The plan.
        segments: Vec<SegmentPlan>,
        /// Timestamp bias.
        bias: i64,
        /// Where to write chunks.
        dir: PathBuf,
    },
    /// Encode a segment.
    Encode(EncodeRequest),
    /// Transcode the audio.
    Audio(AudioRequest),
    /// Stitch the output.
    Stitch(StitchRequest),
    /// Measure PSNR/SSIM.
    Quality {
        /// The encoded output.
        output: PathBuf,
        /// The source.
        source: PathBuf,
    },
}

impl MediaOp {
    /// A short name for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            MediaOp::Probe { .. } => "probe",
            MediaOp::Split { .. } => "split",
            MediaOp::Encode(_) => "encode",
            MediaOp::Audio(_) => "audio",
            MediaOp::Stitch(_) => "stitch",
            MediaOp::Quality { .. } => "quality",
        }
    }
}

/// Limits for one child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock limit; the child is killed past it.
    pub timeout: Duration,
    /// Address-space limit in bytes (RLIMIT_AS).
    pub memory_bytes: u64,
    /// Largest file the child may write, in bytes (RLIMIT_FSIZE).
    pub max_file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(1800),
            memory_bytes: 8 << 30,
            max_file_bytes: 512 << 30,
        }
    }
}

/// Figures about a finished child.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ChildStats {
    /// The child's peak resident memory (VmHWM).
    pub peak_rss_bytes: u64,
    /// Wall time from spawn to exit.
    pub wall_seconds: f64,
}

#[derive(Debug, Serialize, Deserialize)]
struct ChildError {
    code: String,
    class: ErrorClass,
    message: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct ChildResponse {
    ok: Option<serde_json::Value>,
    error: Option<ChildError>,
    peak_rss_bytes: u64,
}

/// Starts media children from a given executable.
#[derive(Debug, Clone)]
pub struct Sandbox {
    exe: PathBuf,
}

impl Sandbox {
    /// Children are started from `exe` (normally `std::env::current_exe()`).
    pub fn new(exe: PathBuf) -> Self {
        Sandbox { exe }
    }

    /// A sandbox that re-executes the current binary.
    pub fn current() -> Result<Self, FarmError> {
        let exe = std::env::current_exe().map_err(|e| FarmError::Io {
            path: "current executable".into(),
            reason: e.to_string(),
        })?;
        Ok(Sandbox::new(exe))
    }

    /// Runs `op` in a child; `progress` receives the child's running frame counts.
    pub async fn run<T: DeserializeOwned>(
        &self,
        op: &MediaOp,
        limits: Limits,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<(T, ChildStats), FarmError> {
        let started = Instant::now();
        let what = op.name().to_string();
        let crashed = |detail: String| FarmError::ChildCrashed {
            what: what.clone(),
            detail,
        };
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.arg(CHILD_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let (mem, fsize) = (limits.memory_bytes, limits.max_file_bytes);
        // SAFETY: the closure runs in the forked child before exec and only calls
        // async-signal-safe functions (setrlimit, prctl) on stack values.
        unsafe {
            cmd.pre_exec(move || {
                set_limit(libc::RLIMIT_AS, mem);
                set_limit(libc::RLIMIT_FSIZE, fsize);
                set_limit(libc::RLIMIT_CORE, 0);
                // Die with the parent: a killed worker must not leave encoders running.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd
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
        let mut stderr = child
            .stderr
            .take()
            .ok_or_else(|| crashed("no stderr".into()))?;
        let stderr_task = tokio::spawn(async move {
            let mut buf = Vec::new();
            let _ = stderr.read_to_end(&mut buf).await;
            let text = String::from_utf8_lossy(&buf).into_owned();
            let tail: String = text
                .chars()
                .rev()
                .take(2000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            tail
        });

        let io = async {
            stdin.write_all(&request).await?;
            drop(stdin);
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            let mut result = None;
            while let Some(line) = lines.next_line().await? {
                if let Some(n) = line.strip_prefix("progress ") {
                    if let Ok(n) = n.trim().parse() {
                        progress(n);
                    }
                } else if let Some(json) = line.strip_prefix("result ") {
                    result = Some(json.to_string());
                }
            }
            let status = child.wait().await?;
            Ok::<_, std::io::Error>((result, status))
        };
        let outcome = tokio::time::timeout(limits.timeout, io).await;
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
        let stderr_tail = stderr_task.await.unwrap_or_default();
        let wall_seconds = started.elapsed().as_secs_f64();
        let Some(json) = result else {
            return Err(crashed(format!("{status}; stderr: {}", stderr_tail.trim())));
        };
        let resp: ChildResponse =
            serde_json::from_str(&json).map_err(|e| crashed(format!("unreadable result ({e})")))?;
        let stats = ChildStats {
            peak_rss_bytes: resp.peak_rss_bytes,
            wall_seconds,
        };
        if let Some(err) = resp.error {
            return Err(FarmError::Media {
                code: err.code,
                class: err.class,
                message: err.message,
            });
        }
        let value = resp.ok.ok_or_else(|| crashed("empty result".into()))?;
        let typed = serde_json::from_value(value)
            .map_err(|e| crashed(format!("result of unexpected shape ({e})")))?;
        Ok((typed, stats))
    }
}

fn set_limit(resource: libc::__rlimit_resource_t, value: u64) {
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: setrlimit reads a valid rlimit struct on our stack; failure only leaves the
    // inherited limit in place.
    unsafe {
        libc::setrlimit(resource, &lim);
    }
}

/// If this process was started as a media child, serves the request and exits.
///
/// Why here: every tessera binary calls this first thing in `main`, so the sandbox can
/// re-execute whichever binary it is running in.
pub fn run_child_if_requested() {
    if std::env::args().nth(1).as_deref() == Some(CHILD_ARG) {
        std::process::exit(child_main());
    }
}

fn child_main() -> i32 {
    let mut input = Vec::new();
    if std::io::stdin().read_to_end(&mut input).is_err() {
        return 3;
    }
    let response = match serde_json::from_slice::<MediaOp>(&input) {
        Ok(op) => execute(&op),
        Err(e) => Err(MediaError::InvalidRequest(format!(
            "bad child request: {e}"
        ))),
    };
    let resp = match response {
        Ok(v) => ChildResponse {
            ok: Some(v),
            error: None,
            peak_rss_bytes: peak_rss(),
        },
        Err(e) => ChildResponse {
            ok: None,
            error: Some(ChildError {
                code: e.code().into(),
                class: e.class(),
                message: e.to_string(),
            }),
            peak_rss_bytes: peak_rss(),
        },
    };
    let line = serde_json::to_string(&resp).unwrap_or_default();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "result {line}");
    let _ = out.flush();
    0
}

fn execute(op: &MediaOp) -> Result<serde_json::Value, MediaError> {
    let to_json = |v: Result<serde_json::Value, serde_json::Error>| {
        v.map_err(|e| MediaError::InvalidRequest(format!("result not serialisable: {e}")))
    };
    match op {
        MediaOp::Probe { input } => to_json(serde_json::to_value(tessera_media::probe(input)?)),
        MediaOp::Split {
            input,
            segments,
            bias,
            dir,
        } => {
            // Each finished chunk is announced at once so its segment can start encoding.
            let mut announce = |index: u32| {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "progress {index}");
                let _ = out.flush();
            };
            let chunks = tessera_media::split(input, segments, *bias, dir, &mut announce)?;
            to_json(serde_json::to_value(chunks))
        }
        MediaOp::Encode(req) => {
            let mut last = Instant::now();
            let mut report = |n: u64| {
                if last.elapsed() >= Duration::from_millis(200) {
                    last = Instant::now();
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "progress {n}");
                    let _ = out.flush();
                }
            };
            let result = tessera_media::encode_segment(req, &mut report)?;
            println!("progress {}", result.frames_in_range);
            to_json(serde_json::to_value(result))
        }
        MediaOp::Audio(req) => to_json(serde_json::to_value(tessera_media::transcode_audio(req)?)),
        MediaOp::Stitch(req) => to_json(serde_json::to_value(tessera_media::stitch(req)?)),
        MediaOp::Quality { output, source } => to_json(serde_json::to_value(
            tessera_media::measure_quality(output, source)?,
        )),
    }
}

/// Peak resident set size of this process, from /proc (0 where unavailable).
pub fn peak_rss() -> u64 {
    let Ok(file) = std::fs::File::open("/proc/self/status") else {
        return 0;
    };
    std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            l.strip_prefix("VmHWM:")
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
