//! What the load generator watches once a second: the dispatcher process from `/proc` (RSS,
//! CPU per thread, CPU of its media children), its job counts from `/metrics`, the broker's
//! queue backlogs and the database's size on disk.
//!
//! Why from outside: the dispatcher is the release binary a user runs, measured as a user
//! would (its own `/metrics`, the kernel's accounting), with nothing added to it for the test.

use std::collections::HashMap;
use std::path::Path;

/// CPU seconds of one thread, by `(tid, name)`.
pub type ThreadCpu = HashMap<(u32, String), f64>;

/// The kernel's clock ticks per second (`USER_HZ`, 100 on Linux).
const TICKS: f64 = 100.0;

/// `utime + stime` in seconds from a `/proc/.../stat` line, with the command name (the
/// field in parentheses, which may hold spaces) and the parent pid.
pub fn parse_stat(stat: &str) -> Option<(String, u32, f64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    // After the name: state(0) ppid(1) ... utime(11) stime(12).
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let ppid = rest.get(1)?.parse().ok()?;
    let utime: f64 = rest.get(11)?.parse().ok()?;
    let stime: f64 = rest.get(12)?.parse().ok()?;
    Some((name, ppid, (utime + stime) / TICKS))
}

/// Resident set size in bytes from `/proc/PID/status` text.
pub fn parse_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The dispatcher's resident set now (0 once it is gone).
pub fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| parse_rss(&s))
        .unwrap_or(0)
}

/// CPU seconds of each thread of `pid` so far.
pub fn threads(pid: u32) -> ThreadCpu {
    let mut out = ThreadCpu::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if let Some((name, _, cpu)) = parse_stat(&stat) {
            out.insert((tid, name), cpu);
        }
    }
    out
}

/// CPU seconds of the children `pid` has reaped (`cutime + cstime` of `/proc/PID/stat`).
pub fn reaped_cpu(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    parse_reaped(&stat).unwrap_or(0.0)
}

/// `cutime + cstime` in seconds from a `/proc/PID/stat` line.
pub fn parse_reaped(stat: &str) -> Option<f64> {
    let close = stat.rfind(')')?;
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let cutime: f64 = rest.get(13)?.parse().ok()?;
    let cstime: f64 = rest.get(14)?.parse().ok()?;
    Some((cutime + cstime) / TICKS)
}

/// CPU seconds of the live direct children of `pid` (the dispatcher's media children:
/// probe, split, audio) so far; those that exited are in [`reaped_cpu`].
pub fn children(pid: u32) -> f64 {
    let mut out = 0.0;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let numeric = entry
            .file_name()
            .to_str()
            .is_some_and(|s| s.parse::<u32>().is_ok());
        if !numeric {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if let Some((_, ppid, cpu)) = parse_stat(&stat) {
            if ppid == pid {
                out += cpu;
            }
        }
    }
    out
}

/// Bytes of the SQLite database `db` with its WAL and shared-memory files.
pub fn db_bytes(db: &Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|suffix| {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            std::fs::metadata(name).ok().map(|m| m.len())
        })
        .sum()
}

/// The `tessera_jobs{state="..."}` gauges of a `/metrics` text, by state.
pub fn jobs_by_state(metrics: &str) -> HashMap<String, u64> {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix("tessera_jobs{state=\""))
        .filter_map(|rest| {
            let (state, value) = rest.split_once("\"}")?;
            Some((state.to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// The whole machine's busy and total CPU ticks from `/proc/stat`'s first line.
pub fn machine_ticks() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let total: u64 = fields.iter().sum();
    // idle and iowait
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_lines_are_read_with_odd_names() {
        let line = "4242 (tokio-runtime-w) S 4200 4242 4200 0 -1 4194560 1000 0 0 0 \
                    250 50 0 0 20 0 8 0 12345 1000000 2000 18446744073709551615";
        let (name, ppid, cpu) = parse_stat(line).unwrap();
        assert_eq!((name.as_str(), ppid), ("tokio-runtime-w", 4200));
        assert!((cpu - 3.0).abs() < 1e-9, "{cpu}");
        let odd = "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 1 1 1 1";
        assert_eq!(parse_stat(odd).unwrap().0, "a (b) c");
        assert_eq!(parse_stat("garbage"), None);
        let reaper = "9 (d) S 1 9 9 0 -1 0 0 0 0 0 100 20 15 5 20 0 3 0 1 1 1";
        assert!((parse_reaped(reaper).unwrap() - 0.2).abs() < 1e-9);
    }

    #[test]
    fn rss_and_job_counts_are_read() {
        let status = "Name:\ttessera\nVmPeak:\t 9000 kB\nVmRSS:\t   51234 kB\nThreads:\t9\n";
        assert_eq!(parse_rss(status), Some(51234 * 1024));
        assert_eq!(parse_rss("Name: x\n"), None);
        let metrics = "# HELP tessera_jobs x\ntessera_jobs{state=\"done\"} 17\n\
                       tessera_jobs{state=\"queued\"} 3\ntessera_jobs_running 2\n";
        let jobs = jobs_by_state(metrics);
        assert_eq!(jobs.get("done"), Some(&17));
        assert_eq!(jobs.get("queued"), Some(&3));
        assert_eq!(jobs.len(), 2);
    }
}
