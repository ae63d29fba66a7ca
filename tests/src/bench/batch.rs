//! The batch benchmark (issue 31): a day of uploads in miniature. `BENCH_BATCH_FILES`
//! (default 40) clips of the input matrix, 2 s to 3 minutes long ([`inputs`]), go in the
//! input bucket and are submitted at once to the distributed farm on this machine
//! ([`crate::bench::start_bench_farm`]: RabbitMQ, Garage, the dispatcher, two workers); the same files go
//! through `xargs -P 2 ffmpeg` from local disk with the same settings (libx264 veryfast CRF
//! 23, AAC, MP4). The two alternate, `BENCH_RUNS` (default 3) rounds. It prints per round and
//! as medians: the makespan ratio, CPU-seconds per minute of output for both ([`cpu`]:
//! dispatcher, workers, their media children, Garage and RabbitMQ from `/proc`; ffmpeg from
//! the children's rusage), per-job latency p50/p95, the dispatcher's share of the farm's CPU
//! and its CPU per segment, against the targets ([`stats`]: reported, not asserted).
//!
//! Why: every other figure is about one file at a time; a farm is judged by what a batch
//! costs, and for short files splitting only adds work that per-file encoding does not pay.
//! What is asserted: every job ends done, and each output's decoded frame count (ffprobe)
//! equals its input's. The test is `tests/tests/bench_batch.rs`; `bench/batch.sh` runs it.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::bench::start_bench_farm_with_metrics;
use crate::farm::Farm;
use crate::probe::frame_count;
use crate::run::run_command;

pub mod cpu;
pub mod inputs;
pub mod media_ops;
pub mod stats;

pub use inputs::{uploads, Upload};
pub use stats::{FarmCpu, Round, Side, Summary};

/// How long one side of a round may take before the benchmark gives up.
const ROUND_TIMEOUT: Duration = Duration::from_secs(3 * 3600);
/// How often the farm's jobs are listed (the resolution of its times).
const POLL: Duration = Duration::from_millis(250);
/// The encode settings of both sides, as ffmpeg flags (a shell word list). Besides preset and
/// CRF, what the farm does to every H.264 output: 8-bit 4:2:0 at an even size (an odd source
/// loses its last row or column to scaling, `tessera_model::settings::output_size`); without
/// it plain ffmpeg keeps 4:4:4 and 10-bit sources as they are and refuses odd 4:2:0 sizes.
const FFMPEG_SETTINGS: &str = "-c:v libx264 -preset veryfast -crf 23 -pix_fmt yuv420p \
     -vf 'scale=trunc(iw/2)*2:trunc(ih/2)*2' -c:a aac";
/// RabbitMQ's processes (the Erlang VM and its helpers).
const RABBIT: [&str; 4] = ["beam.smp", "erl_child_setup", "epmd", "inet_gethost"];

/// The benchmark's size, from the environment.
#[derive(Debug, Clone, Copy)]
pub struct BatchSettings {
    /// Uploads in the batch (`BENCH_BATCH_FILES`, default 40).
    pub files: usize,
    /// Multiplier on their lengths (`BENCH_BATCH_SCALE`, default 1.0).
    pub scale: f64,
    /// Rounds (`BENCH_RUNS`, default 3).
    pub rounds: usize,
}

impl BatchSettings {
    /// From the environment; panics on a value that is not a number.
    pub fn from_env() -> BatchSettings {
        fn var<T: std::str::FromStr>(name: &str, default: T) -> T {
            match std::env::var(name) {
                Ok(v) => v
                    .trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}={v}: not a number")),
                Err(_) => default,
            }
        }
        BatchSettings {
            files: var("BENCH_BATCH_FILES", 40),
            scale: var("BENCH_BATCH_SCALE", 1.0),
            rounds: var("BENCH_RUNS", 3),
        }
    }
}

/// The benchmark's farm ([`crate::bench::start_bench_farm`]) with the batch in its input bucket.
pub struct BatchFarm {
    /// The farm.
    pub farm: Farm,
    /// The uploads, in submit order.
    pub uploads: Vec<Upload>,
    ticks: f64,
    /// The workers' `/metrics` URLs.
    worker_metrics: Vec<String>,
}

impl BatchFarm {
    /// Starts the farm and puts every upload in the input bucket.
    pub fn start(uploads: Vec<Upload>) -> BatchFarm {
        let (farm, worker_metrics) = start_bench_farm_with_metrics();
        for (i, u) in uploads.iter().enumerate() {
            farm.upload(&u.path, "input", &u.key(i));
        }
        BatchFarm {
            farm,
            uploads,
            ticks: cpu::clock_ticks(),
            worker_metrics,
        }
    }

    /// The farm's media CPU so far, by operation (its services' `/metrics`).
    fn media_ops_now(&self) -> media_ops::MediaOps {
        let workers = self
            .worker_metrics
            .iter()
            .map(|url| media_ops::scrape(url))
            .fold(media_ops::OpCpu::new(), |a, b| media_ops::sum(&a, &b));
        media_ops::MediaOps {
            dispatcher: media_ops::scrape(&format!("{}/metrics", self.farm.api)),
            workers,
        }
    }

    /// The farm's CPU so far, by part (CPU-seconds).
    fn cpu_now(&mut self) -> FarmCpu {
        let procs = cpu::snapshot();
        let s = |t: u64| t as f64 / self.ticks;
        let (disp, disp_children) = cpu::tree_ticks(&procs, self.farm.dispatcher_pid());
        let (worker_own, worker_below) = self
            .farm
            .worker_pids()
            .into_iter()
            .map(|pid| cpu::tree_ticks(&procs, pid))
            .fold((0, 0), |(a, b), (own, below)| (a + own, b + below));
        // The farm's Garage is a child of this process (the harness starts it).
        let me = std::process::id();
        let garage: u64 = procs
            .values()
            .filter(|p| p.ppid == me && p.comm.starts_with("garage"))
            .map(|p| {
                let (own, below) = cpu::tree_ticks(&procs, p.pid);
                own + below
            })
            .sum();
        FarmCpu {
            dispatcher: s(disp),
            dispatcher_children: s(disp_children),
            workers: s(worker_own + worker_below),
            worker_processes: s(worker_own),
            garage: s(garage),
            rabbitmq: s(cpu::named_ticks(&procs, &RABBIT)),
        }
    }

    /// Round `n` on the farm: submits every upload at once, polls until each job ends, and
    /// checks each output's frame count. Returns the farm's side, its CPU by part and the
    /// segments. Panics when a job does not end done or an output's frames differ.
    pub fn round(&mut self, n: usize) -> (Side, FarmCpu, u64, media_ops::MediaOps) {
        let before = self.cpu_now();
        let ops_before = self.media_ops_now();
        let started = Instant::now();
        let mut submitted: HashMap<String, (usize, f64)> = HashMap::new();
        for (i, u) in self.uploads.iter().enumerate() {
            let id = self.farm.submit(
                &format!("s3://input/{}", u.key(i)),
                &format!("s3://output/batch/r{n}/{i:02}.mp4"),
                json!({"codec": "h264", "preset": "veryfast", "crf": 23}),
                json!({}),
            );
            submitted.insert(id, (i, started.elapsed().as_secs_f64()));
        }
        let ended = self.wait_all(&submitted, started);
        let cpu = self.cpu_now().since(&before);
        let ops = self.media_ops_now().since(&ops_before);
        let makespan_s = ended.values().map(|(t, _)| *t).fold(0.0, f64::max);
        let mut segments = 0;
        let mut latencies_s = Vec::new();
        for (id, (t, view)) in &ended {
            assert_eq!(view["state"], "done", "job {id}: {view}");
            segments += view["segments_total"].as_u64().unwrap_or(0);
            latencies_s.push(t - submitted[id].1);
        }
        self.check_frames(n);
        let side = Side {
            makespan_s,
            cpu_s: cpu.total(),
            latencies_s,
        };
        (side, cpu, segments, ops)
    }

    /// Polls the job list until every job of `submitted` has ended; per job, when it was
    /// first seen ended (s since `started`) and its view then.
    fn wait_all(
        &self,
        submitted: &HashMap<String, (usize, f64)>,
        started: Instant,
    ) -> HashMap<String, (f64, serde_json::Value)> {
        let mut ended = HashMap::new();
        while ended.len() < submitted.len() {
            assert!(
                started.elapsed() < ROUND_TIMEOUT,
                "{} of {} jobs ended after {ROUND_TIMEOUT:?}",
                ended.len(),
                submitted.len()
            );
            std::thread::sleep(POLL);
            let now = started.elapsed().as_secs_f64();
            // The round's jobs are the newest: listing every earlier round's too made the
            // dispatcher's CPU per segment grow round by round (17, 22, 28 ms).
            for job in self.farm.newest_jobs(submitted.len()) {
                let id = job["id"].as_str().unwrap_or_default().to_string();
                let done = matches!(job["state"].as_str(), Some("done" | "failed" | "cancelled"));
                if done && submitted.contains_key(&id) && !ended.contains_key(&id) {
                    ended.insert(id, (now, job));
                }
            }
        }
        ended
    }

    /// Downloads round `n`'s outputs and compares each one's decoded frames with its input's.
    fn check_frames(&self, n: usize) {
        let dir = tempfile::tempdir().expect("temp dir");
        for (i, u) in self.uploads.iter().enumerate() {
            let out = dir.path().join(format!("{i:02}.mp4"));
            self.farm
                .download("output", &format!("batch/r{n}/{i:02}.mp4"), &out);
            let got = frame_count(&out);
            assert_eq!(
                got,
                u.frames,
                "round {n}: output {i:02} of {} has {got} frames, its input {}",
                u.case.name(),
                u.frames
            );
            std::fs::remove_file(&out).ok();
        }
    }
}

/// Seconds since the epoch now.
fn epoch_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// This process's reaped children's CPU (clock ticks): what `xargs` and its ffmpegs spent,
/// once waited for.
fn children_ticks() -> u64 {
    let text = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    cpu::parse_stat(&text).expect("own stat").reaped
}

/// One ffmpeg round: every upload through `xargs -P 2 ffmpeg` ([`FFMPEG_SETTINGS`], MP4)
/// into `work`. Each finished file prints its end time, so latency is start to that.
/// Panics when an ffmpeg fails.
pub fn ffmpeg_round(uploads: &[Upload], work: &Path) -> Side {
    let list = work.join("files.txt");
    let names: Vec<String> = uploads
        .iter()
        .map(|u| u.path.to_string_lossy().into_owned())
        .collect();
    std::fs::write(&list, names.join("\n") + "\n").expect("write the file list");
    let script = format!(
        "ffmpeg -hide_banner -loglevel error -nostdin -y -i \"$1\" {FFMPEG_SETTINGS} \
         \"$0/$(basename \"$1\").mp4\" && echo \"done $(date +%s.%N)\""
    );
    let work_s = work.to_string_lossy().into_owned();
    let args = [
        "-d",
        "\\n",
        "-a",
        &list.to_string_lossy(),
        "-P",
        "2",
        "-n",
        "1",
        "sh",
        "-c",
        &script,
        &work_s,
    ];
    let ticks = cpu::clock_ticks();
    let cpu_before = children_ticks();
    let (start, started) = (epoch_s(), Instant::now());
    let run = run_command("xargs".as_ref(), args, ROUND_TIMEOUT);
    let makespan_s = started.elapsed().as_secs_f64();
    let cpu_s = (children_ticks() - cpu_before) as f64 / ticks;
    run.assert_success();
    let latencies_s: Vec<f64> = run
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("done ")?.trim().parse::<f64>().ok())
        .map(|t| t - start)
        .collect();
    assert_eq!(
        latencies_s.len(),
        uploads.len(),
        "ffmpeg outputs: {}",
        run.stdout
    );
    Side {
        makespan_s,
        cpu_s,
        latencies_s,
    }
}

/// CPU-seconds of one decode of each of ffmpeg's MP4 outputs in `work`, as the farm's QC gate
/// decodes (one thread a decoder, the loop filter skipped; two files at a time): what
/// checking them would cost.
pub fn ffmpeg_check_round(uploads: &[Upload], work: &Path) -> f64 {
    let list = work.join("outputs.txt");
    let names: Vec<String> = (uploads.iter())
        .filter_map(|u| u.path.file_name())
        .map(|n| work.join(format!("{}.mp4", n.to_string_lossy())))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    std::fs::write(&list, names.join("\n") + "\n").expect("write the output list");
    let script = "ffmpeg -hide_banner -loglevel error -nostdin -threads 1 -skip_loop_filter all -flags2 fast \
                  -i \"$0\" -f null -";
    let list_s = list.to_string_lossy().into_owned();
    let args = [
        "-d", "\\n", "-a", &list_s, "-P", "2", "-n", "1", "sh", "-c", script,
    ];
    let cpu_before = children_ticks();
    let run = run_command("xargs".as_ref(), args, ROUND_TIMEOUT);
    run.assert_success();
    (children_ticks() - cpu_before) as f64 / cpu::clock_ticks()
}

/// `uptime`'s load averages, for the record (the machine may be shared).
pub fn load_line() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let parts: Vec<&str> = load.split_whitespace().take(3).collect();
    format!("load average {}", parts.join(", "))
}

/// Round `n`: the farm and ffmpeg on the whole batch, the farm first in odd rounds.
pub fn run_round(farm: &mut BatchFarm, n: usize) -> Round {
    let work = tempfile::tempdir().expect("temp dir");
    let farm_first = n % 2 == 1;
    let (ffmpeg, (side, cpu, segments, ops)) = if farm_first {
        let f = farm.round(n);
        (ffmpeg_round(&farm.uploads, work.path()), f)
    } else {
        let x = ffmpeg_round(&farm.uploads, work.path());
        (x, farm.round(n))
    };
    let ffmpeg_check_cpu_s = ffmpeg_check_round(&farm.uploads, work.path());
    Round {
        farm_first,
        farm: side,
        cpu,
        ffmpeg,
        output_min: farm.uploads.iter().map(|u| u.duration_s).sum::<f64>() / 60.0,
        segments,
        ops,
        ffmpeg_check_cpu_s,
    }
}
