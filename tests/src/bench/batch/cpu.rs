//! CPU accounting from `/proc`: what the farm's processes (and the children they reaped)
//! spent, and what `xargs -P 2 ffmpeg` spent (the test process's reaped children).
//!
//! Why `/proc/PID/stat` and not `perf`: the batch benchmark needs CPU-seconds per process
//! group over a whole round, not where inside a process they went; `utime + stime` of a live
//! process plus `cutime + cstime` (the children it has waited for) is exact at clock-tick
//! resolution and needs no privileges. A media child that ends is folded into its parent's
//! `cutime`; one alive at a snapshot is counted as a live descendant, so a process tree's
//! total is the same whichever children have ended.

use std::collections::HashMap;

/// One process's line of `/proc/PID/stat`, the fields the accounting needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// The process id.
    pub pid: u32,
    /// Its parent's id.
    pub ppid: u32,
    /// The command name (`comm`, up to 15 bytes).
    pub comm: String,
    /// `utime + stime`: the process's own CPU (clock ticks).
    pub own: u64,
    /// `cutime + cstime`: the CPU of the children it has waited for (clock ticks).
    pub reaped: u64,
}

/// Parses a `/proc/PID/stat` line; `None` when it is not one. The command name sits in
/// parentheses and may hold spaces and `)`, so the fields are counted from the last `)`.
pub fn parse_stat(line: &str) -> Option<ProcStat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let pid = line[..open].trim().parse().ok()?;
    let comm = line.get(open + 1..close)?.to_string();
    // After ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    // utime stime cutime cstime ...
    let rest: Vec<&str> = line[close + 1..].split_whitespace().collect();
    let field = |i: usize| -> Option<u64> { rest.get(i)?.parse().ok() };
    Some(ProcStat {
        pid,
        ppid: u32::try_from(field(1)?).ok()?,
        comm,
        own: field(11)? + field(12)?,
        reaped: field(13)? + field(14)?,
    })
}

/// Every process of the machine, by pid (processes that end while it reads are skipped).
pub fn snapshot() -> HashMap<u32, ProcStat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.filter_map(|e| {
        let name = e.ok()?.file_name();
        name.to_str()?.parse::<u32>().ok()?;
        let text = std::fs::read_to_string(format!("/proc/{}/stat", name.to_str()?)).ok()?;
        parse_stat(&text)
    })
    .map(|p| (p.pid, p))
    .collect()
}

/// `root`'s pid and those of all its live descendants.
pub fn descendants(procs: &HashMap<u32, ProcStat>, root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for p in procs.values() {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        if procs.contains_key(&pid) {
            out.push(pid);
            todo.extend(children.get(&pid).into_iter().flatten());
        }
    }
    out
}

/// What a process tree has spent (clock ticks): `root`'s own and reaped CPU, and the same
/// of every live descendant; `(root alone, its descendants)`, so a caller can tell the
/// process's own work from its media children's.
pub fn tree_ticks(procs: &HashMap<u32, ProcStat>, root: u32) -> (u64, u64) {
    let Some(top) = procs.get(&root) else {
        return (0, 0);
    };
    let below: u64 = descendants(procs, root)
        .into_iter()
        .filter(|&pid| pid != root)
        .filter_map(|pid| procs.get(&pid))
        .map(|p| p.own + p.reaped)
        .sum();
    (top.own, top.reaped + below)
}

/// The summed own and reaped CPU (clock ticks) of the processes whose command name is one
/// of `names` (RabbitMQ's Erlang VM and helpers, which the farm shares with other users).
pub fn named_ticks(procs: &HashMap<u32, ProcStat>, names: &[&str]) -> u64 {
    procs
        .values()
        .filter(|p| names.contains(&p.comm.as_str()))
        .map(|p| p.own + p.reaped)
        .sum()
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`; 100 if that cannot be run).
pub fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(pid: u32, ppid: u32, comm: &str, times: [u64; 4]) -> String {
        let [u, s, cu, cs] = times;
        format!("{pid} ({comm}) S {ppid} 1 1 0 -1 4194304 100 0 0 0 {u} {s} {cu} {cs} 20 0 1 0")
    }

    #[test]
    fn a_stat_line_gives_own_and_reaped_ticks_even_with_odd_names() {
        let p = parse_stat(&stat(42, 7, "tokio-rt) x", [10, 5, 30, 2])).expect("parsed");
        assert_eq!(
            p,
            ProcStat {
                pid: 42,
                ppid: 7,
                comm: "tokio-rt) x".into(),
                own: 15,
                reaped: 32
            }
        );
        assert_eq!(parse_stat("not a stat line"), None);
        assert_eq!(parse_stat("12 (short) S 1 2 3"), None);
    }

    #[test]
    fn a_tree_counts_live_descendants_and_what_each_reaped_but_not_strangers() {
        let lines = [
            stat(10, 1, "tessera-dispatc", [100, 20, 500, 0]),
            stat(11, 10, "tessera-media", [40, 0, 0, 0]),
            stat(12, 11, "grandchild", [3, 0, 7, 0]),
            stat(20, 1, "tessera-worker", [50, 0, 900, 0]),
            stat(30, 1, "beam.smp", [60, 6, 4, 0]),
            stat(31, 30, "erl_child_setup", [1, 0, 0, 0]),
        ];
        let procs: HashMap<u32, ProcStat> = lines
            .iter()
            .filter_map(|l| parse_stat(l))
            .map(|p| (p.pid, p))
            .collect();
        let mut tree = descendants(&procs, 10);
        tree.sort_unstable();
        assert_eq!(tree, [10, 11, 12]);
        assert_eq!(tree_ticks(&procs, 10), (120, 500 + 40 + 10));
        assert_eq!(tree_ticks(&procs, 20), (50, 900));
        assert_eq!(tree_ticks(&procs, 99), (0, 0));
        assert_eq!(named_ticks(&procs, &["beam.smp", "erl_child_setup"]), 71);
    }

    #[test]
    fn this_process_is_in_the_snapshot() {
        let procs = snapshot();
        let me = procs.get(&std::process::id()).expect("this process");
        assert!(me.ppid > 0);
        assert!(clock_ticks() > 0.0);
    }
}
