//! The chaos run's content oracle fails where the old frame-count check passed (issue 29,
//! re-review section 3): an output with two segments swapped, or with a foreign segment of
//! the same length, has its source's frame count but differing frames.
//! Needs only the ffmpeg CLI.

use std::path::Path;

use tessera_tests::chaos::frames::{differing_frames, frame_hashes};
use tessera_tests::fixture::ffmpeg;
use tessera_tests::playback::Summary;

/// A 2 s 25 fps x264 clip of `source` (a lavfi pattern), a keyframe every second.
fn clip(dir: &Path, name: &str, source: &str) -> String {
    let path = dir.join(name).to_string_lossy().into_owned();
    let input = format!("{source}=size=160x90:rate=25:duration=2");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        &input,
        "-c:v",
        "libx264",
        "-threads",
        "1",
        "-g",
        "25",
        "-keyint_min",
        "25",
        "-sc_threshold",
        "0",
        "-pix_fmt",
        "yuv420p",
        &path,
    ]);
    path
}

/// The two 1 s halves of `src` (cut at its keyframes, copied without re-encoding), as
/// `NAME-0.mp4` and `NAME-1.mp4`.
fn halves(src: &str, dir: &Path, name: &str) -> [String; 2] {
    let pattern = dir
        .join(format!("{name}-%d.mp4"))
        .to_string_lossy()
        .into_owned();
    ffmpeg(&[
        "-i",
        src,
        "-c",
        "copy",
        "-f",
        "segment",
        "-segment_time",
        "1",
        "-reset_timestamps",
        "1",
        &pattern,
    ]);
    [0, 1].map(|n| {
        dir.join(format!("{name}-{n}.mp4"))
            .to_string_lossy()
            .into_owned()
    })
}

/// `parts` joined in order by the concat demuxer (stream copy), as a stitch does.
fn joined(dir: &Path, parts: &[String], name: &str) -> std::path::PathBuf {
    let list = dir.join(format!("{name}.txt"));
    let text: String = parts.iter().map(|p| format!("file '{p}'\n")).collect();
    std::fs::write(&list, text).expect("concat list");
    let out = dir.join(name);
    let (list_s, out_s) = (list.to_string_lossy(), out.to_string_lossy());
    ffmpeg(&[
        "-f", "concat", "-safe", "0", "-i", &list_s, "-c", "copy", &out_s,
    ]);
    out
}

#[test]
fn swapped_and_foreign_segments_of_the_same_length_are_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let own = clip(d, "own.mp4", "testsrc");
    let other = clip(d, "other.mp4", "testsrc2");
    let [a, b] = halves(&own, d, "own");
    let [_, foreign] = halves(&other, d, "other");
    let reference = joined(d, &[a.clone(), b.clone()], "reference.mp4");
    let swapped = joined(d, &[b, a.clone()], "swapped.mp4");
    let mixed = joined(d, &[a, foreign], "mixed.mp4");

    let want = frame_hashes(&reference);
    assert_eq!(want.len(), 50, "the reference decodes to 50 frames");
    assert_eq!(differing_frames(&want, &frame_hashes(&reference)), 0);
    for (name, output) in [("swapped", &swapped), ("foreign", &mixed)] {
        // The old check (frame count) passes...
        let counts = (
            Summary::of(&reference).frame_count,
            Summary::of(output).frame_count,
        );
        assert_eq!(
            counts.0, counts.1,
            "{name}: same frame count as the reference"
        );
        // ...the frame hashes do not.
        let differing = differing_frames(&want, &frame_hashes(output));
        assert!(
            differing >= 25,
            "{name}: {differing} frames differ, want at least 25"
        );
    }
}
