//! Chapters and the title are kept: a Matroska source with three titled chapters and a title
//! comes out of `tessera transcode` as MP4 and as Matroska with the same chapters (start, end,
//! title, within a millisecond) and the same title.

use std::path::Path;
use std::process::Command;

use tessera_tests::Job;

fn ffprobe_json(path: &Path, what: &str) -> serde_json::Value {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-of", "json", what])
        .arg(path)
        .output()
        .expect("ffprobe");
    serde_json::from_slice(&out.stdout).expect("ffprobe json")
}

/// (start s, end s, title) of every chapter.
fn chapters(path: &Path) -> Vec<(f64, f64, String)> {
    let v = ffprobe_json(path, "-show_chapters");
    v["chapters"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let t = |k: &str| {
                c[k].as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(f64::NAN)
            };
            (
                t("start_time"),
                t("end_time"),
                c["tags"]["title"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn title(path: &Path) -> Option<String> {
    let v = ffprobe_json(path, "-show_format");
    v["format"]["tags"]["title"].as_str().map(str::to_string)
}

#[test]
fn chapters_and_title_are_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = dir.path().join("meta.txt");
    std::fs::write(
        &meta,
        ";FFMETADATA1\ntitle=A film with chapters\n\
         [CHAPTER]\nTIMEBASE=1/1000\nSTART=0\nEND=1500\ntitle=Opening\n\
         [CHAPTER]\nTIMEBASE=1/1000\nSTART=1500\nEND=3000\ntitle=Middle\n\
         [CHAPTER]\nTIMEBASE=1/1000\nSTART=3000\nEND=4000\ntitle=Credits\n",
    )
    .expect("write metadata");
    let src = dir.path().join("chapters.mkv");
    let ok = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg("testsrc2=size=320x240:rate=25:duration=4")
        .args(["-f", "lavfi", "-i", "sine=duration=4", "-i"])
        .arg(&meta)
        .args([
            "-map",
            "0:v",
            "-map",
            "1:a",
            "-map_metadata",
            "2",
            "-map_chapters",
            "2",
        ])
        .args(["-c:v", "libx264", "-preset", "veryfast", "-c:a", "aac"])
        .arg(&src)
        .status()
        .expect("ffmpeg")
        .success();
    assert!(ok, "fixture");
    let want = chapters(&src);
    assert_eq!(want.len(), 3, "fixture chapters: {want:?}");
    for name in ["out.mp4", "out.mkv"] {
        let job = Job::new(&src, name);
        job.run_ok(1, &[]);
        let got = chapters(&job.output);
        assert_eq!(got.len(), want.len(), "{name}: {got:?}");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g.0 - w.0).abs() < 0.002 && (g.1 - w.1).abs() < 0.002,
                "{name}: {g:?} vs {w:?}"
            );
            assert_eq!(g.2, w.2, "{name}");
        }
        assert_eq!(
            title(&job.output).as_deref(),
            Some("A film with chapters"),
            "{name}"
        );
    }
}

/// Cover art (an attached picture) is not taken for the video, and what tessera leaves out is
/// named in the report's warnings and on stderr, never a failure.
#[test]
fn cover_art_is_left_out_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cover = dir.path().join("cover.png");
    let src = dir.path().join("cover.mp4");
    tessera_tests::fixture::ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=64x64:rate=1",
        "-frames:v",
        "1",
        cover.to_str().unwrap(),
    ]);
    tessera_tests::fixture::ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=320x240:rate=25:duration=2",
        "-f",
        "lavfi",
        "-i",
        "sine=duration=2",
        "-i",
        cover.to_str().unwrap(),
        "-map",
        "0",
        "-map",
        "1",
        "-map",
        "2",
        "-c:v:0",
        "libx264",
        "-preset",
        "veryfast",
        "-c:a",
        "aac",
        "-c:v:1",
        "copy",
        "-disposition:v:1",
        "attached_pic",
        src.to_str().unwrap(),
    ]);
    let job = Job::new(&src, "out.mp4");
    let run = job.run_ok(1, &[]);
    let report = job.report();
    assert_eq!(report.frames, 50, "the cover was taken for the video?");
    let warning = report
        .warnings
        .iter()
        .find(|w| w.contains("png") && w.contains("left out"))
        .unwrap_or_else(|| panic!("no warning about the cover: {:?}", report.warnings));
    assert!(run.stderr.contains(warning.as_str()), "{}", run.describe());
}
