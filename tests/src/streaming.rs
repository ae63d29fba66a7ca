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
        std::time::Duration::from_secs(300),
    );
    if !run.status.success() || run.stdout.contains("ERROR") {
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
