//! The QC gate's cost: how long the stitch's decode of a whole output takes, next to plain
//! ffmpeg decoding the same file with the same shortcuts (no loop filter, fast flags) on all
//! cores, every frame and only the reference frames (`-skip_frame noref`).
//!
//! Why: the gate decodes every frame of every output before it is published (N14: damage in
//! frames nothing refers to must be seen too), and that decode is on each job's critical
//! path after its encodes. Printed, not asserted (a benchmark measures the machine too): the
//! medians of `QC_BENCH_RUNS` (default 5) runs on a generated `QC_BENCH_SECONDS` (default
//! 20) s 720p30 x264 output with B-frames (pyramid), and the ratios gate / ffmpeg.
//!
//!   cargo bench -p tessera-media --bench qc_gate

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use tessera_model::encode::Container;
use tessera_model::probe::Rational;
use tessera_model::stitch::{OutputExpectation, StitchRequest};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
        })
        .unwrap_or(default)
}

fn ffmpeg(args: &[&str]) -> f64 {
    let started = Instant::now();
    let ok = Command::new("ffmpeg")
        .args(["-v", "error", "-y"])
        .args(args)
        .status()
        .expect("run ffmpeg")
        .success();
    assert!(ok, "ffmpeg {args:?} failed");
    started.elapsed().as_secs_f64()
}

/// The first frame's pts (1/30 s ticks) of `path`, from ffprobe.
fn first_pts(path: &Path) -> i64 {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries"])
        .args([
            "frame=pts_time",
            "-read_intervals",
            "%+#1",
            "-of",
            "csv=p=0",
        ])
        .arg(path)
        .output()
        .expect("run ffprobe");
    let text = String::from_utf8_lossy(&out.stdout);
    let t: f64 = text
        .trim()
        .trim_end_matches(',')
        .parse()
        .expect("a first frame time");
    (t * 30.0).round() as i64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let runs = env("QC_BENCH_RUNS", 5).max(1) as usize;
    let seconds = env("QC_BENCH_SECONDS", 20).max(2);
    let dir = tempfile::tempdir().expect("temp dir");
    let segment = dir.path().join("seg.nut");
    let source = format!("testsrc2=size=1280x720:rate=30:duration={seconds}");
    ffmpeg(
        &[
            "-f", "lavfi", "-i", &source, "-c:v", "libx264", "-preset", "veryfast",
        ]
        .into_iter()
        .chain([
            "-bf",
            "3",
            "-x264-params",
            "keyint=60:min-keyint=60",
            "-f",
            "nut",
        ])
        .chain([segment.to_str().expect("utf-8 path")])
        .collect::<Vec<_>>(),
    );
    let frames = seconds * 30;
    let first = first_pts(&segment);
    let output: PathBuf = dir.path().join("out.mp4");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.to_string();
    let out = output.to_str().expect("utf-8 path");
    let (mut gate, mut all, mut refs) = (Vec::new(), Vec::new(), Vec::new());
    let mut decoded = 0;
    for _ in 0..runs {
        let done = tessera_media::stitch(&request(&segment, &output, frames, first))
            .unwrap_or_else(|e| panic!("stitch: {e}"));
        let check = done.check.expect("the gate ran");
        gate.push(check.seconds);
        decoded = check.decoded_frames;
        let fast = [
            "-threads",
            &threads,
            "-skip_loop_filter",
            "all",
            "-flags2",
            "fast",
        ];
        all.push(ffmpeg(
            &[&fast[..], &["-i", out, "-f", "null", "-"]].concat(),
        ));
        let nonref = ["-skip_frame", "noref"];
        refs.push(ffmpeg(
            &[&fast[..], &nonref, &["-i", out, "-f", "null", "-"]].concat(),
        ));
    }
    let (gate, all, refs) = (median(gate), median(all), median(refs));
    println!("QC gate on a {seconds} s 720p30 x264 output ({frames} frames, B-pyramid), {cores} cores, median of {runs}");
    println!("  gate                         {gate:8.3} s  ({decoded} of {frames} frames decoded)");
    println!("  ffmpeg, every frame          {all:8.3} s");
    println!("  ffmpeg, reference frames     {refs:8.3} s");
    println!("  gate / ffmpeg every frame    {:8.3}", gate / all);
    println!("  gate / ffmpeg references     {:8.3}", gate / refs);
}

fn request(segment: &Path, output: &Path, frames: u64, first: i64) -> StitchRequest {
    StitchRequest {
        segments: vec![segment.to_path_buf()],
        video_bias: 0,
        video_time_base: Rational { num: 1, den: 30 },
        audio: None,
        audio_tracks: Vec::new(),
        start_seconds: 0.0,
        display_matrix: None,
        frame_rate: Rational { num: 30, den: 1 },
        container: Container::Mp4,
        output: output.to_path_buf(),
        chapters: Vec::new(),
        title: None,
        subtitles: Vec::new(),
        expect: Some(OutputExpectation {
            label: "bench output".into(),
            frames,
            first_pts: first,
            last_pts: first + frames as i64 - 1,
            time_base: Rational { num: 1, den: 30 },
            tolerance_seconds: 0.04,
            audio_tracks: 0,
        }),
    }
}
