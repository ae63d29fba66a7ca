//! Running the programs the smoke test needs: each under a time limit in a process group of
//! its own (as `timeout --kill-after=10` did), and `nvidia-smi` sampled in the background.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Whether `name` is an executable on `PATH`.
pub fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(name).is_file()))
}

/// Runs `cmd` in a process group of its own; past `timeout` the group gets SIGTERM, and
/// SIGKILL 10 s later (as `timeout --kill-after=10`). None when it was stopped so.
pub fn limited(mut cmd: Command, timeout: Duration) -> Option<ExitStatus> {
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot start {cmd:?}: {e}");
            // As a shell reports a command it cannot run: exit status 127.
            return Some(std::os::unix::process::ExitStatusExt::from_raw(127 << 8));
        }
    };
    let started = Instant::now();
    let group = format!("-{}", child.id());
    let mut signal = "-TERM";
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return (started.elapsed() < timeout).then_some(status);
        }
        let limit = if signal == "-TERM" {
            timeout
        } else {
            timeout + Duration::from_secs(10)
        };
        if started.elapsed() > limit {
            let _ = Command::new("kill").args([signal, "--", &group]).status();
            if signal == "-KILL" {
                let _ = child.wait();
                return None;
            }
            signal = "-KILL";
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// `nvidia-smi` sampled every half second (sessions, encoder/decoder/GPU utilisation) into
/// a CSV file and memory, while the cases run; nothing without `nvidia-smi`.
pub struct Sampler {
    lines: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling into `csv` (created empty).
    pub fn start(csv: PathBuf) -> Sampler {
        let (lines, stop) = (
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(AtomicBool::new(false)),
        );
        let _ = File::create(&csv);
        let thread = on_path("nvidia-smi").then(|| {
            let (lines, stop) = (lines.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(text) = sample() {
                        use std::io::Write;
                        let file = std::fs::OpenOptions::new().append(true).open(&csv);
                        if let Ok(mut f) = file {
                            let _ = f.write_all(text.as_bytes());
                        }
                        let mut lines = lines.lock().expect("samples");
                        lines.extend(text.lines().map(String::from));
                    }
                    thread::sleep(Duration::from_millis(500));
                }
            })
        });
        Sampler {
            lines,
            stop,
            thread,
        }
    }

    /// How many samples there are so far.
    pub fn count(&self) -> usize {
        self.lines.lock().expect("samples").len()
    }

    /// The samples after the first `n`.
    pub fn since(&self, n: usize) -> Vec<String> {
        self.lines.lock().expect("samples")[n..].to_vec()
    }

    /// Stops sampling.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One `nvidia-smi` reading per card: `index, sessions, enc %, dec %, gpu %, VRAM MiB`
/// (VRAM used: the review's finding 7, how much a budget of children takes, is measured here).
fn sample() -> Option<String> {
    const QUERY: &str = "--query-gpu=index,encoder.stats.sessionCount,utilization.encoder,\
                         utilization.decoder,utilization.gpu,memory.used";
    let out = Command::new("nvidia-smi")
        .args([QUERY, "--format=csv,noheader,nounits"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
