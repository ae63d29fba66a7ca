//! VMAF as tessera measures it (issue 46) against libvmaf's own `vmaf` tool on the same
//! decoded frames: the source decoded to Y4M by ffmpeg, the output decoded and scaled back to
//! the source's size (bicubic) by ffmpeg, scored by `vmaf` with the same model. tessera's
//! figures must agree within 0.5 (mean, harmonic mean) whatever the output's size and
//! quality; a worse encode must score lower.
//!
//! Needs the `vmaf` tool that scripts/build-libvmaf.sh installs with the library
//! (`TESSERA_VMAF_TOOL` to use another).

use std::path::{Path, PathBuf};

use serde_json::Value;
use tessera_tests::fixture::ffmpeg;
use tessera_tests::run::{run_command, run_tessera};

const SIZE: (u32, u32) = (640, 360);
const FRAMES: u64 = 40;

fn vmaf_tool() -> PathBuf {
    let tool = std::env::var_os("TESSERA_VMAF_TOOL")
        .map_or_else(|| PathBuf::from("/usr/local/bin/vmaf"), PathBuf::from);
    assert!(
        tool.is_file(),
        "libvmaf's `vmaf` tool not found at {}: run scripts/build-libvmaf.sh \
         (scripts/setup-deps.sh does), or set TESSERA_VMAF_TOOL",
        tool.display()
    );
    tool
}

/// A lossless source with detail and motion: FFmpeg's test pattern with noise that moves.
fn source(dir: &Path) -> PathBuf {
    let src = dir.join("src.mkv");
    let (w, h) = SIZE;
    let lavfi = format!("testsrc2=size={w}x{h}:rate=25,noise=alls=12:allf=t");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        &lavfi,
        "-frames:v",
        &FRAMES.to_string(),
        "-c:v",
        "ffv1",
        "-pix_fmt",
        "yuv420p",
        src.to_str().unwrap(),
    ]);
    src
}

/// What libvmaf's own tool says of `output` against `src` (its whole JSON: pooled figures
/// and each frame's).
fn oracle(dir: &Path, src: &Path, output: &Path, model: &str) -> Value {
    let (w, h) = SIZE;
    let (reference, distorted) = (dir.join("ref.y4m"), dir.join("dist.y4m"));
    ffmpeg(&[
        "-i",
        src.to_str().unwrap(),
        "-pix_fmt",
        "yuv420p",
        "-f",
        "yuv4mpegpipe",
        reference.to_str().unwrap(),
    ]);
    let scale = format!("scale={w}:{h}:flags=bicubic");
    ffmpeg(&[
        "-i",
        output.to_str().unwrap(),
        "-vf",
        &scale,
        "-pix_fmt",
        "yuv420p",
        "-f",
        "yuv4mpegpipe",
        distorted.to_str().unwrap(),
    ]);
    let json = dir.join("vmaf.json");
    let run = run_command(
        &vmaf_tool(),
        [
            "-r",
            reference.to_str().unwrap(),
            "-d",
            distorted.to_str().unwrap(),
            "-m",
            &format!("version={model}"),
            "--json",
            "-o",
            json.to_str().unwrap(),
            "-q",
        ],
        std::time::Duration::from_secs(300),
    );
    run.assert_success();
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

/// `tessera quality SRC OUTPUT --json`'s VMAF report.
fn measured(src: &Path, output: &Path) -> Value {
    let run = run_tessera([
        "quality",
        src.to_str().unwrap(),
        output.to_str().unwrap(),
        "--json",
    ]);
    run.assert_success();
    let report: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("tessera quality --json: {e}: {}", run.stdout));
    assert_eq!(report["frames"], FRAMES, "{report}");
    report["vmaf"].clone()
}

#[test]
fn tessera_quality_vmaf_agrees_with_libvmafs_own_tool() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let mut means = Vec::new();
    // The output at the source's size and smaller (scaled back up to score), good and poor.
    for (label, height, crf) in [
        ("same size", 360, "30"),
        ("half size", 180, "26"),
        ("poor", 360, "44"),
    ] {
        let output = dir.path().join(format!("out-{height}-{crf}.mp4"));
        let scale = format!("scale=-2:{height}");
        ffmpeg(&[
            "-i",
            src.to_str().unwrap(),
            "-vf",
            &scale,
            "-c:v",
            "libx264",
            "-preset",
            "veryfast",
            "-crf",
            crf,
            output.to_str().unwrap(),
        ]);
        let ours = measured(&src, &output);
        assert_eq!(ours["model"], "vmaf_v0.6.1", "{label}: {ours}");
        assert_eq!(
            (ours["width"].as_u64(), ours["height"].as_u64()),
            (Some(640), Some(360))
        );
        let theirs = &oracle(dir.path(), &src, &output, "vmaf_v0.6.1")["pooled_metrics"]["vmaf"];
        let pooled = &ours["pooled"];
        eprintln!("{label}: tessera {pooled}\n{label}: libvmaf's tool {theirs}");
        for (figure, tolerance) in [("mean", 0.5), ("harmonic_mean", 0.5), ("min", 1.0)] {
            let (a, b) = (
                pooled[figure].as_f64().unwrap(),
                theirs[figure].as_f64().unwrap(),
            );
            assert!(
                (a - b).abs() <= tolerance,
                "{label}: VMAF {figure} {a:.3} from tessera, {b:.3} from libvmaf's tool"
            );
        }
        let (p1, p5, min) = (
            pooled["p1"].as_f64().unwrap(),
            pooled["p5"].as_f64().unwrap(),
            pooled["min"].as_f64().unwrap(),
        );
        assert!(min <= p1 && p1 <= p5, "{label}: {pooled}");
        means.push(pooled["mean"].as_f64().unwrap());
    }
    assert!(
        means[2] + 10.0 < means[0],
        "CRF 44 must score well below CRF 30: {means:?}"
    );
}

/// `--segments` pools VMAF over the frame ranges given, as the tool's per-frame scores say;
/// ranges that do not add up to the output's frames are refused naming the flag.
#[test]
fn quality_per_segment_pools_the_frames_of_each_range() {
    let dir = tempfile::tempdir().unwrap();
    let src = source(dir.path());
    let output = dir.path().join("out.mp4");
    ffmpeg(&[
        "-i",
        src.to_str().unwrap(),
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-crf",
        "34",
        output.to_str().unwrap(),
    ]);
    let ranges = [7u64, 25, FRAMES - 32];
    let list = ranges.map(|r| r.to_string()).join(",");
    let args = ["quality", src.to_str().unwrap(), output.to_str().unwrap()];
    let run = run_tessera(args.iter().copied().chain(["--segments", &list, "--json"]));
    run.assert_success();
    let ours: Value = serde_json::from_str(&run.stdout).unwrap();
    let theirs = oracle(dir.path(), &src, &output, "vmaf_v0.6.1");
    let frames: Vec<f64> = (theirs["frames"].as_array().unwrap().iter())
        .map(|f| f["metrics"]["vmaf"].as_f64().unwrap())
        .collect();
    assert_eq!(frames.len() as u64, FRAMES);
    let mut start = 0;
    for (i, &n) in ranges.iter().enumerate() {
        let seg = &ours["vmaf"]["segments"][i];
        let range = &frames[start..start + n as usize];
        let mean = range.iter().sum::<f64>() / n as f64;
        assert_eq!(seg["frames"], n, "segment {i}: {seg}");
        let got = seg["mean"].as_f64().unwrap();
        assert!(
            (got - mean).abs() < 0.01,
            "segment {i}: {got} against the tool's {mean}"
        );
        start += n as usize;
    }
    let text = run_tessera(args.iter().copied().chain(["--segments", &list]));
    text.assert_success();
    assert_eq!(
        text.stdout.matches("segment ").count(),
        3,
        "{}",
        text.stdout
    );
    let wrong = run_tessera(args.iter().copied().chain(["--segments", "7,25"]));
    assert!(
        !wrong.status.success(),
        "ranges short of the output accepted"
    );
    assert!(
        wrong.stderr.contains("--segments: 2 segments of 32 frames"),
        "{}",
        wrong.stderr
    );
}
