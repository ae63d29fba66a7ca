//! A package's images and trick-play: the poster, thumbnails every N seconds, sprite sheets
//! with their WebVTT thumbnails track, and the HLS I-frame playlists, from
//! `tessera transcode --hls --package-spec`. Each image must show the source frame at its
//! time (PSNR against that frame above its neighbours), at the size asked for.

use std::path::{Path, PathBuf};

use tessera_package::validate::{validate_hls, validate_mpd};
use tessera_tests::stills::{assert_shows_frame, image_info};
use tessera_tests::streaming::{assert_package_plays, gstreamer_has, gstreamer_video_times};
use tessera_tests::{fixture, run_tessera, Fixture};

/// Frames of the source: 13 s at 25 fps, 640x360.
const FRAMES: u64 = 325;

fn package(spec: serde_json::Value) -> (tempfile::TempDir, PathBuf) {
    let src = fixture(Fixture::StreamingSource);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("pkg");
    let spec_file = dir.path().join("spec.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    // The spec's format picks the flag (--hls, --dash, --cmaf), which sets the format.
    let flag = format!("--{}", spec["format"].as_str().unwrap_or("hls"));
    let args: Vec<String> = [
        "transcode",
        &src.display().to_string(),
        &flag,
        &root.display().to_string(),
        "--package-spec",
        &spec_file.display().to_string(),
        "--segment-seconds",
        "4",
        "--workers",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    run_tessera(&args).assert_success();
    (dir, root)
}

fn files_under(root: &Path, dir: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// (start, end, target) of every cue of a WebVTT file.
fn cues(vtt: &str) -> Vec<(f64, f64, String)> {
    let secs = |t: &str| {
        let p: Vec<f64> = t.split(':').map(|x| x.parse().unwrap()).collect();
        p[0] * 3600.0 + p[1] * 60.0 + p[2]
    };
    let lines: Vec<&str> = vtt.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let (a, b) = l.split_once(" --> ")?;
            Some((secs(a), secs(b), lines[i + 1].to_string()))
        })
        .collect()
}

#[test]
fn poster_thumbnails_and_sprites_show_the_frames_at_their_times() {
    let (_dir, root) = package(serde_json::json!({
        "format": "cmaf", "segment_seconds": 2, "ladder": [{"height": 360, "crf": 23}],
        "thumbnails": {
            "poster": {"time": 3.3, "height": 180},
            "interval": 2, "heights": [90, 180],
            "sprite": {"height": 36, "columns": 3, "rows": 2}
        }
    }));
    let src = fixture(Fixture::StreamingSource);
    let read = |rel: &str| std::fs::read(root.join(rel)).ok();
    let problems = validate_hls("master.m3u8", &read, None);
    assert!(problems.is_empty(), "validator: {problems:#?}");
    assert!(!root.join(".tiles").exists(), "tiles are not published");

    // 13 s every 2 s: 0, 2, ..., 12.
    let expected: Vec<String> = (0..7).map(|k| format!("{k:05}.jpg")).collect();
    for (dir, size) in [
        ("thumbnails/90p", (160, 90)),
        ("thumbnails/180p", (320, 180)),
    ] {
        assert_eq!(files_under(&root, dir), expected, "{dir}");
        for name in &expected {
            let info = image_info(&root.join(dir).join(name));
            assert_eq!(info, ("mjpeg".to_string(), size.0, size.1), "{dir}/{name}");
        }
    }
    for k in 0..7u64 {
        let image = root.join(format!("thumbnails/90p/{k:05}.jpg"));
        assert_shows_frame(&image, None, (&src, FRAMES), 50 * k, 28.0);
    }
    // 3.3 s is frame 82.5: the first frame at or after it is 83.
    let poster = root.join("poster.jpg");
    assert_eq!(image_info(&poster), ("mjpeg".to_string(), 320, 180));
    assert_shows_frame(&poster, None, (&src, FRAMES), 83, 28.0);

    // Sheets of 3x2 tiles of 64x36: 7 tiles make two sheets.
    let sheets = ["thumbnails/sprite-0000.jpg", "thumbnails/sprite-0001.jpg"];
    for s in sheets {
        assert_eq!(
            image_info(&root.join(s)),
            ("mjpeg".to_string(), 192, 72),
            "{s}"
        );
    }
    let vtt = std::fs::read_to_string(root.join("thumbnails/thumbnails.vtt")).unwrap();
    assert!(vtt.starts_with("WEBVTT\n"), "{vtt}");
    let cues = cues(&vtt);
    assert_eq!(cues.len(), 7, "{vtt}");
    for (k, (start, end, target)) in cues.iter().enumerate() {
        assert!((start - 2.0 * k as f64).abs() < 1e-3, "cue {k}: {vtt}");
        let want_end = (2.0 * (k + 1) as f64).min(13.0);
        assert!((end - want_end).abs() < 1e-3, "cue {k} ends {end}: {vtt}");
        let (file, xywh) = target.split_once("#xywh=").unwrap();
        let v: Vec<u64> = xywh.split(',').map(|x| x.parse().unwrap()).collect();
        let cell = k as u64 % 6;
        assert_eq!(file, format!("sprite-{:04}.jpg", k / 6), "cue {k}");
        assert_eq!(v, [cell % 3 * 64, cell / 3 * 36, 64, 36], "cue {k}");
        // The tile the cue points at shows the frame at the cue's start.
        let sheet = root.join("thumbnails").join(file);
        let crop = Some((v[0], v[1], v[2], v[3]));
        assert_shows_frame(&sheet, crop, (&src, FRAMES), 50 * k as u64, 24.0);
    }

    // DASH: the same sheets as a DASH-IF thumbnail set (a sheet is 6 tiles of 2 s, numbered
    // from 0), checked by the validator; both players still read the MPD.
    let mpd = std::fs::read_to_string(root.join("manifest.mpd")).unwrap();
    for part in [
        r#"contentType="image" mimeType="image/jpeg">"#,
        r#"<SegmentTemplate media="thumbnails/sprite-$Number%04d$.jpg" timescale="1000" duration="12000" startNumber="0"/>"#,
        r#"width="192" height="72">"#,
        r#"<EssentialProperty schemeIdUri="http://dashif.org/thumbnail_tile" value="3x2"/>"#,
    ] {
        assert!(mpd.contains(part), "the MPD lacks {part}:\n{mpd}");
    }
    let problems = validate_mpd("manifest.mpd", &read);
    assert!(problems.is_empty(), "validator: {problems:#?}");
    let manifest = root.join("manifest.mpd");
    let audio = ["eng", "fra"];
    assert_package_plays(&manifest, &src, &[(640, 360)], &audio, 30.0);
    if gstreamer_has("dashdemux") {
        let times = gstreamer_video_times(&manifest)
            .unwrap_or_else(|e| panic!("GStreamer on the MPD: {e}"));
        assert_eq!(times.len() as u64, FRAMES, "GStreamer's frames");
    }
}

#[test]
fn webp_posters_and_iframe_playlists() {
    let (_dir, root) = package(serde_json::json!({
        "format": "hls", "segment_seconds": 2,
        "ladder": [{"height": 360, "crf": 23}, {"height": 180, "crf": 26}],
        "thumbnails": {"format": "webp", "quality": 90, "poster": {"time": 30}}
    }));
    let src = fixture(Fixture::StreamingSource);
    // Past the end: the last frame, at the source's size.
    let poster = root.join("poster.webp");
    assert_eq!(image_info(&poster), ("webp".to_string(), 640, 360));
    assert_shows_frame(&poster, None, (&src, FRAMES), FRAMES - 1, 28.0);
    assert!(!root.join("thumbnails").exists(), "no interval asked");

    // One I-frame playlist per rung: one entry per media segment, at the segment's time,
    // a byte range inside the segment file.
    let master = std::fs::read_to_string(root.join("master.m3u8")).unwrap();
    let iframes: Vec<String> = master
        .lines()
        .filter(|l| l.starts_with("#EXT-X-I-FRAME-STREAM-INF:"))
        .map(|l| {
            l.split("URI=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(iframes.len(), 2, "{master}");
    for uri in &iframes {
        let text = std::fs::read_to_string(root.join(uri)).unwrap();
        assert!(text.contains("#EXT-X-I-FRAMES-ONLY"), "{uri}: {text}");
        let dir = Path::new(uri).parent().unwrap();
        let media = std::fs::read_to_string(root.join(dir).join("playlist.m3u8")).unwrap();
        let extinf = |t: &str| -> Vec<f64> {
            t.lines()
                .filter_map(|l| l.strip_prefix("#EXTINF:"))
                .map(|v| v.trim_end_matches(',').parse().unwrap())
                .collect()
        };
        assert_eq!(
            extinf(&text),
            extinf(&media),
            "{uri}: durations of the segments"
        );
        let lines: Vec<&str> = text.lines().collect();
        let mut entries = 0;
        for (i, l) in lines.iter().enumerate() {
            let Some(range) = l.strip_prefix("#EXT-X-BYTERANGE:") else {
                continue;
            };
            let (len, offset) = range.split_once('@').unwrap_or((range, "0"));
            let (len, offset): (u64, u64) = (len.parse().unwrap(), offset.parse().unwrap());
            let file = root.join(dir).join(lines[i + 1]);
            let size = std::fs::metadata(&file).unwrap().len();
            assert!(
                len > 0 && offset + len <= size,
                "{uri}: {l} in {size} bytes"
            );
            entries += 1;
        }
        assert_eq!(entries, 7, "{uri}: one I-frame per 2 s segment: {text}");
    }
}
