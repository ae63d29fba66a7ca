//! The A/V sync oracle (`tessera_tests::sync`) can fail: a clip with the matrix's flash and
//! beep markers passes against itself, and a copy with its audio 80 ms late does not.
//! Why: an oracle that never fails proves nothing; this needs no `tessera` binary.

use std::path::Path;

use tessera_tests::playback::{compare_media, Summary};
use tessera_tests::run::run_ffmpeg_tool;
use tessera_tests::sync::{beep_source, check_sync, flash_filter, markers, pairs};

/// Runs ffmpeg quietly with the whitespace-separated `args`, then `out`.
fn ffmpeg(args: &str, out: &Path) {
    let mut all: Vec<String> = "-hide_banner -nostdin -v error -y"
        .split_whitespace()
        .chain(args.split_whitespace())
        .map(String::from)
        .collect();
    all.push(out.to_string_lossy().into_owned());
    run_ffmpeg_tool("ffmpeg", &all);
}

#[test]
fn sync_oracle_catches_a_shifted_track() {
    let dir = tempfile::tempdir().expect("temp dir");
    let clip = dir.path().join("clip.mp4");
    ffmpeg(
        &format!(
            "-f lavfi -i testsrc2=size=160x120:rate=25:duration=4,{} {} \
             -c:v libx264 -preset veryfast -pix_fmt yuv420p -c:a aac -b:a 96k",
            flash_filter("25"),
            beep_source("stereo", 48_000, 4)
        ),
        &clip,
    );
    let late = dir.path().join("late.mp4");
    let clip_arg = clip.to_string_lossy();
    ffmpeg(
        &format!("-i {clip_arg} -itsoffset 0.08 -i {clip_arg} -map 0:v -map 1:a -c copy"),
        &late,
    );
    let (s, bad) = (Summary::of(&clip), Summary::of(&late));
    let m = markers(&s);
    assert_eq!(m.flashes.len(), 4, "one flash a second: {m:?}");
    let found = pairs(&m, 0);
    assert_eq!(found.len(), 4, "a beep at every flash: {m:?}");
    assert!(found.iter().all(|(_, d)| d.abs() < 0.01), "{found:?}");

    let tol = s.min_frame_interval() + 1e-3;
    let mut p = Vec::new();
    check_sync(&s, &s, tol, &mut p);
    assert!(p.is_empty(), "the clip against itself: {p:?}");
    check_sync(&s, &bad, tol, &mut p);
    assert_eq!(p.len(), 1, "audio 80 ms late: {p:?}");
    // Every pair is off by about 80 ms (the first by less: the stream copy no longer trims
    // the AAC priming, and the priming's pre-echo of the first beep is loud).
    assert!(p[0].contains("A/V sync off at 4 of 4"), "{p:?}");
    let worst: f64 = p[0]
        .split("largest difference ")
        .nth(1)
        .and_then(|r| r.trim_end_matches(" s").parse().ok())
        .unwrap_or_else(|| panic!("no largest difference in {p:?}"));
    assert!((0.05..0.1).contains(&worst), "{p:?}");
    // The whole oracle says so too, beside the A/V offset at the start.
    let mut all = Vec::new();
    compare_media(&s, &bad, &mut all);
    assert!(all.iter().any(|l| l.contains("A/V sync off")), "{all:?}");
}
