//! Dispatcher capacity (issue 31, item 4): a load generator that submits many small jobs
//! through the real API at a steady rate to the real dispatcher, on the real broker and
//! store, and answers its tasks with fake workers (no media work, real wire events and
//! objects); it reports API latency, events and jobs handled a second, the dispatcher's
//! memory, CPU per thread and database size, and what gives out first.
//!
//! Why: every other benchmark measures one file at a time; nobody knew how many jobs a day
//! one dispatcher takes, or which of its parts saturates first. The dispatcher's own
//! per-job media work (probe, split, audio) is real here: it is part of its capacity.
//!
//! Layout: [`http`] (a keep-alive client), [`fake_workers`], [`sampler`] (`/proc`,
//! `/metrics`, queue depths), [`drive`] (the run), [`report`] (the arithmetic) and
//! [`summary`] (what is printed).

pub mod drive;
pub mod fake_workers;
pub mod http;
pub mod report;
pub mod sampler;
pub mod summary;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::farm::Farm;
use crate::run::run_ffmpeg_tool;

/// The knobs of a capacity run, from `BENCH_CAPACITY_*` variables.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacitySettings {
    /// Jobs to submit (`BENCH_CAPACITY_JOBS`, default 10,000).
    pub jobs: usize,
    /// Submissions a second (`BENCH_CAPACITY_RATE`, default 200).
    pub rate: f64,
    /// Kept-alive API connections (`BENCH_CAPACITY_CONNECTIONS`, default 32).
    pub connections: usize,
    /// The dispatcher's `--max-running-jobs` (`BENCH_CAPACITY_MAX_RUNNING`; unset: its
    /// default).
    pub max_running: Option<usize>,
    /// Segment and stitch consumers of the fake fleet (`BENCH_CAPACITY_ENCODERS`, default 4;
    /// `BENCH_CAPACITY_STITCHERS`, default 2), each holding up to 64 tasks.
    pub encoders: usize,
    /// See `encoders`.
    pub stitchers: usize,
    /// The run stops when no job ends for this long (`BENCH_CAPACITY_STALL_S`, default 120).
    pub stall: Duration,
    /// The dispatcher's log level (`BENCH_CAPACITY_LOG`, default `info`, its own default).
    pub log: String,
    /// Whether the run waits for every job to end (`BENCH_CAPACITY_WAIT`, default 1); 0
    /// measures the API alone and stops once the submissions are answered.
    pub wait: bool,
}

impl CapacitySettings {
    /// The settings from the environment, defaults where unset.
    pub fn from_env() -> CapacitySettings {
        fn var<T: std::str::FromStr>(name: &str) -> Option<T> {
            std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
        }
        CapacitySettings {
            jobs: var("BENCH_CAPACITY_JOBS").unwrap_or(10_000),
            rate: var("BENCH_CAPACITY_RATE").unwrap_or(200.0),
            connections: var("BENCH_CAPACITY_CONNECTIONS").unwrap_or(32).max(1),
            max_running: var("BENCH_CAPACITY_MAX_RUNNING"),
            encoders: var("BENCH_CAPACITY_ENCODERS").unwrap_or(4).max(1),
            stitchers: var("BENCH_CAPACITY_STITCHERS").unwrap_or(2).max(1),
            stall: Duration::from_secs(var("BENCH_CAPACITY_STALL_S").unwrap_or(120)),
            log: std::env::var("BENCH_CAPACITY_LOG").unwrap_or_else(|_| "info".into()),
            wait: var::<u8>("BENCH_CAPACITY_WAIT").unwrap_or(1) != 0,
        }
    }
}

/// The inputs: small real clips (H.264, a keyframe a second, so 1 s segments split them),
/// 2 to 4 s long, with and without audio, made once with the ffmpeg CLI and kept in
/// `bench/.cache/`. Returns `(file, object key)` pairs.
pub fn capacity_inputs() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let cache = root.join("bench/.cache");
    std::fs::create_dir_all(&cache).expect("create bench/.cache");
    // (name, seconds, size, rate, audio channels)
    let clips = [
        ("cap-2s-160x90-mono", 2, "160x90", 30, 1),
        ("cap-3s-160x90-silent", 3, "160x90", 25, 0),
        ("cap-4s-192x108-stereo", 4, "192x108", 30, 2),
    ];
    clips
        .iter()
        .map(|&(name, seconds, size, fps, channels)| {
            let path = cache.join(format!("{name}.mp4"));
            if std::fs::metadata(&path).map_or(true, |m| m.len() == 0) {
                make_clip(&path, seconds, size, fps, channels);
            }
            (path, format!("capacity/{name}.mp4"))
        })
        .collect()
}

fn make_clip(path: &Path, seconds: u32, size: &str, fps: u32, channels: u32) {
    let part = path.with_extension("part.mp4");
    let video = format!("testsrc2=size={size}:rate={fps}:duration={seconds}");
    let mut args: Vec<String> = ["-hide_banner", "-loglevel", "error", "-nostdin", "-y"]
        .map(String::from)
        .to_vec();
    args.extend(["-f", "lavfi", "-i", &video].map(String::from));
    if channels > 0 {
        let layout = if channels == 1 { "mono" } else { "stereo" };
        let audio = format!("sine=frequency=440:sample_rate=48000:duration={seconds}");
        args.extend(["-f", "lavfi", "-i", &audio, "-ac", &channels.to_string()].map(String::from));
        args.extend(["-channel_layout", layout, "-c:a", "aac", "-b:a", "64k"].map(String::from));
    }
    let gop = fps.to_string();
    args.extend(
        [
            "-c:v",
            "libx264",
            "-preset",
            "veryfast",
            "-g",
            &gop,
            "-keyint_min",
            &gop,
            "-pix_fmt",
            "yuv420p",
            "-shortest",
        ]
        .map(String::from),
    );
    args.push(part.to_string_lossy().into_owned());
    run_ffmpeg_tool("ffmpeg", &args);
    std::fs::rename(&part, path).expect("move the clip into place");
}

/// The capacity farm: Garage, a vhost and the dispatcher as an operator would run it for a
/// large batch (1 s segments, the tenant's quota above the batch so no submission is
/// refused for it, `max_running` jobs at once when set), and no workers: the load generator
/// brings its fake ones.
pub fn start_capacity_farm(settings: &CapacitySettings) -> Farm {
    let quota = (settings.jobs + 1).to_string();
    let mut args: Vec<String> = [
        "--buckets",
        "input,output",
        "--segment-seconds",
        "1",
        "--max-jobs-per-tenant",
        &quota,
    ]
    .map(String::from)
    .to_vec();
    if let Some(n) = settings.max_running {
        args.extend(["--max-running-jobs".to_string(), n.to_string()]);
    }
    Farm::start_with_args(
        "capacity",
        0,
        args,
        &[("TESSERA_LOG", settings.log.as_str())],
    )
}

/// A whole capacity run: inputs, farm, load, summary. Returns the run's record and the
/// summary's figures.
pub fn run(settings: &CapacitySettings) -> (drive::Outcome, summary::Figures) {
    let inputs = capacity_inputs();
    let farm = start_capacity_farm(settings);
    let uris: Vec<String> = inputs
        .iter()
        .map(|(path, key)| {
            farm.upload(path, "input", key);
            format!("s3://input/{key}")
        })
        .collect();
    println!(
        "==> capacity: {} jobs at {}/s over {} connections, inputs {:?}, dispatcher {}",
        settings.jobs,
        settings.rate,
        settings.connections,
        uris,
        crate::farm::bin("tessera-dispatcher").display()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let outcome = runtime.block_on(drive::drive(&farm, settings, &uris));
    let figures = summary::print(settings, &outcome, &farm);
    (outcome, figures)
}
