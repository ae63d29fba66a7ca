//! The child's side of the sandbox protocol: run media operations and answer on stdout.
//!
//! Why its own module: the `tessera-media` executable runs this side and the parents run the
//! other; keeping the child's loop apart from the parent's process management keeps each
//! readable. Two modes:
//! - one-shot (`CHILD_ARG`): read one JSON request to EOF, answer, exit;
//! - serve (`CHILD_ARG SERVE_ARG`): read one [`ServeRequest`] per line, answer each with
//!   `progress N` lines and one `result {json}` line, until stdin closes. Used by warm slots
//!   ([`super::SandboxSlot`]) so exec, dynamic linking and FFmpeg/CUDA set-up are paid once per
//!   child, not once per operation.

use std::io::{BufRead, Read, Write};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tessera_media::MediaError;

use super::ledger::own_cpu_seconds;
use super::{ChildError, ChildResponse, MediaOp};

/// The second argument that makes a media child serve requests in a loop.
pub const SERVE_ARG: &str = "serve";

/// One request to a serving child: `seq` is echoed in the response, so a stale or misplaced
/// answer is recognised as a protocol error instead of being taken for the current one.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ServeRequest {
    pub(crate) seq: u64,
    pub(crate) request: MediaOp,
}

/// Entry point of the media child executable (`tessera-media`); returns the exit code.
///
/// Why public: the executable lives in the tessera-cli package and is only this call.
pub fn child_main() -> i32 {
    if std::env::args().nth(1).as_deref() != Some(super::CHILD_ARG) {
        eprintln!(
            "tessera-media runs FFmpeg work for tessera's sandbox and is started by it \
             (tessera, tessera-worker, tessera-dispatcher); it is not a command to run by hand"
        );
        return 2;
    }
    if std::env::args().nth(2).as_deref() == Some(SERVE_ARG) {
        tessera_media::init();
        let stdin = std::io::stdin();
        return serve(stdin.lock(), &mut std::io::stdout());
    }
    let mut input = Vec::new();
    if std::io::stdin().read_to_end(&mut input).is_err() {
        return 3;
    }
    let mut out = std::io::stdout();
    let response = match serde_json::from_slice::<MediaOp>(&input) {
        Ok(op) => execute(&op, &mut out),
        Err(e) => Err(MediaError::InvalidRequest(format!(
            "bad child request: {e}"
        ))),
    };
    // A one-shot child's cost is its whole life: start-up, FFmpeg's set-up and the work.
    write_result(&mut out, response, None, (own_cpu_seconds(), None));
    0
}

/// Serves requests line by line until `input` ends; every request gets exactly one result
/// line (an unreadable one gets an `invalid_request` error). The peak RSS is reset before
/// each operation, so each result reports the peak of its own operation.
pub(crate) fn serve(input: impl BufRead, out: &mut dyn Write) -> i32 {
    // What this child's start cost (exec, dynamic linking, FFmpeg's set-up), told once with
    // its first result.
    let mut start_cpu = Some(own_cpu_seconds());
    for line in input.lines() {
        let Ok(line) = line else {
            return 3;
        };
        if line.trim().is_empty() {
            continue;
        }
        reset_peak_rss();
        let cpu_before = own_cpu_seconds();
        match serde_json::from_str::<ServeRequest>(&line) {
            Ok(req) => {
                let response = execute(&req.request, out);
                let cpu = own_cpu_seconds() - cpu_before;
                write_result(out, response, Some(req.seq), (cpu, start_cpu.take()));
            }
            Err(e) => {
                let err = MediaError::InvalidRequest(format!("bad child request: {e}"));
                write_result(out, Err(err), None, (0.0, None));
            }
        }
    }
    0
}

fn write_result(
    out: &mut dyn Write,
    response: Result<serde_json::Value, MediaError>,
    seq: Option<u64>,
    (cpu_seconds, start_cpu_seconds): (f64, Option<f64>),
) {
    let resp = match response {
        Ok(v) => ChildResponse {
            ok: Some(v),
            error: None,
            peak_rss_bytes: peak_rss(),
            cpu_seconds,
            start_cpu_seconds,
            seq,
        },
        Err(e) => ChildResponse {
            ok: None,
            error: Some(ChildError {
                code: e.code(),
                class: e.class(),
                message: e.to_string(),
            }),
            peak_rss_bytes: peak_rss(),
            cpu_seconds,
            start_cpu_seconds,
            seq,
        },
    };
    let line = serde_json::to_string(&resp).unwrap_or_default();
    let _ = writeln!(out, "result {line}");
    let _ = out.flush();
}

fn announce(out: &mut dyn Write, n: u64) {
    let _ = writeln!(out, "progress {n}");
    let _ = out.flush();
}

fn execute(op: &MediaOp, out: &mut dyn Write) -> Result<serde_json::Value, MediaError> {
    let to_json = |v: Result<serde_json::Value, serde_json::Error>| {
        v.map_err(|e| MediaError::InvalidRequest(format!("result not serialisable: {e}")))
    };
    match op {
        MediaOp::Probe { input, max_frames } => {
            let limit = max_frames.map_or(tessera_media::MAX_VIDEO_FRAMES, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            });
            to_json(serde_json::to_value(tessera_media::probe_within(
                input, limit,
            )?))
        }
        MediaOp::Split {
            input,
            segments,
            bias,
            dts_rule,
            derived_pts,
            dir,
        } => {
            // Each finished chunk is announced at once so its segment can start encoding.
            let mut each = |index: u32| announce(out, u64::from(index));
            let chunks = tessera_media::split(
                input,
                segments,
                *bias,
                *dts_rule,
                derived_pts.as_ref(),
                dir,
                &mut each,
            )?;
            to_json(serde_json::to_value(chunks))
        }
        MediaOp::Encode(req) => {
            let mut last = Instant::now();
            let mut report = |n: u64| {
                if last.elapsed() >= Duration::from_millis(200) {
                    last = Instant::now();
                    announce(out, n);
                }
            };
            let result = tessera_media::encode_segment(req, &mut report)?;
            announce(out, result.frames_in_range);
            to_json(serde_json::to_value(result))
        }
        MediaOp::Audio(req) => to_json(serde_json::to_value(tessera_media::transcode_audio(req)?)),
        MediaOp::Stitch(req) => to_json(serde_json::to_value(tessera_media::stitch(req)?)),
        MediaOp::Segment(req) => to_json(serde_json::to_value(tessera_media::segment_track(req)?)),
        MediaOp::Sprite(req) => to_json(serde_json::to_value(tessera_media::compose_sprite(req)?)),
        MediaOp::GpuProbe { device, encode } => {
            let report = tessera_media::probe_card(*device, *encode);
            tessera_media::release_cuda_devices();
            to_json(serde_json::to_value(report?))
        }
        MediaOp::Quality {
            output,
            source,
            segments,
        } => to_json(serde_json::to_value(tessera_media::measure_quality(
            output, source, segments,
        )?)),
        MediaOp::Scenes { input } => {
            let threads = std::thread::available_parallelism().map_or(1, usize::from);
            to_json(serde_json::to_value(tessera_media::scene_changes(
                input, threads,
            )?))
        }
        MediaOp::Capabilities => to_json(serde_json::to_value(tessera_media::capabilities())),
        MediaOp::NvdecCheck { input, device } => to_json(serde_json::to_value(
            tessera_media::nvdec_decode_check(input, *device)?,
        )),
    }
}

/// Resets this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0; a no-op where
/// refused, and then the reported peak is the process's lifetime peak).
pub(crate) fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Resets the peak RSS (VmHWM) of the child `pid`, from the parent: a confined child may not
/// write its own /proc files (Landlock), so a warm child's parent does it before each
/// request. A no-op where refused.
pub(crate) fn reset_peak_rss_of(pid: Option<u32>) {
    if let Some(pid) = pid {
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
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

/// Resident memory of process `pid` in bytes, from /proc/<pid>/statm (None once it is gone).
fn resident_bytes(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).unwrap_or(4096))
}

/// Resolves with the child's resident size once it exceeds `limits.memory_bytes`, when the
/// limits bound the child by RSS (a GPU child, which has no address-space limit); pending
/// forever otherwise, or once the process is gone. Checked every 250 ms.
pub(crate) async fn rss_exceeds(pid: Option<u32>, limits: super::Limits) -> u64 {
    let Some(pid) = pid.filter(|_| limits.bound_by_rss) else {
        return std::future::pending().await;
    };
    loop {
        match resident_bytes(pid) {
            Some(rss) if rss > limits.memory_bytes => return rss,
            Some(_) => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
            None => return std::future::pending().await,
        }
    }
}

/// How a child killed for its resident memory is described.
pub(crate) fn rss_killed(rss: u64, limits: super::Limits) -> String {
    format!(
        "killed: resident memory {} MiB above the limit of {} MiB",
        rss >> 20,
        limits.memory_bytes >> 20
    )
}
