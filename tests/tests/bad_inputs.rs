//! Bad inputs must fail cleanly: non-zero exit, stderr naming the input and
//! a reason, no panic, and nothing (no output, no temp file) left in the
//! output directory.

use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempDir;
use tessera_tests::fixture::{random_file, truncated_copy};
use tessera_tests::{fixture, Fixture, Job};

/// A directory for the bad input, kept apart from the job's output dir.
fn input_dir() -> TempDir {
    tempfile::Builder::new()
        .prefix("tessera-bad-")
        .tempdir()
        .expect("temp dir")
}

fn expect_rejected(input: &Path) {
    let job = Job::new(input, "out.mp4");
    let run = job.run(1, &[]);
    job.assert_rejected(&run);
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).expect("write bad input");
    p
}

#[test]
fn zero_byte_file() {
    let dir = input_dir();
    expect_rejected(&write(dir.path(), "empty.mp4", b""));
}

#[test]
fn random_bytes() {
    let dir = input_dir();
    expect_rejected(&random_file(
        dir.path(),
        "random.mp4",
        256 * 1024,
        0x7e55_e4a1,
    ));
}

#[test]
fn text_file() {
    let dir = input_dir();
    let text =
        "This is not a video.\nJust a few lines of text,\nsaved with a video name.\n".repeat(50);
    expect_rejected(&write(dir.path(), "notes.mp4", text.as_bytes()));
}

#[test]
fn mp4_truncated_before_moov() {
    let src = fixture(Fixture::MoovAtEnd);
    let bytes = fs::read(&src).expect("read fixture");
    let moov = bytes
        .windows(4)
        .position(|w| w == b"moov")
        .expect("fixture has a moov box");
    let mdat = bytes
        .windows(4)
        .position(|w| w == b"mdat")
        .expect("fixture has an mdat box");
    assert!(
        mdat < moov,
        "fixture must have its moov at the end (no faststart)"
    );
    let half = bytes.len() as u64 / 2;
    assert!(half < moov as u64, "cutting at half must drop the moov");
    let dir = input_dir();
    expect_rejected(&truncated_copy(&src, dir.path(), "truncated.mp4", half));
}

#[test]
fn audio_only_m4a() {
    let src = fixture(Fixture::AudioOnlyM4a);
    assert!(
        tessera_tests::streams_of(&src, "video").is_empty(),
        "fixture should have no video"
    );
    // Copy it so the path in stderr is one only this test uses.
    let dir = input_dir();
    let input = dir.path().join("song.m4a");
    fs::copy(&src, &input).expect("copy fixture");
    expect_rejected(&input);
}

/// `--gpu require` on a machine without an NVIDIA driver (this one) fails up front with the
/// reason and leaves nothing behind; `--gpu auto` (the default) runs on the CPU.
#[test]
fn gpu_required_without_a_gpu_is_refused_and_auto_falls_back_to_cpu() {
    let src = fixture(Fixture::NoAudio);
    let job = Job::new(&src, "out.mp4");
    let run = job.run(1, &["--gpu", "require"]);
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("no NVIDIA GPU"), "{}", run.stderr);
    assert!(!job.output.exists(), "output written without a GPU");
    let run = job.run_ok(1, &["--gpu", "auto"]);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

/// A raw H.264 elementary stream has frames but no timestamps: refused as unsupported with
/// that reason and a way out, never as "no frames".
#[test]
fn raw_h264_elementary_stream() {
    let dir = input_dir();
    let input = dir.path().join("camera.h264");
    let out = input.to_string_lossy();
    tessera_tests::fixture::ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=320x240:rate=25:duration=2",
        "-c:v",
        "libx264",
        "-bf",
        "2",
        "-f",
        "h264",
        &out,
    ]);
    let job = Job::new(&input, "out.mp4");
    let run = job.run(1, &[]);
    job.assert_rejected(&run);
    assert!(
        run.stderr.contains("raw elementary stream") && run.stderr.contains("50 video packets"),
        "{}",
        run.stderr
    );
}
