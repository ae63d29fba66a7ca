//! The test farm's workers: starting them (each with its own log and staging directory),
//! signalling them, waiting for them.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::path::PathBuf;

use crate::farm::{bin, Farm};

impl Farm {
    pub(crate) fn spawn_worker(&self, i: usize) -> Child {
        self.spawn_worker_with(i, &[])
    }

    /// Starts one more worker with extra flags (each replacing its default, if any).
    pub fn add_worker_with(&mut self, i: usize, extra: &[&str]) {
        let w = self.spawn_worker_with(i, extra);
        self.workers.push(w);
    }

    /// Starts one more worker through `wrapper` (`ip netns exec NS`: the worker in another
    /// network namespace), with `env` over the farm's settings (its own broker URL and S3
    /// endpoint) and extra flags.
    pub fn add_worker_via(
        &mut self,
        i: usize,
        wrapper: &[&str],
        env: &[(&str, &str)],
        extra: &[&str],
    ) {
        let w = self.spawn_worker_full(i, wrapper, env, extra);
        self.workers.push(w);
    }

    fn spawn_worker_with(&self, i: usize, extra: &[&str]) -> Child {
        self.spawn_worker_full(i, &[], &[], extra)
    }

    fn spawn_worker_full(
        &self,
        i: usize,
        wrapper: &[&str],
        env: &[(&str, &str)],
        extra: &[&str],
    ) -> Child {
        let log =
            std::fs::File::create(self.dir.path().join(format!("worker-{i}.log"))).expect("log");
        let worker = bin("tessera-worker");
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(worker);
                c
            }
            None => Command::new(worker),
        };
        self.env(&mut cmd);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let defaults = [
            ("--slots", "1"),
            ("--threads-per-slot", "1"),
            ("--grace-seconds", "20"),
            ("--min-free-mib", "64"),
        ];
        // A flag in `extra` replaces its default (clap refuses a flag given twice).
        for (flag, value) in defaults.iter().filter(|(f, _)| !extra.contains(f)) {
            cmd.args([flag, value]);
        }
        cmd.arg("--id")
            .arg(format!("w{i}"))
            .arg("--staging-dir")
            .arg(self.dir.path().join(format!("worker-{i}")))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log);
        cmd.spawn().expect("spawn worker")
    }

    /// Starts one more worker (index `i` names its log and staging directory).
    pub fn add_worker(&mut self, i: usize) {
        let w = self.spawn_worker(i);
        self.workers.push(w);
    }

    /// The staging directory of worker `i` (its own directory under its staging root).
    pub fn worker_staging(&self, i: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("worker-{i}"))
            .join(format!("w{i}"))
    }

    /// Waits until worker `i` holds a segment in progress (a chunk in its staging directory).
    pub fn wait_for_segment_in_progress(&self, i: usize, timeout: Duration) {
        let started = Instant::now();
        loop {
            let busy = std::fs::read_dir(self.worker_staging(i))
                .map(|rd| rd.flatten().any(|e| e.path().join("chunk.nut").is_file()))
                .unwrap_or(false);
            if busy {
                return;
            }
            assert!(
                started.elapsed() < timeout,
                "worker {i} never started a segment:\n{}",
                self.log(&format!("worker-{i}.log"))
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `signal` (e.g. "KILL", "TERM") to worker number `i` (in start order).
    pub fn signal_worker(&self, i: usize, signal: &str) {
        let pid = self.workers[i].id().to_string();
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .map(|s| s.success());
        assert_eq!(ok.ok(), Some(true), "kill -{signal} {pid}");
    }

    /// Waits for worker `i` to exit; its exit code (None if killed by a signal).
    pub fn wait_worker_exit(&mut self, i: usize, timeout: Duration) -> Option<i32> {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.workers[i].try_wait() {
                return status.code();
            }
            assert!(
                started.elapsed() < timeout,
                "worker {i} did not exit:\n{}",
                self.log(&format!("worker-{i}.log"))
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Process ids of the workers still running.
    pub fn worker_pids(&mut self) -> Vec<u32> {
        self.workers
            .iter_mut()
            .filter_map(|w| matches!(w.try_wait(), Ok(None)).then(|| w.id()))
            .collect()
    }

    /// The dispatcher's process id.
    pub fn dispatcher_pid(&self) -> u32 {
        self.dispatcher.id()
    }
}

/// The dispatcher's stop.
impl Farm {
    /// Stops the dispatcher with SIGTERM, as a supervisor does (compose's `stop`, a rolling
    /// upgrade), and waits for it to exit (60 s at most, then SIGKILL); its exit code.
    pub fn stop_dispatcher(&mut self) -> Option<i32> {
        let pid = self.dispatcher.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            if let Ok(Some(status)) = self.dispatcher.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill_dispatcher();
        None
    }
}
