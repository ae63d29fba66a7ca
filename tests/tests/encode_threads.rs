//! Threads per segment encode in the one-process farm: each worker encodes with its share of
//! the cores, except that a job of fewer segments than workers (a short clip packaged as one
//! media segment) gets the idle workers' cores too, and a job's last round of segments (one
//! per worker) twice the share, so the one that ends last uses the cores of those that ended. Read back from what x264 wrote into each
//! stream (its options SEI: `threads=N`), so the test sees what the encoder really used.

use std::path::Path;

use tessera_tests::fixture::ffmpeg;
use tessera_tests::run_tessera;

/// The `threads=` of every x264 options SEI in the files under `dir` (or the file `dir`).
fn x264_threads(path: &Path) -> Vec<usize> {
    let mut files = vec![path.to_path_buf()];
    let mut found = Vec::new();
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let bytes = std::fs::read(&p).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for sei in text.split("x264 - core").skip(1) {
            let n = sei
                .split(" threads=")
                .nth(1)
                .and_then(|v| v.split(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{}: an x264 SEI without threads=", p.display()));
            found.push(n);
        }
    }
    found
}

/// The CPUs of this machine, or `None` (the test is skipped) with one CPU: no core to lend.
fn cpus() -> Option<usize> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("skipped: one CPU, no core to lend");
        return None;
    }
    Some(cpus)
}

/// A 640x360 25 fps H.264 clip of `seconds` with a keyframe every `gop` frames, in `dir`.
fn clip(dir: &Path, seconds: u32, gop: u32) -> std::path::PathBuf {
    let src = dir.join("clip.mp4");
    let lavfi = format!("testsrc2=size=640x360:rate=25:duration={seconds}");
    let gop = gop.to_string();
    let path = src.display().to_string();
    ffmpeg(&[
        "-f", "lavfi", "-i", &lavfi, "-c:v", "libx264", "-g", &gop, &path,
    ]);
    src
}

/// `tessera transcode SRC -o OUT --workers 2 --segment-seconds SEGMENT`, which must succeed;
/// the threads of each segment's encode, in segment order.
fn file_threads(src: &Path, out: &Path, segment: &str) -> Vec<usize> {
    let s = |p: &Path| p.display().to_string();
    let (src, out_s) = (s(src), s(out));
    let args = [
        "transcode",
        &src,
        "-o",
        &out_s,
        "--workers",
        "2",
        "--segment-seconds",
        segment,
    ];
    run_tessera(args).assert_success();
    x264_threads(out)
}

#[test]
fn a_lone_segment_gets_the_idle_workers_cores() {
    let Some(cpus) = cpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let src = clip(dir.path(), 4, 50);
    let s = |p: &Path| p.display().to_string();
    // A 4 s clip in 6 s package segments is one farm segment, alone on two workers.
    let pkg = dir.path().join("pkg");
    let args = ["transcode", &s(&src), "--hls", &s(&pkg), "--workers", "2"];
    run_tessera(args).assert_success();
    let lone = x264_threads(&pkg.join("v0"));
    // The same clip as a file is two segments, one per worker.
    let pair = file_threads(&src, &dir.path().join("out.mp4"), "2");
    assert_eq!(lone.len(), 1, "one segment's SEI in the package: {lone:?}");
    assert_eq!(pair.len(), 2, "two segments' SEIs in the file: {pair:?}");
    let share = (cpus / 2).max(1);
    // x264 writes the count it was given (up to its maximum of 128).
    assert!(pair.iter().all(|&t| t == share), "{pair:?}, {cpus} CPUs");
    assert!(lone[0] > share, "the lone segment: {lone:?}, {cpus} CPUs");
}

#[test]
fn the_last_round_of_segments_gets_twice_the_share() {
    let Some(cpus) = cpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let src = clip(dir.path(), 6, 25);
    // Six 1 s segments on two workers: three rounds of two. The stitch keeps the segments in
    // order, each with its own options SEI.
    let threads = file_threads(&src, &dir.path().join("out.mp4"), "1");
    assert_eq!(threads.len(), 6, "six segments' SEIs: {threads:?}");
    let share = (cpus / 2).max(1);
    let last = (2 * share).min(cpus);
    assert_eq!(
        threads,
        [share, share, share, share, last, last],
        "{cpus} CPUs"
    );
}
