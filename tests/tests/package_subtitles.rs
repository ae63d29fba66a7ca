//! Subtitles in a package: the source's text tracks (SubRip in Matroska, two languages)
//! become WebVTT renditions: EXT-X-MEDIA TYPE=SUBTITLES groups with segments cut at the
//! video's boundaries (each with an X-TIMESTAMP-MAP), and a text/vtt AdaptationSet in the
//! MPD. Every cue must land at the media time of the frame it was timed to in the source.

use std::path::Path;

use tessera_package::validate::{validate_hls, validate_mpd};
use tessera_tests::fixture::ffmpeg;
use tessera_tests::probe::probe_stream_frames;
use tessera_tests::{fixture, run_tessera, Fixture};

/// (start, end, text) of the source's English cues; the French ones differ in their text.
const CUES: [(f64, f64, &str); 3] = [
    (0.5, 1.5, "First <i>line</i>"),
    (3.0, 5.0, "Across &amp; the\nboundary"),
    (11.0, 12.5, "Last"),
];

fn srt(cues: &[(f64, f64, &str)], french: bool) -> String {
    let t = |s: f64| {
        let ms = (s * 1000.0).round() as u64;
        format!("00:00:{:02},{:03}", ms / 1000, ms % 1000)
    };
    cues.iter()
        .enumerate()
        .map(|(i, (a, b, text))| {
            let text = text.replace("&amp;", "&");
            let text = if french {
                text.replace("First", "Premier")
            } else {
                text
            };
            format!("{}\n{} --> {}\n{text}\n\n", i + 1, t(*a), t(*b))
        })
        .collect()
}

/// (start, end, text) of every cue of WebVTT `text`, plus its X-TIMESTAMP-MAP offset
/// (seconds; 0 without one).
fn vtt_cues(text: &str) -> (f64, Vec<(f64, f64, String)>) {
    let secs = |t: &str| {
        let p: Vec<f64> = t.split(':').map(|x| x.parse().unwrap()).collect();
        p[0] * 3600.0 + p[1] * 60.0 + p[2]
    };
    let map = text
        .lines()
        .find_map(|l| l.strip_prefix("X-TIMESTAMP-MAP=MPEGTS:"))
        .map_or(0.0, |v| {
            let (ts, local) = v.split_once(",LOCAL:").unwrap();
            ts.parse::<f64>().unwrap() / 90_000.0 - secs(local)
        });
    let mut cues = Vec::new();
    for block in text.split("\n\n") {
        let mut lines = block.lines();
        let Some((a, b)) = lines.clone().find_map(|l| l.split_once(" --> ")) else {
            continue;
        };
        let body: Vec<&str> = lines
            .by_ref()
            .skip_while(|l| !l.contains(" --> "))
            .skip(1)
            .collect();
        cues.push((secs(a), secs(b), body.join("\n")));
    }
    (map, cues)
}

fn extinf(playlist: &Path) -> Vec<String> {
    std::fs::read_to_string(playlist)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("#EXTINF:"))
        .map(str::to_string)
        .collect()
}

fn check_package(flag: &str, extra: &[&str], dash: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (en, fr) = (dir.path().join("en.srt"), dir.path().join("fr.srt"));
    std::fs::write(&en, srt(&CUES, false)).unwrap();
    std::fs::write(&fr, srt(&CUES, true)).unwrap();
    let src = dir.path().join("subs.mkv");
    let streaming = fixture(Fixture::StreamingSource);
    let s = |p: &Path| p.display().to_string();
    ffmpeg(&[
        "-i",
        &s(&streaming),
        "-i",
        &s(&en),
        "-i",
        &s(&fr),
        "-map",
        "0",
        "-map",
        "1",
        "-map",
        "2",
        "-c",
        "copy",
        "-c:s",
        "subrip",
        "-metadata:s:s:0",
        "language=eng",
        "-metadata:s:s:1",
        "language=fra",
        &s(&src),
    ]);
    let root = dir.path().join("pkg");
    let spec = dir.path().join("spec.json");
    std::fs::write(
        &spec,
        r#"{"segment_seconds": 2, "ladder": [{"height": 360, "crf": 24}], "subtitles": "webvtt"}"#,
    )
    .unwrap();
    let mut args = vec![
        "transcode".to_string(),
        s(&src),
        flag.into(),
        s(&root),
        "--package-spec".into(),
        s(&spec),
        "--segment-seconds".into(),
        "4".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    run_tessera(&args).assert_success();
    let read = |rel: &str| std::fs::read(root.join(rel)).ok();
    let problems = validate_hls("master.m3u8", &read, None);
    assert!(problems.is_empty(), "HLS validator: {problems:#?}");
    let master = std::fs::read_to_string(root.join("master.m3u8")).unwrap();
    for part in [
        "TYPE=SUBTITLES,GROUP-ID=\"subs\",NAME=\"eng\",LANGUAGE=\"eng\"",
        "TYPE=SUBTITLES,GROUP-ID=\"subs\",NAME=\"fra\",LANGUAGE=\"fra\"",
        "SUBTITLES=\"subs\"",
    ] {
        assert!(master.contains(part), "master lacks {part}:\n{master}");
    }

    // Where the first frame is in the source and in the package (FFmpeg through the master).
    let v0_source = probe_stream_frames(&src, "v:0")[0].ts;
    let v0_media = probe_stream_frames(&root.join("master.m3u8"), "v:0")[0].ts;
    // The cues where the source file has them (its muxer may have moved every stream).
    let source_cues: Vec<(f64, f64)> = {
        let v = tessera_tests::probe::ffprobe_json(
            &src,
            &[
                "-select_streams",
                "s:0",
                "-show_entries",
                "packet=pts_time,duration_time",
            ],
        );
        let num = |x: &serde_json::Value| tessera_tests::probe::num(x).unwrap();
        v["packets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    num(&p["pts_time"]),
                    num(&p["pts_time"]) + num(&p["duration_time"]),
                )
            })
            .collect()
    };
    assert_eq!(source_cues.len(), CUES.len(), "{source_cues:?}");
    let expected = |french: bool| -> Vec<(f64, f64, String)> {
        CUES.iter()
            .zip(&source_cues)
            .map(|((_, _, t), (a, b))| {
                let t = if french {
                    t.replace("First", "Premier")
                } else {
                    t.to_string()
                };
                (a - v0_source + v0_media, b - v0_source + v0_media, t)
            })
            .collect()
    };
    let close = |got: &[(f64, f64, String)], want: &[(f64, f64, String)], what: &str| {
        assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g.0 - w.0).abs() < 0.0015 && (g.1 - w.1).abs() < 0.0015 && g.2 == w.2,
                "{what}: cue {g:?}, expected {w:?}"
            );
        }
    };
    for (k, french) in [(0, false), (1, true)] {
        // HLS: one file per video segment, cues on the media timeline through the map.
        let playlist = root.join(format!("s{k}/playlist.m3u8"));
        assert_eq!(
            extinf(&playlist),
            extinf(&root.join("v0/playlist.m3u8")),
            "s{k}"
        );
        let mut cues: Vec<(f64, f64, String)> = Vec::new();
        let mut files = 0;
        for name in std::fs::read_to_string(&playlist).unwrap().lines() {
            if name.starts_with('#') || name.is_empty() {
                continue;
            }
            files += 1;
            let text = std::fs::read_to_string(root.join(format!("s{k}")).join(name)).unwrap();
            assert!(
                text.starts_with("WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:"),
                "{name}: {text}"
            );
            let (map, found) = vtt_cues(&text);
            for (a, b, t) in found {
                let cue = (a + map, b + map, t);
                if !cues
                    .iter()
                    .any(|c| c.2 == cue.2 && (c.0 - cue.0).abs() < 1e-6)
                {
                    cues.push(cue);
                }
            }
        }
        assert_eq!(files, 7, "s{k}: a file per 2 s segment of 13 s");
        close(&cues, &expected(french), &format!("HLS s{k}"));
        if dash {
            let whole = std::fs::read_to_string(root.join(format!("s{k}/subtitles.vtt"))).unwrap();
            let (map, found) = vtt_cues(&whole);
            assert_eq!(map, 0.0, "the DASH file has no map");
            close(&found, &expected(french), &format!("DASH s{k}"));
        }
    }
    if dash {
        let problems = validate_mpd("manifest.mpd", &read);
        assert!(problems.is_empty(), "MPD validator: {problems:#?}");
        let mpd = std::fs::read_to_string(root.join("manifest.mpd")).unwrap();
        for part in [
            "mimeType=\"text/vtt\" lang=\"eng\"",
            "<BaseURL>s1/subtitles.vtt</BaseURL>",
        ] {
            assert!(mpd.contains(part), "MPD lacks {part}:\n{mpd}");
        }
    }
}

#[test]
fn cmaf_subtitles_are_webvtt_renditions_at_their_frames() {
    check_package("--cmaf", &[], true);
}

#[test]
fn ts_subtitles_map_to_the_transport_stream_clock() {
    check_package("--hls", &["--ts"], false);
}
