//! The soak run (issue 9): many short jobs through two workers on the real services while a
//! loop SIGKILLs a worker every 5-10 s and starts a new one. It measures what a long life
//! does to the farm: jobs per hour, the dispatcher's and workers' resident memory (peak, and
//! the dispatcher's at the end against the start), open file descriptors, and the size of
//! the SQLite database; and it checks every job ended done, frame-exact.
//!
//! Why apart from the chaos run: chaos asks "does every fault end well?", the soak asks
//! "does nothing grow?"; it needs hundreds of jobs, so it runs from `scripts/soak.sh`.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::farm::Farm;
use crate::fixture::{fixture, Fixture};
use crate::playback::Summary;

/// What the soak measured.
#[derive(Debug, Default)]
pub struct SoakReport {
    /// Jobs submitted.
    pub jobs: usize,
    /// Jobs done with an output of the source's frame count.
    pub done_exact: usize,
    /// Jobs failed with a reason code (a segment whose every delivery was on a killed
    /// worker ends its job `task_lost`).
    pub failed_with_reason: usize,
    /// Jobs failed without a reason, or done with a wrong output.
    pub bad: Vec<String>,
    /// Wall seconds from the first submission to the last job's end.
    pub wall_s: f64,
    /// Workers SIGKILLed (and replaced) during the run.
    pub kills: usize,
    /// The dispatcher's RSS (KiB): after the first job, peak, at the end.
    pub dispatcher_rss_kib: (u64, u64, u64),
    /// The dispatcher's open descriptors: after the first job, at the end.
    pub dispatcher_fds: (usize, usize),
    /// The highest RSS (KiB) any worker process reached (sampled).
    pub worker_peak_rss_kib: u64,
    /// Open descriptors of the longest-lived worker at the end.
    pub worker_fds_end: usize,
    /// Bytes of the job database and its WAL at the end.
    pub sqlite_bytes: u64,
}

impl SoakReport {
    /// The figures, one line each.
    pub fn table(&self) -> String {
        let (d0, dpeak, dend) = self.dispatcher_rss_kib;
        format!(
            "soak: {} jobs, {} done frame-exact, {} failed with a reason, {} bad, {:.0} s wall, {:.0} jobs/hour, {} worker \
             kills\nsoak: dispatcher RSS {} KiB after the first job, peak {} KiB, end {} KiB \
             ({:+.1}%); fds {} -> {}\nsoak: worker peak RSS {} KiB; fds of the last worker {}\n\
             soak: SQLite {} bytes\n",
            self.jobs,
            self.done_exact,
            self.failed_with_reason,
            self.bad.len(),
            self.wall_s,
            self.jobs as f64 * 3600.0 / self.wall_s.max(1e-9),
            self.kills,
            d0,
            dpeak,
            dend,
            (dend as f64 - d0 as f64) * 100.0 / (d0.max(1) as f64),
            self.dispatcher_fds.0,
            self.dispatcher_fds.1,
            self.worker_peak_rss_kib,
            self.worker_fds_end,
            self.sqlite_bytes
        )
    }
}

/// RSS in KiB of a process (0 when it is gone).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Open file descriptors of a process (0 when it is gone). The farm's processes are not
/// dumpable (their media children must not read them), so only root may list their
/// descriptors: a refusal panics rather than reading as 0, which would let a leak pass.
pub fn fds(pid: u32) -> usize {
    match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(d) => d.count(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => panic!("cannot count the descriptors of pid {pid} (run the soak as root): {e}"),
    }
}

/// The soak's short inputs.
const KINDS: [Fixture; 2] = [Fixture::ClosedGopH264, Fixture::NoAudio];

/// Submits job `i` (retrying while the tenant is at its quota or the API is busy).
fn submit(farm: &Farm, i: usize) -> String {
    let kind = KINDS[i % KINDS.len()];
    let body = json!({"input": format!("s3://input/soak/{kind:?}.mp4"),
        "outputs": [{"destination": format!("s3://output/soak/{i}.mp4"), "preset": "ultrafast"}],
        "segment_seconds": 1});
    farm.submit_retrying(&body, 600, Duration::from_millis(500))
        .unwrap_or_else(|| panic!("soak job {i} could not be submitted"))
}

/// Runs `jobs` jobs, `in_flight` at a time, through two workers with the kill loop (seeded
/// by `seed`); returns the report (the caller asserts on it).
pub fn run(jobs: usize, in_flight: usize, seed: u64) -> SoakReport {
    let mut farm = Farm::start("soak", 2);
    for kind in KINDS {
        farm.upload(&fixture(kind), "input", &format!("soak/{kind:?}.mp4"));
    }
    let frames: Vec<u64> = KINDS
        .iter()
        .map(|k| Summary::of(&fixture(*k)).frame_count)
        .collect();
    let mut report = SoakReport {
        jobs,
        ..SoakReport::default()
    };
    let mut rng = seed.max(1);
    let mut next_kill = Instant::now() + Duration::from_secs(5);
    let (mut next_worker, mut live) = (2usize, vec![0usize, 1]);
    let started = Instant::now();
    let (mut ids, mut open): (Vec<String>, Vec<usize>) = (Vec::new(), Vec::new());
    let mut first_sampled = false;
    while ids.len() < jobs || !open.is_empty() {
        while ids.len() < jobs && open.len() < in_flight {
            open.push(ids.len());
            ids.push(submit(&farm, ids.len()));
        }
        // One list call a round (the list is newest first; 500 covers every open job), so
        // the kill loop keeps its pace; outputs are checked after the run.
        let states: std::collections::HashMap<String, serde_json::Value> = farm
            .jobs()
            .into_iter()
            .filter_map(|j| Some((j["id"].as_str()?.to_string(), j)))
            .collect();
        let mut still = Vec::new();
        for i in open {
            let state = states.get(&ids[i]).and_then(|j| j["state"].as_str());
            if matches!(state, Some("done" | "failed" | "cancelled")) {
                if !first_sampled {
                    let pid = farm.dispatcher_pid();
                    report.dispatcher_rss_kib.0 = rss_kib(pid);
                    report.dispatcher_fds.0 = fds(pid);
                    first_sampled = true;
                }
            } else {
                still.push(i);
            }
        }
        open = still;
        let d = rss_kib(farm.dispatcher_pid());
        report.dispatcher_rss_kib.1 = report.dispatcher_rss_kib.1.max(d);
        for pid in farm.worker_pids() {
            report.worker_peak_rss_kib = report.worker_peak_rss_kib.max(rss_kib(pid));
        }
        if Instant::now() >= next_kill && !open.is_empty() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let victim = live.remove((rng % live.len() as u64) as usize);
            farm.signal_worker(victim, "KILL");
            farm.add_worker(next_worker);
            live.push(next_worker);
            next_worker += 1;
            report.kills += 1;
            next_kill = Instant::now() + Duration::from_secs(5 + rng % 6);
        }
        assert!(
            started.elapsed() < Duration::from_secs(60 * 60),
            "soak still running after an hour:\n{}",
            report.table()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    report.wall_s = started.elapsed().as_secs_f64();
    for (i, id) in ids.iter().enumerate() {
        let job = farm.job(id);
        check_output(&farm, i, &job, frames[i % frames.len()], &mut report);
    }
    let pid = farm.dispatcher_pid();
    report.dispatcher_rss_kib.2 = rss_kib(pid);
    report.dispatcher_fds.1 = fds(pid);
    report.worker_fds_end = farm.worker_pids().first().map_or(0, |p| fds(*p));
    report.sqlite_bytes = ["jobs.db", "jobs.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(farm.dir.path().join(f)).ok())
        .map(|m| m.len())
        .sum();
    report
}

fn check_output(
    farm: &Farm,
    i: usize,
    job: &serde_json::Value,
    source_frames: u64,
    report: &mut SoakReport,
) {
    let key = format!("soak/{i}.mp4");
    if job["state"] != "done" {
        if job["error"]["code"].as_str().is_some_and(|c| !c.is_empty()) {
            report.failed_with_reason += 1;
        } else {
            report.bad.push(format!("job {i}: {job}"));
        }
        return;
    }
    let local = farm.dir.path().join(format!("soak-{i}.mp4"));
    farm.download("output", &key, &local);
    let got = Summary::of(&local).frame_count;
    let _ = std::fs::remove_file(&local);
    if got == source_frames {
        report.done_exact += 1;
    } else {
        report
            .bad
            .push(format!("job {i}: {got} frames, source {source_frames}"));
    }
}
