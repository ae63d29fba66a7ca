//! Warm media children: one child process serves many operations in sequence.
//!
//! Why: a one-shot child pays fork/exec, dynamic linking of the libav* libraries and FFmpeg
//! set-up for every segment (and, on GPU workers, a CUDA device context: 100-300 ms), which
//! dominated the per-segment overhead. A [`SandboxSlot`] keeps its child between operations
//! and keeps the sandbox's contract: the child is a separate process under rlimits with a
//! parent-death signal, each operation has its own timeout, and a child whose operation did
//! not end cleanly (timeout, crash, protocol error, media error, dropped future) is killed and
//! never reused; the next operation gets a fresh child.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::task::JoinHandle;

use super::{into_result, read_line, tail_of, ChildResponse, ChildStats, Limits, MediaOp, Sandbox};
use crate::FarmError;

/// When a warm child is replaced even though it works: bounds what a slow leak (in FFmpeg, a
/// driver, or our code) can accumulate in one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WarmPolicy {
    /// Operations one child serves before it is replaced.
    pub max_operations: u32,
    /// Age after which a child is replaced (checked before each operation).
    pub max_age: Duration,
    /// Start the replacement child as soon as one is retired, so its start-up overlaps the
    /// slot's other work (download, upload) instead of the next operation.
    pub prewarm: bool,
}

impl Default for WarmPolicy {
    fn default() -> Self {
        WarmPolicy {
            max_operations: 64,
            max_age: Duration::from_secs(3600),
            prewarm: true,
        }
    }
}

/// One slot's warm child: operations run one at a time (`&mut self`), each in the same child
/// while it stays healthy and within its [`WarmPolicy`].
///
/// Dropping the slot, or a [`SandboxSlot::run`] future before it finishes, kills the child.
pub struct SandboxSlot {
    sandbox: Sandbox,
    policy: WarmPolicy,
    child: Option<WarmChild>,
    next_seq: u64,
}

#[derive(Serialize)]
struct Outgoing<'a> {
    seq: u64,
    request: &'a MediaOp,
}

impl SandboxSlot {
    /// An empty slot; its first operation (or [`SandboxSlot::warm`]) starts the child.
    pub fn new(sandbox: Sandbox, policy: WarmPolicy) -> Self {
        SandboxSlot {
            sandbox,
            policy,
            child: None,
            next_seq: 0,
        }
    }

    /// Starts the child now when there is none, so the first operation finds it ready.
    pub fn warm(&mut self, limits: Limits) -> Result<(), FarmError> {
        if self.child.is_none() {
            let child =
                WarmChild::spawn(&self.sandbox, limits).map_err(|e| FarmError::ChildCrashed {
                    what: "warm-up".into(),
                    detail: format!("cannot start: {e}"),
                })?;
            self.child = Some(child);
        }
        Ok(())
    }

    /// Ends the current child, if any: the next operation starts a fresh one. Why: a child
    /// that parsed one job's (untrusted) media must not serve another job's.
    pub fn discard_child(&mut self) {
        self.child = None;
    }

    /// The process id of the current child, if one is running (for logs and tests).
    pub fn child_pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.process.id())
    }

    /// Runs `op` in the slot's child (started first when there is none, or when the current
    /// one is used up or was started under other rlimits); `progress` receives the child's
    /// running counts. Errors are those of [`Sandbox::run`].
    pub async fn run<T: DeserializeOwned>(
        &mut self,
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
        self.next_seq += 1;
        let seq = self.next_seq;
        let mut line = serde_json::to_vec(&Outgoing { seq, request: op })
            .map_err(|e| FarmError::BadMessage(e.to_string()))?;
        line.push(b'\n');
        // On timeout the exchange future is dropped, and with it the child: killed.
        let outcome =
            tokio::time::timeout(limits.timeout, self.exchange(&line, seq, limits, progress)).await;
        let result = match outcome {
            Err(_) => Err(FarmError::ChildTimeout {
                what: what.clone(),
                seconds: limits.timeout.as_secs(),
            }),
            Ok(Err(detail)) => Err(crashed(detail)),
            Ok(Ok((resp, mut child))) => {
                child.operations += 1;
                let stats = ChildStats {
                    peak_rss_bytes: resp.peak_rss_bytes,
                    wall_seconds: started.elapsed().as_secs_f64(),
                    cpu_seconds: resp.cpu_seconds,
                };
                super::ledger::record(op.name(), &stats);
                if let Some(cpu) = resp.start_cpu_seconds {
                    super::ledger::record_start(cpu);
                }
                // A media error may leave state behind (a faulted CUDA context): start afresh.
                if resp.error.is_none() && child.usable(limits, &self.policy) {
                    self.child = Some(child);
                }
                into_result(resp, &crashed).map(|t| (t, stats))
            }
        };
        if self.child.is_none() && self.policy.prewarm {
            if let Err(e) = self.warm(limits) {
                tracing::warn!(error = %e, "media child not pre-started");
            }
        }
        result
    }

    /// Sends the request and reads the answer; on any failure the child is ended and the
    /// error says how (exit status, stderr tail).
    async fn exchange(
        &mut self,
        line: &[u8],
        seq: u64,
        limits: Limits,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<(ChildResponse, WarmChild), String> {
        let mut warm = self.child.take();
        if let Some(c) = warm.as_mut() {
            if !c.usable(limits, &self.policy) || !matches!(c.process.try_wait(), Ok(None)) {
                warm = None;
            }
        }
        let mut child = match warm {
            Some(mut c) => match c.send(line).await {
                Ok(()) => c,
                // It died while idle: not this operation's fault, so it gets a fresh child.
                Err(_) => self.fresh(line, limits).await?,
            },
            None => self.fresh(line, limits).await?,
        };
        let pid = child.process.id();
        let received = tokio::select! {
            r = child.receive(seq, progress) => r,
            rss = super::child::rss_exceeds(pid, limits) => {
                let _ = child.process.start_kill();
                Err(super::child::rss_killed(rss, limits))
            }
        };
        match received {
            Ok(resp) => Ok((resp, child)),
            Err(detail) => Err(format!("{detail}; {}", child.end().await)),
        }
    }

    async fn fresh(&self, line: &[u8], limits: Limits) -> Result<WarmChild, String> {
        let mut child =
            WarmChild::spawn(&self.sandbox, limits).map_err(|e| format!("cannot start: {e}"))?;
        match child.send(line).await {
            Ok(()) => Ok(child),
            Err(e) => Err(format!("request not sent ({e}); {}", child.end().await)),
        }
    }
}

/// A serving child and its pipes.
struct WarmChild {
    process: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<String>>,
    stderr_task: JoinHandle<()>,
    born: Instant,
    operations: u32,
    limits: Limits,
}

impl WarmChild {
    fn spawn(sandbox: &Sandbox, limits: Limits) -> std::io::Result<WarmChild> {
        let mut process = sandbox.command(limits, true).spawn()?;
        let missing = || std::io::Error::other("child pipe missing");
        let stdin = process.stdin.take().ok_or_else(missing)?;
        let stdout = process.stdout.take().ok_or_else(missing)?;
        let stderr = process.stderr.take().ok_or_else(missing)?;
        // Keeps only a recent tail: a long-lived child's stderr must not grow without bound.
        let (buffer, stderr_task) = super::pipes::stderr_tail(stderr);
        Ok(WarmChild {
            process,
            stdin,
            stdout: BufReader::new(stdout),
            stderr: buffer,
            stderr_task,
            born: Instant::now(),
            operations: 0,
            limits,
        })
    }

    /// Whether this child may take another operation under `limits`.
    fn usable(&self, limits: Limits, policy: &WarmPolicy) -> bool {
        self.limits.memory_bytes == limits.memory_bytes
            && self.limits.max_file_bytes == limits.max_file_bytes
            && self.limits.bound_by_rss == limits.bound_by_rss
            && self.operations < policy.max_operations
            && self.born.elapsed() < policy.max_age
    }

    async fn send(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        super::child::reset_peak_rss_of(self.process.id());
        self.stdin.write_all(line).await?;
        self.stdin.flush().await
    }

    /// Reads progress lines up to this request's result line.
    async fn receive(
        &mut self,
        seq: u64,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<ChildResponse, String> {
        loop {
            let line = match super::pipes::next_line_capped(
                &mut self.stdout,
                super::pipes::MAX_LINE_BYTES,
            )
            .await
            {
                Ok(Some(line)) => line,
                Ok(None) => return Err("ended without a result".into()),
                Err(e) => return Err(format!("pipe error: {e}")),
            };
            if let Some(json) = read_line(&line, progress) {
                let resp: ChildResponse =
                    serde_json::from_str(json).map_err(|e| format!("unreadable result ({e})"))?;
                if resp.seq != Some(seq) {
                    return Err(format!("result for request {:?}, not {seq}", resp.seq));
                }
                return Ok(resp);
            }
        }
    }

    /// Ends the child (it gets a moment to exit on its own, so a crash reports its own
    /// status) and describes how it ended, with the tail of its stderr.
    async fn end(mut self) -> String {
        let status = match tokio::time::timeout(Duration::from_secs(1), self.process.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            Ok(Err(e)) => format!("wait failed: {e}"),
            Err(_) => {
                let _ = self.process.start_kill();
                match self.process.wait().await {
                    Ok(status) => format!("killed ({status})"),
                    Err(e) => format!("killed (wait failed: {e})"),
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), &mut self.stderr_task).await;
        let text = self
            .stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        format!("{status}; stderr: {}", tail_of(&text).trim())
    }
}
