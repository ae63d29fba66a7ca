//! Subtitles in a package: the source's text tracks (SubRip in Matroska, two languages)
//! become WebVTT renditions: EXT-X-MEDIA TYPE=SUBTITLES groups with segments cut at the
//! video's boundaries (each with an X-TIMESTAMP-MAP), and a text/vtt AdaptationSet in the
//! MPD. Every cue must land at the media time of the frame it was timed to in the source.
//! They do so by default, as a file output keeps its text tracks; turned off, each track
//! left out is named in a warning. The variants state the source's nominal frame rate.

use std::path::{Path, PathBuf};

use tessera_package::validate::{validate_hls, validate_mpd};
use tessera_tests::fixture::ffmpeg;
use tessera_tests::probe::{ffprobe_json, num, probe_stream_frames};
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

/// (start, end) of every cue of `src`'s first subtitle track where the file has it (its
/// muxer may have moved every stream).
fn source_cue_times(src: &Path) -> Vec<(f64, f64)> {
    let v = ffprobe_json(
        src,
        &[
            "-select_streams",
            "s:0",
            "-show_entries",
            "packet=pts_time,duration_time",
        ],
    );
    let num = |x: &serde_json::Value| num(x).unwrap();
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
}

/// The HLS rendition `s{k}` of the package at `root`: its file count and its cues on the
/// media timeline (through each file's map), a cue repeated across files counted once. Its
/// segments must be the video's (same EXTINF), each file starting with its map.
fn hls_cues(root: &Path, k: usize) -> (usize, Vec<(f64, f64, String)>) {
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
    (files, cues)
}

/// The cues of the DASH file of rendition `s{k}` (on the period's timeline, no map).
fn dash_cues(root: &Path, k: usize) -> Vec<(f64, f64, String)> {
    let whole = std::fs::read_to_string(root.join(format!("s{k}/subtitles.vtt"))).unwrap();
    let (map, found) = vtt_cues(&whole);
    assert_eq!(map, 0.0, "the DASH file has no map");
    found
}

/// The master playlist of the package at `root`, which the validator must find clean.
fn valid_master(root: &Path) -> String {
    let read = |rel: &str| std::fs::read(root.join(rel)).ok();
    let problems = validate_hls("master.m3u8", &read, None);
    assert!(problems.is_empty(), "HLS validator: {problems:#?}");
    std::fs::read_to_string(root.join("master.m3u8")).unwrap()
}

/// The MPD of the package at `root`, which the validator must find clean.
fn valid_mpd(root: &Path) -> String {
    let read = |rel: &str| std::fs::read(root.join(rel)).ok();
    let problems = validate_mpd("manifest.mpd", &read);
    assert!(problems.is_empty(), "MPD validator: {problems:#?}");
    std::fs::read_to_string(root.join("manifest.mpd")).unwrap()
}

/// Each cue of `got` at the time of `want`'s (within 1.5 ms) with the same text.
fn assert_cues_close(got: &[(f64, f64, String)], want: &[(f64, f64, String)], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g.0 - w.0).abs() < 0.0015 && (g.1 - w.1).abs() < 0.0015 && g.2 == w.2,
            "{what}: cue {g:?}, expected {w:?}"
        );
    }
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
    let master = valid_master(&root);
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
    let source_cues = source_cue_times(&src);
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
    for (k, french) in [(0, false), (1, true)] {
        let (files, cues) = hls_cues(&root, k);
        assert_eq!(files, 7, "s{k}: a file per 2 s segment of 13 s");
        assert_cues_close(&cues, &expected(french), &format!("HLS s{k}"));
        if dash {
            let cues = dash_cues(&root, k);
            assert_cues_close(&cues, &expected(french), &format!("DASH s{k}"));
        }
    }
    if dash {
        let mpd = valid_mpd(&root);
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

/// The issue's source: 6 s of 30/1 video, a tone and an English SubRip track in Matroska.
fn english_srt_source(dir: &Path) -> PathBuf {
    let srt_file = dir.join("en.srt");
    std::fs::write(&srt_file, srt(&SHORT_CUES, false)).unwrap();
    let src = dir.join("in.mkv");
    // The issue's command line.
    let words = |w: &str| w.split_whitespace().map(String::from).collect::<Vec<_>>();
    let mut args = words("-f lavfi -i testsrc2=s=640x360:r=30:d=6 -f lavfi -i sine=d=6 -i");
    args.push(srt_file.display().to_string());
    args.extend(words(
        "-map 0 -map 1 -map 2 -c:v libx264 -preset veryfast -c:a aac -c:s srt \
         -metadata:s:s:0 language=eng",
    ));
    args.push(src.display().to_string());
    ffmpeg(&args.iter().map(String::as_str).collect::<Vec<_>>());
    src
}

/// The cues of [`english_srt_source`]: the second spans the 2 s boundary.
const SHORT_CUES: [(f64, f64, &str); 3] = [
    (0.5, 1.5, "Hello there"),
    (1.8, 2.6, "Across the boundary"),
    (4.0, 5.5, "Last words"),
];

/// Runs `tessera transcode src FLAG root --package-seconds 2` with `extra`; returns the
/// report's warnings and the run's stderr.
fn package_with(src: &Path, flag: &str, root: &Path, extra: &[&str]) -> (Vec<String>, String) {
    let report = root.with_extension("report.json");
    let mut args: Vec<String> = [
        "transcode",
        &src.display().to_string(),
        flag,
        &root.display().to_string(),
        "--package-seconds",
        "2",
        "--report",
        &report.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|a| a.to_string()));
    let run = run_tessera(&args);
    run.assert_success();
    let report: tessera_tests::Report =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    (report.warnings, run.stderr.clone())
}

/// `tessera transcode in.mkv --hls DIR` with no package setting carries the English SRT
/// track as a WebVTT rendition with its cues at their frames, states FRAME-RATE=30.000 for
/// the 30/1 source, and so does DASH (a text/vtt AdaptationSet, frameRate 30); turned off
/// (here by the config file's `package_subtitles`), the track is named in a warning.
#[test]
fn text_subtitles_are_carried_by_default_and_named_when_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let src = english_srt_source(dir.path());
    let source_cues = source_cue_times(&src);
    assert_eq!(source_cues.len(), SHORT_CUES.len(), "{source_cues:?}");
    let v0_source = probe_stream_frames(&src, "v:0")[0].ts;
    // The source cues on a manifest's media timeline (its first frame at `v0_media`).
    let expected = |v0_media: f64| -> Vec<(f64, f64, String)> {
        SHORT_CUES
            .iter()
            .zip(&source_cues)
            .map(|((_, _, t), (a, b))| {
                (
                    a - v0_source + v0_media,
                    b - v0_source + v0_media,
                    t.to_string(),
                )
            })
            .collect()
    };

    let hls = dir.path().join("hls");
    let (warnings, _) = package_with(&src, "--hls", &hls, &[]);
    assert!(warnings.is_empty(), "{warnings:?}");
    let master = valid_master(&hls);
    assert!(
        master.contains("TYPE=SUBTITLES,GROUP-ID=\"subs\",NAME=\"eng\",LANGUAGE=\"eng\""),
        "no English subtitle rendition:\n{master}"
    );
    let variants: Vec<&str> = master
        .lines()
        .filter(|l| l.starts_with("#EXT-X-STREAM-INF:"))
        .collect();
    assert!(!variants.is_empty(), "{master}");
    for v in &variants {
        assert!(
            v.contains(",FRAME-RATE=30.000,") && v.contains("SUBTITLES=\"subs\""),
            "{v}"
        );
    }
    let (files, cues) = hls_cues(&hls, 0);
    assert_eq!(files, 3, "a file per 2 s segment of 6 s");
    let v0_media = probe_stream_frames(&hls.join("master.m3u8"), "v:0")[0].ts;
    assert_cues_close(&cues, &expected(v0_media), "HLS s0");

    let dash = dir.path().join("dash");
    let (warnings, _) = package_with(&src, "--dash", &dash, &[]);
    assert!(warnings.is_empty(), "{warnings:?}");
    let mpd = valid_mpd(&dash);
    for part in [
        "mimeType=\"text/vtt\" lang=\"eng\"",
        "<BaseURL>s0/subtitles.vtt</BaseURL>",
        "frameRate=\"30\"",
    ] {
        assert!(mpd.contains(part), "MPD lacks {part}:\n{mpd}");
    }
    // FFmpeg 5.1's DASH demuxer opens the side-loaded `.vtt` only when allowed to.
    let through_mpd = |args: &[&str]| {
        let mut all = vec!["-allowed_extensions", "ALL"];
        all.extend_from_slice(args);
        ffprobe_json(&dash.join("manifest.mpd"), &all)
    };
    let v0_media = num(&through_mpd(&[
        "-select_streams",
        "v:0",
        "-read_intervals",
        "%+#1",
        "-show_entries",
        "frame=best_effort_timestamp_time",
    ])["frames"][0]["best_effort_timestamp_time"])
    .unwrap();
    assert_cues_close(&dash_cues(&dash, 0), &expected(v0_media), "DASH s0");
    // And where a DASH client finds them: FFmpeg's demuxer through the MPD.
    let packets = through_mpd(&[
        "-select_streams",
        "s:0",
        "-show_entries",
        "packet=pts_time,duration_time:stream=codec_name:stream_tags=language",
    ]);
    assert_eq!(packets["streams"][0]["codec_name"], "webvtt", "{packets}");
    assert_eq!(
        packets["streams"][0]["tags"]["language"], "eng",
        "{packets}"
    );
    let packets = packets["packets"].as_array().unwrap();
    assert_eq!(packets.len(), SHORT_CUES.len(), "{packets:?}");
    let demuxed: Vec<(f64, f64, String)> = packets
        .iter()
        .zip(SHORT_CUES)
        .map(|(p, (_, _, t))| {
            let (at, d) = (
                num(&p["pts_time"]).unwrap(),
                num(&p["duration_time"]).unwrap(),
            );
            (at, at + d, t.to_string())
        })
        .collect();
    assert_cues_close(&demuxed, &expected(v0_media), "DASH s0 through FFmpeg");

    let config = dir.path().join("tessera.toml");
    std::fs::write(&config, "[transcode]\npackage_subtitles = \"none\"\n").unwrap();
    let off = dir.path().join("off");
    let config_arg = config.display().to_string();
    let (warnings, stderr) = package_with(&src, "--hls", &off, &["--config", &config_arg]);
    let named = "stream 2: subtitle subrip (eng): left out of the package";
    assert!(
        warnings.iter().any(|w| w.starts_with(named)),
        "no warning naming the track: {warnings:?}"
    );
    assert!(stderr.contains(&format!("warning: {named}")), "{stderr}");
    let master = std::fs::read_to_string(off.join("master.m3u8")).unwrap();
    assert!(!master.contains("SUBTITLES"), "{master}");
    assert!(!off.join("s0").exists());
}
