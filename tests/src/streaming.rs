//! Checks of a streaming package the way players read it: FFmpeg opens the HLS master
//! playlist and the DASH MPD, decodes every rendition through them, and each must hold the
//! source's frames at the source's times; the package's own validator (RFC 8216 rules, the
//! MPD's structure and timeline) must find nothing; GStreamer's `hlsdemux`/`dashdemux` read
//! them too where Debian's plugins are installed.

use std::path::Path;

use crate::probe::{ffprobe_json, num, probe_stream_frames};
use crate::run::run_command;

/// What one client decoded of one stream through a manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// Frames (video) or audio frames decoded.
    pub frames: usize,
    /// Presentation times relative to the stream's first frame (seconds).
    pub times: Vec<f64>,
    /// Width x height (video).
    pub size: Option<(u64, u64)>,
}

/// The video and audio streams FFmpeg finds behind a manifest (`master.m3u8` or an MPD):
/// (codec type, width, height, language) by stream index.
pub fn manifest_streams(manifest: &Path) -> Vec<(String, u64, u64, String)> {
    let v = ffprobe_json(manifest, &["-show_streams"]);
    v["streams"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|s| {
            (
                s["codec_type"].as_str().unwrap_or("").to_string(),
                num(&s["width"]).unwrap_or(0.0) as u64,
                num(&s["height"]).unwrap_or(0.0) as u64,
                s["tags"]["language"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Decodes stream `selector` (e.g. `v:1`, `a:0`) through `manifest` with FFmpeg.
pub fn decode_through(manifest: &Path, selector: &str) -> Decoded {
    let frames = probe_stream_frames(manifest, selector);
    let first = frames.first().map_or(0.0, |f| f.ts);
    Decoded {
        frames: frames.len(),
        times: frames.iter().map(|f| f.ts - first).collect(),
        size: None,
    }
}

/// Asserts `got` holds the source's frame times (relative to its first), one for one within
/// `tolerance` seconds; `what` names the rendition in the message.
pub fn assert_same_times(what: &str, got: &[f64], source: &[f64], tolerance: f64) {
    assert_eq!(
        got.len(),
        source.len(),
        "{what}: {} frames through the manifest, the source has {}",
        got.len(),
        source.len()
    );
    for (i, (g, s)) in got.iter().zip(source).enumerate() {
        assert!(
            (g - s).abs() <= tolerance,
            "{what}: frame {i} at {g:.4} s, the source's at {s:.4} s"
        );
    }
}

/// PSNR (dB) of the video stream `index` read through `manifest` against `source`, frame n
/// against frame n, the source scaled to the rendition's size.
pub fn psnr_through(manifest: &Path, index: usize, size: (u64, u64), source: &Path) -> f64 {
    let graph = format!(
        "[0:v:{index}]settb=1/25,setpts=N,format=yuv420p[o];\
         [1:v:0]settb=1/25,setpts=N,scale={}:{}:flags=bicubic,format=yuv420p[s];[o][s]psnr",
        size.0, size.1
    );
    crate::probe::psnr_graph(manifest, source, &graph)
}

/// Whether GStreamer with the demuxer `element` (hlsdemux, dashdemux) is installed.
pub fn gstreamer_has(element: &str) -> bool {
    let run = run_command(
        Path::new("gst-inspect-1.0"),
        [element],
        std::time::Duration::from_secs(60),
    );
    run.status.success()
}

/// Decodes `manifest` end to end with GStreamer (`uridecodebin` picks hlsdemux or
/// dashdemux, which plays its first variant) and returns the presentation time (seconds) of
/// every video frame its sink receives; `Err` with the pipeline's output when it fails.
pub fn gstreamer_video_times(manifest: &Path) -> Result<Vec<f64>, String> {
    let uri = format!("uri=file://{}", manifest.display());
    let run = run_command(
        Path::new("gst-launch-1.0"),
        [
            "-v",
            "uridecodebin",
            uri.as_str(),
            "!",
            "video/x-raw",
            "!",
            "fakesink",
            "sync=false",
            "silent=false",
        ],
        std::time::Duration::from_secs(120),
    );
    // GStreamer 1.22's adaptive demuxers now and then hang in their teardown after the
    // sink has had every buffer and the end of stream (seen once in CI: EOS at the sink,
    // then no exit for 300 s). The frames are all there by then and are checked below;
    // only the exit is missing, so a run killed after its sink's EOS counts as finished.
    let sink_ended = run
        .stdout
        .lines()
        .any(|l| l.contains("fakesink0") && l.contains("type: eos"));
    let hung_after_eos = run.timed_out && sink_ended && !run.stdout.contains("ERROR");
    if !hung_after_eos && (!run.status.success() || run.stdout.contains("ERROR")) {
        return Err(run.describe());
    }
    Ok(run
        .stdout
        .lines()
        .filter(|l| l.contains("fakesink0") && l.contains("chain"))
        .filter_map(|l| {
            l.split("pts: ")
                .nth(1)?
                .split(',')
                .next()
                .and_then(gst_time)
        })
        .collect())
}

/// Seconds of a GStreamer clock time "H:MM:SS.nnnnnnnnn".
fn gst_time(t: &str) -> Option<f64> {
    let mut parts = t.trim().split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// Frame times of `path`'s first video stream relative to its first frame.
pub fn relative_frame_times(path: &Path) -> Vec<f64> {
    let t = crate::probe::probe_frames(path);
    let first = t.first().copied().unwrap_or(0.0);
    t.iter().map(|x| x - first).collect()
}

/// Every video rendition behind `manifest` (FFmpeg's HLS or DASH demuxer): the sizes
/// `rungs` in order, each frame-exact at `source`'s frame times with PSNR at least
/// `min_psnr`; one audio rendition per language in `languages`, each as long as the video.
pub fn assert_package_plays(
    manifest: &Path,
    source: &Path,
    rungs: &[(u64, u64)],
    languages: &[&str],
    min_psnr: f64,
) {
    let streams = manifest_streams(manifest);
    let videos: Vec<(u64, u64)> = streams
        .iter()
        .filter(|s| s.0 == "video")
        .map(|s| (s.1, s.2))
        .collect();
    assert_eq!(
        videos,
        rungs,
        "{}: the video renditions",
        manifest.display()
    );
    let mut langs: Vec<&str> = streams
        .iter()
        .filter(|s| s.0 == "audio")
        .map(|s| s.3.as_str())
        .collect();
    langs.sort_unstable();
    assert_eq!(langs, languages, "{}: audio renditions", manifest.display());
    let times = relative_frame_times(source);
    let duration = times.last().copied().unwrap_or(0.0) + times.get(1).copied().unwrap_or(0.04);
    for (i, size) in videos.iter().enumerate() {
        let what = format!("{} video {i} ({}x{})", manifest.display(), size.0, size.1);
        let got = decode_through(manifest, &format!("v:{i}"));
        assert_same_times(&what, &got.times, &times, 0.002);
        let psnr = psnr_through(manifest, i, *size, source);
        assert!(psnr >= min_psnr, "{what}: PSNR {psnr:.2} dB < {min_psnr}");
    }
    // A/V sync: the audio starts where it does in the source, relative to the video.
    let start = |path: &Path, sel: &str| {
        let frames = crate::probe::probe_stream_frames(path, sel);
        frames
            .first()
            .map(|f| f.ts)
            .unwrap_or_else(|| panic!("{}: no {sel}", path.display()))
    };
    let source_offset = start(source, "v:0") - start(source, "a:0");
    for a in 0..languages.len() {
        let offset = start(manifest, "v:0") - start(manifest, &format!("a:{a}"));
        assert!(
            (offset - source_offset).abs() < 0.025,
            "{}: audio {a} is {:.3} s off the video (the source: {source_offset:.3} s)",
            manifest.display(),
            offset
        );
    }
    for a in 0..languages.len() {
        let audio = crate::probe::probe_stream_frames(manifest, &format!("a:{a}"));
        let (first, last) = match (audio.first(), audio.last()) {
            (Some(f), Some(l)) => (f.ts, l.ts + l.duration.unwrap_or(0.0)),
            _ => panic!("{}: audio {a} decodes to nothing", manifest.display()),
        };
        assert!(
            ((last - first) - duration).abs() < 0.1,
            "{}: audio {a} lasts {:.3} s, the video {duration:.3} s",
            manifest.display(),
            last - first
        );
    }
}
