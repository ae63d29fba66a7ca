//! The distributed benchmark (issue 3): the whole farm on this machine (the dispatcher, two
//! workers, RabbitMQ, a single-node Garage) against plain ffmpeg on the same input and
//! settings, alternated in one run. What it measures, per run and as medians:
//! - the wall-time ratio: submit to job done (output in S3) over ffmpeg's time, target
//!   <= 1.08 on 2 cores;
//! - the per-segment overhead the job reports (time a segment spends in a worker outside
//!   decode/encode: fetch, staging, upload, event, ack), target < 20 ms;
//! - the workers' median time per segment phase (their "segment phases" debug lines): fetch
//!   (free-space check and chunk download), child (in the media child but outside
//!   decode/encode), media (decode and encode), store (upload).
//!
//! The targets are reported (PASS/MISS), not asserted: a benchmark measures the machine too.
//! What is asserted: every job ends done, and its frame count equals the input's.
//!
//! Why here: `bench/distributed.sh` used to start the farm by hand and read the API's JSON
//! with python; the farm is the harness's [`Farm`] with the benchmark's settings, and the
//! arithmetic is here, unit-tested. The test is `tests/tests/bench_distributed.rs`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::farm::{Farm, TOKEN};
use crate::run::run_ffmpeg_tool;

pub mod batch;
pub mod capacity;

/// How long one job may take before the benchmark gives up on it.
const JOB_TIMEOUT: Duration = Duration::from_secs(3600);
/// How often the job is polled (the resolution of the farm's wall time).
const POLL: Duration = Duration::from_millis(100);
/// The ratio target (farm over ffmpeg).
pub const RATIO_TARGET: f64 = 1.08;
/// The per-segment overhead target (ms).
pub const OVERHEAD_TARGET_MS: f64 = 20.0;

/// The benchmark's size: `BENCH_RUNS` (default 3) runs of a `BENCH_SECONDS` (default 60)
/// input.
#[derive(Debug, Clone, Copy)]
pub struct BenchSettings {
    /// Farm/ffmpeg pairs to run.
    pub runs: usize,
    /// Length of the generated 1080p30 input (s).
    pub seconds: u32,
}

impl BenchSettings {
    /// From `BENCH_RUNS` and `BENCH_SECONDS`; panics on a value that is not a number.
    pub fn from_env() -> BenchSettings {
        let var = |name: &str, default: u64| match std::env::var(name) {
            Ok(v) => v
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}={v}: not a number")),
            Err(_) => default,
        };
        BenchSettings {
            runs: var("BENCH_RUNS", 3) as usize,
            seconds: var("BENCH_SECONDS", 60) as u32,
        }
    }
}

/// The input: 1080p30 test pattern (H.264 veryfast) with a 440 Hz tone (AAC 128k), `seconds`
/// long, made once and kept in `bench/.cache/` of the workspace.
pub fn bench_input(seconds: u32) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let cache = root.join("bench/.cache");
    std::fs::create_dir_all(&cache).expect("create bench/.cache");
    let path = cache.join(format!("input-1080p30-{seconds}s.mp4"));
    let nonempty = std::fs::metadata(&path).is_ok_and(|m| m.len() > 0);
    if !nonempty {
        println!("==> input: generating {}", path.display());
        let part = path.with_extension("part.mp4");
        let d = seconds.to_string();
        let video = format!("testsrc2=size=1920x1080:rate=30:duration={d}");
        let audio = format!("sine=frequency=440:sample_rate=48000:duration={d}");
        let flags = format!(
            "-hide_banner -loglevel error -nostdin -y -f lavfi -i {video} -f lavfi -i {audio} \
             -c:v libx264 -preset veryfast -pix_fmt yuv420p -c:a aac -b:a 128k -shortest"
        );
        let mut args: Vec<&std::ffi::OsStr> =
            flags.split_whitespace().map(std::ffi::OsStr::new).collect();
        args.push(part.as_os_str());
        run_ffmpeg_tool("ffmpeg", args);
        std::fs::rename(&part, &path).expect("move the input into place");
    }
    path
}

/// The benchmark's farm: the dispatcher as a user would run it (default segment length,
/// parallelism 2, `warn` logs), two workers of one slot and one thread each, logging their
/// segment phases.
pub fn start_bench_farm() -> Farm {
    start_bench_farm_with_metrics().0
}

/// [`start_bench_farm`], and the `/metrics` URLs of its workers (`--metrics-listen` on free
/// ports), which carry what their media children spent by operation.
pub fn start_bench_farm_with_metrics() -> (Farm, Vec<String>) {
    let args = ["--buckets", "input,output", "--parallelism", "2"].map(String::from);
    let mut farm = Farm::start_with_args("bench", 0, args.to_vec(), &[("TESSERA_LOG", "warn")]);
    let log = [("TESSERA_LOG", "warn,tessera_worker::segment=debug")];
    let mut urls = Vec::new();
    for i in 0..2 {
        let listen = format!("127.0.0.1:{}", crate::imds::free_port());
        farm.add_worker_via(i, &[], &log, &["--metrics-listen", &listen]);
        urls.push(format!("http://{listen}/metrics"));
    }
    (farm, urls)
}

/// One farm run and one ffmpeg run of the same input.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchRun {
    /// Submit to job done (s).
    pub farm_s: f64,
    /// ffmpeg's wall time (s).
    pub ffmpeg_s: f64,
    /// The job's median per-segment overhead (s).
    pub overhead_s: f64,
    /// The frames the job reports (none when its view has no count).
    pub frames: Option<u64>,
    /// The input's decoded frames.
    pub want: u64,
}

impl BenchRun {
    /// Farm time over ffmpeg time.
    pub fn ratio(&self) -> f64 {
        self.farm_s / self.ffmpeg_s
    }

    /// Whether the job's frame count is the input's.
    pub fn exact(&self) -> bool {
        self.frames == Some(self.want)
    }

    /// `run N<TAB>farm s<TAB>ffmpeg s<TAB>ratio<TAB>overhead ms<TAB>frames<TAB>input frames`.
    pub fn line(&self, n: usize) -> String {
        let frames = self.frames.map_or("None".to_string(), |f| f.to_string());
        format!(
            "run {n}\t{:.2}\t{:.2}\t{:.3}\t{:.1}\t{frames}\t{}",
            self.farm_s,
            self.ffmpeg_s,
            self.ratio(),
            self.overhead_s * 1000.0,
            self.want
        )
    }
}

/// The median (the mean of the middle two for an even count); NaN for none.
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The medians of a benchmark's runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenchSummary {
    /// Median farm/ffmpeg ratio.
    pub ratio: f64,
    /// Median per-segment overhead (ms).
    pub overhead_ms: f64,
    /// Whether every run's frame count was the input's.
    pub exact: bool,
}

impl BenchSummary {
    /// Summarises `runs`.
    pub fn of(runs: &[BenchRun]) -> BenchSummary {
        BenchSummary {
            ratio: median(runs.iter().map(BenchRun::ratio)),
            overhead_ms: median(runs.iter().map(|r| r.overhead_s * 1000.0)),
            exact: runs.iter().all(BenchRun::exact),
        }
    }

    /// The three result lines, each against its target.
    pub fn lines(&self) -> [String; 3] {
        let mark = |ok: bool, miss: &'static str| if ok { "PASS" } else { miss };
        [
            format!(
                "median ratio (farm submit->done / ffmpeg)  {:.3}   target <= {RATIO_TARGET}  {}",
                self.ratio,
                mark(self.ratio <= RATIO_TARGET, "MISS")
            ),
            format!(
                "median per-segment overhead               {:.1} ms target < {OVERHEAD_TARGET_MS:.0} ms  {}",
                self.overhead_ms,
                mark(self.overhead_ms < OVERHEAD_TARGET_MS, "MISS")
            ),
            format!(
                "frame counts equal the input's            {}",
                mark(self.exact, "FAIL")
            ),
        ]
    }
}

/// The `NAME_ms=N` values of the workers' "segment phases" lines, per phase in the order
/// the phases first appear.
pub fn segment_phases<'a>(logs: impl IntoIterator<Item = &'a str>) -> Vec<(String, Vec<u64>)> {
    let mut phases: Vec<(String, Vec<u64>)> = Vec::new();
    let lines = logs.into_iter().flat_map(str::lines);
    for line in lines.filter(|l| l.contains("segment phases")) {
        for (name, ms) in ms_fields(line) {
            match phases.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => v.push(ms),
                None => phases.push((name, vec![ms])),
            }
        }
    }
    phases
}

/// Each `WORD_ms=DIGITS` of `line`: the word (letters, digits, `_`) and the number.
fn ms_fields(line: &str) -> Vec<(String, u64)> {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut taken = 0;
    for (at, _) in line.match_indices("_ms=") {
        let digits: String = line[at + 4..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let start = line[taken..at]
            .char_indices()
            .rev()
            .take_while(|(_, c)| word(*c))
            .last()
            .map(|(i, _)| taken + i);
        if let (Some(start), Ok(ms)) = (start, digits.parse()) {
            out.push((line[start..at].to_string(), ms));
            taken = at + 4 + digits.len();
        }
    }
    out
}

/// `median ms per segment phase (N segments)  fetch 12  child 3 ...`, or none without phases.
pub fn phases_line(phases: &[(String, Vec<u64>)]) -> Option<String> {
    let n = phases.first()?.1.len();
    let parts: Vec<String> = phases
        .iter()
        .map(|(name, v)| {
            let m = median(v.iter().map(|&ms| ms as f64));
            format!("{name} {m:.0}")
        })
        .collect();
    Some(format!(
        "median ms per segment phase ({n} segments)  {}",
        parts.join("  ")
    ))
}

/// Run `n`: a job of `s3://input/bench/input.mp4` to `s3://output/bench/out-N.mp4` (H.264
/// veryfast CRF 23), timed from submit to done, then ffmpeg with the same settings to a file
/// in `work`. Panics when the job does not end done.
pub fn bench_run(farm: &Farm, n: usize, input: &Path, want: u64, work: &Path) -> BenchRun {
    let started = Instant::now();
    let id = farm.submit(
        "s3://input/bench/input.mp4",
        &format!("s3://output/bench/out-{n}.mp4"),
        json!({"codec": "h264", "preset": "veryfast", "crf": 23}),
        json!({}),
    );
    let view = loop {
        let (code, view) = farm.http("GET", &format!("/v1/jobs/{id}"), Some(TOKEN), None);
        assert_eq!(code, 200, "GET job {id}: {view}");
        if matches!(
            view["state"].as_str(),
            Some("done" | "failed" | "cancelled")
        ) {
            break view;
        }
        assert!(
            started.elapsed() < JOB_TIMEOUT,
            "job {id} still runs: {view}"
        );
        std::thread::sleep(POLL);
    };
    let farm_s = started.elapsed().as_secs_f64();
    assert_eq!(view["state"], "done", "job {id}: {view}");
    let overhead_s = view["median_segment_overhead_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("job {id}: no median_segment_overhead_s: {view}"));
    let out = work.join(format!("ffmpeg-{n}.mp4"));
    let started = Instant::now();
    let mut args: Vec<&std::ffi::OsStr> = ["-hide_banner", "-loglevel", "error", "-nostdin", "-y"]
        .iter()
        .map(std::ffi::OsStr::new)
        .collect();
    args.extend([std::ffi::OsStr::new("-i"), input.as_os_str()]);
    let settings = [
        "-c:v", "libx264", "-preset", "veryfast", "-crf", "23", "-c:a", "aac",
    ];
    args.extend(settings.iter().map(std::ffi::OsStr::new));
    args.push(out.as_os_str());
    run_ffmpeg_tool("ffmpeg", args);
    BenchRun {
        farm_s,
        ffmpeg_s: started.elapsed().as_secs_f64(),
        overhead_s,
        frames: view["frames"].as_u64(),
        want,
    }
}

#[cfg(test)]
mod tests;
