//! Text subtitle tracks are kept: SubRip and ASS tracks in Matroska, mov_text in MP4 and WebVTT
//! in WebM come out as mov_text in MP4, and as SubRip (ASS stays ASS) in Matroska, with their
//! languages, their text, and their timing relative to the video unchanged (within 1 ms).

use std::path::Path;
use std::process::Command;

use tessera_tests::fixture::ffmpeg;
use tessera_tests::probe::probe_stream_frames;
use tessera_tests::Job;

const SRT: &str = "1\n00:00:00,500 --> 00:00:01,500\nHello there\n\n\
                   2\n00:00:02,000 --> 00:00:03,200\nSecond <i>line</i>\n\n\
                   3\n00:00:03,400 --> 00:00:03,900\nLast, with a comma\n\n";

/// (codec, language) of every subtitle stream.
fn subtitle_streams(path: &Path) -> Vec<(String, String)> {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "s", "-of", "csv=p=0"])
        .args(["-show_entries", "stream=codec_name:stream_tags=language"])
        .arg(path)
        .output()
        .expect("ffprobe");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (c, lang) = l.split_once(',').unwrap_or((l, ""));
            (c.to_string(), lang.to_string())
        })
        .collect()
}

/// (start relative to the first video frame, end likewise, text) of the cues of subtitle
/// stream `n`, read back through FFmpeg's SubRip writer (`-copyts`: the file's own timeline,
/// as the video frames are read).
fn cues(path: &Path, n: usize) -> Vec<(f64, f64, String)> {
    let video_start = probe_stream_frames(path, "v:0")[0].ts;
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-copyts", "-i"])
        .arg(path)
        .args(["-map", &format!("0:s:{n}"), "-f", "srt", "-"])
        .output()
        .expect("ffmpeg");
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let secs = |t: &str| {
        let (hms, ms) = t.trim().split_once(',').unwrap();
        let p: Vec<f64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
        p[0] * 3600.0 + p[1] * 60.0 + p[2] + ms.parse::<f64>().unwrap() / 1000.0
    };
    text.split("\n\n")
        .filter(|b| b.contains("-->"))
        .map(|b| {
            let mut lines = b.lines().skip(1);
            let (s, e) = lines.next().unwrap().split_once("-->").unwrap();
            let body: Vec<&str> = lines.collect();
            (
                secs(s) - video_start,
                secs(e) - video_start,
                body.join("\n"),
            )
        })
        .collect()
}

fn assert_same_cues(got: &[(f64, f64, String)], want: &[(f64, f64, String)], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g.0 - w.0).abs() < 0.0015 && (g.1 - w.1).abs() < 0.0015,
            "{what}: {g:?} vs {w:?}"
        );
        // Italics may be written as <i> or {\i1}: compare the words.
        let words = |s: &str| {
            s.replace(['<', '>', '/', '{', '}', '\\'], " ")
                .split_whitespace()
                .filter(|w| !matches!(*w, "i" | "i0" | "i1"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(words(&g.2), words(&w.2), "{what}");
    }
}

#[test]
fn text_subtitles_are_kept_with_languages_and_timing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srt = dir.path().join("a.srt");
    std::fs::write(&srt, SRT).expect("write srt");
    let srt = srt.to_str().unwrap();
    // A 4 s clip with the SubRip file mapped `tracks` times, then `codecs` (encoders, tags).
    let make = |name: &str, tracks: usize, codecs: &str| {
        let out = dir.path().join(name);
        let mut args = vec![
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=320x240:rate=25:duration=4",
            "-f",
            "lavfi",
            "-i",
            "sine=duration=4",
            "-i",
            srt,
            "-map",
            "0",
            "-map",
            "1",
        ];
        for _ in 0..tracks {
            args.extend(["-map", "2"]);
        }
        args.extend(codecs.split_whitespace());
        args.push(out.to_str().unwrap());
        ffmpeg(&args);
        out
    };
    let x264 = "-c:v libx264 -preset veryfast -c:a aac";
    let mkv = make(
        "subs.mkv",
        2,
        &format!("{x264} -c:s:0 srt -c:s:1 ass -metadata:s:s:0 language=eng -metadata:s:s:1 language=fra"),
    );
    let mp4 = make(
        "subs.mp4",
        1,
        &format!("{x264} -c:s mov_text -metadata:s:s:0 language=deu"),
    );
    let webm = make(
        "subs.webm",
        1,
        "-c:v libvpx-vp9 -deadline realtime -cpu-used 8 -c:a libopus -c:s webvtt \
         -metadata:s:s:0 language=spa",
    );

    type Tracks<'a> = &'a [(&'a str, &'a str)];
    let cases: [(&Path, Tracks, Tracks); 3] = [
        (
            &mkv,
            &[("mov_text", "eng"), ("mov_text", "fra")],
            &[("subrip", "eng"), ("ass", "fra")],
        ),
        (&mp4, &[("mov_text", "deu")], &[("subrip", "deu")]),
        (&webm, &[("mov_text", "spa")], &[("subrip", "spa")]),
    ];
    for (src, in_mp4, in_mkv) in cases {
        let tracks = in_mp4.len();
        let want: Vec<_> = (0..tracks).map(|n| cues(src, n)).collect();
        assert_eq!(want[0].len(), 3, "fixture {}: {:?}", src.display(), want[0]);
        for (name, expected) in [("out.mp4", in_mp4), ("out.mkv", in_mkv)] {
            let job = Job::new(src, name);
            job.run_ok(1, &[]);
            let what = format!("{} -> {name}", src.display());
            let streams = subtitle_streams(&job.output);
            let expected: Vec<(String, String)> = expected
                .iter()
                .map(|(c, l)| (c.to_string(), l.to_string()))
                .collect();
            assert_eq!(streams, expected, "{what}");
            for (n, w) in want.iter().enumerate() {
                assert_same_cues(&cues(&job.output, n), w, &format!("{what}, track {n}"));
            }
        }
    }
}
