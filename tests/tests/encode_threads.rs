//! Threads per segment encode in the one-process farm: each worker encodes with its share of
//! the cores, except that a job of fewer segments than workers (a short clip packaged as one
//! media segment) gets the idle workers' cores too. Read back from what x264 wrote into each
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

#[test]
fn a_lone_segment_gets_the_idle_workers_cores() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("skipped: one CPU, no core to lend");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("clip.mp4");
    let s = |p: &Path| p.display().to_string();
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=640x360:rate=25:duration=4",
        "-c:v",
        "libx264",
        "-g",
        "50",
        &s(&src),
    ]);
    // A 4 s clip in 6 s package segments is one farm segment, alone on two workers.
    let pkg = dir.path().join("pkg");
    let args = ["transcode", &s(&src), "--hls", &s(&pkg), "--workers", "2"];
    run_tessera(args).assert_success();
    let lone = x264_threads(&pkg.join("v0"));
    // The same clip as a file is two segments, one per worker.
    let out = dir.path().join("out.mp4");
    let args = [
        "transcode",
        &s(&src),
        "-o",
        &s(&out),
        "--workers",
        "2",
        "--segment-seconds",
        "2",
    ];
    run_tessera(args).assert_success();
    let pair = x264_threads(&out);
    assert_eq!(lone.len(), 1, "one segment's SEI in the package: {lone:?}");
    assert_eq!(pair.len(), 2, "two segments' SEIs in the file: {pair:?}");
    let share = (cpus / 2).max(1);
    // x264 writes the count it was given (up to its maximum of 128).
    assert!(pair.iter().all(|&t| t == share), "{pair:?}, {cpus} CPUs");
    assert!(lone[0] > share, "the lone segment: {lone:?}, {cpus} CPUs");
}
