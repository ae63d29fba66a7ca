//! The oracle: facts about a media file as the `ffprobe` and `ffmpeg` CLIs
//! see them (frame counts, decoded timestamps, stream metadata, PSNR).

use std::path::Path;

use serde_json::Value;

use crate::run::run_ffmpeg_tool;

/// Runs `ffprobe -v error -of json ARGS FILE` and returns the parsed JSON.
pub fn ffprobe_json(path: &Path, args: &[&str]) -> Value {
    let mut all: Vec<&std::ffi::OsStr> = ["-v", "error", "-of", "json"]
        .iter()
        .chain(args)
        .map(std::ffi::OsStr::new)
        .collect();
    all.push(path.as_os_str());
    let run = run_ffmpeg_tool("ffprobe", all);
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("ffprobe JSON unparsable ({e})\n{}", run.describe()))
}

/// Reads a JSON value that ffprobe prints either as a number or a string.
pub fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn string(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

/// Video packets of `path` as the demuxer reads them (`-count_packets`): more than
/// [`frame_count`] when some cannot be decoded (a recording that begins mid-GOP).
pub fn packet_count(path: &Path) -> u64 {
    video_count(path, "packets")
}

/// Number of video frames the decoder outputs for the first video stream
/// (`-count_frames`, `nb_read_frames`); edit lists and discard flags apply.
pub fn frame_count(path: &Path) -> u64 {
    video_count(path, "frames")
}

/// ffprobe's `-count_<what>` of the first video stream (`nb_read_<what>`).
fn video_count(path: &Path, what: &str) -> u64 {
    let field = format!("nb_read_{what}");
    let v = ffprobe_json(
        path,
        &[
            &format!("-count_{what}"),
            "-select_streams",
            "v:0",
            "-show_entries",
            &format!("stream={field}"),
        ],
    );
    num(&v["streams"][0][&field])
        .unwrap_or_else(|| panic!("no {field} for {}: {v}", path.display())) as u64
}

/// When the stream `selector` (e.g. `a:0`) presents its first sample by the container's word:
/// the first packet not flagged discard (an edit list's trim), plus the samples its side data
/// says to skip, at `sample_rate`. `None` when no packet has a timestamp.
///
/// Why not the first decoded frame: a decoder with a delay (WMA, Vorbis) stamps its first
/// output a packet or two later, so frames would measure the decoder, not the file.
pub fn first_presented(path: &Path, selector: &str, sample_rate: u64) -> Option<f64> {
    let v = ffprobe_json(
        path,
        &[
            "-select_streams",
            selector,
            "-read_intervals",
            "%+#64",
            "-show_entries",
            "packet=pts_time,dts_time,flags:packet_side_data",
        ],
    );
    let packets = v["packets"].as_array().cloned().unwrap_or_default();
    packets
        .iter()
        .filter(|p| !p["flags"].as_str().unwrap_or("").contains('D'))
        .find_map(|p| {
            let ts = num(&p["pts_time"]).or_else(|| num(&p["dts_time"]))?;
            let skip = p["side_data_list"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["side_data_type"] == "Skip Samples")
                .find_map(|d| num(&d["skip_samples"]))
                .unwrap_or(0.0);
            Some(ts + skip / sample_rate.max(1) as f64)
        })
}

/// One decoded frame: its timestamp and duration in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frame {
    /// `best_effort_timestamp_time` (falls back to `pts_time`).
    pub ts: f64,
    /// The frame's duration, if ffprobe knows it.
    pub duration: Option<f64>,
    /// Audio samples in the frame (0 for video).
    pub samples: u64,
}

/// Decoded frames of the stream `selector` (e.g. `v:0`, `a:1`), in the
/// order the decoder outputs them (presentation order).
pub fn probe_stream_frames(path: &Path, selector: &str) -> Vec<Frame> {
    let v = ffprobe_json(
        path,
        &[
            "-select_streams",
            selector,
            "-show_entries",
            "frame=best_effort_timestamp_time,pts_time,pkt_dts_time,pkt_duration_time,duration_time,nb_samples",
        ],
    );
    let frames = v["frames"].as_array().cloned().unwrap_or_default();
    // A container that stores decode times as pts (MXF without temporal offsets, B-frames)
    // gives frames whose pts go backwards in presentation order. FFmpeg's best-effort
    // timestamp notices only after the first frame and then falls back to the packet dts; the
    // oracle applies that fallback to every frame of such a stream, so frame 0 is not read
    // under one rule and the rest under another.
    let pts: Vec<Option<f64>> = frames.iter().map(|f| num(&f["pts_time"])).collect();
    let faulty_pts = pts
        .iter()
        .flatten()
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| w[1] < w[0]);
    let use_dts = faulty_pts;
    let mut out: Vec<Frame> = Vec::with_capacity(frames.len());
    for f in &frames {
        let duration = num(&f["duration_time"]).or_else(|| num(&f["pkt_duration_time"]));
        // A container without pts (AVI with B-frames) leaves the frames flushed from the
        // decoder's reorder buffer at the end unstamped: they follow the previous frame by its
        // duration, as FFmpeg's own tools place them.
        let follows = out
            .last()
            .and_then(|p| p.duration.or(duration).map(|d| p.ts + d));
        let ts = if use_dts {
            num(&f["pkt_dts_time"]).or(follows)
        } else {
            num(&f["best_effort_timestamp_time"])
                .or_else(|| num(&f["pts_time"]))
                .or(follows)
        }
        .unwrap_or_else(|| panic!("frame without timestamp in {}: {f}", path.display()));
        out.push(Frame {
            ts,
            duration,
            samples: num(&f["nb_samples"]).unwrap_or(0.0) as u64,
        });
    }
    out
}

/// Timestamps (seconds, in the file's own time line) of every decoded frame
/// of the first video stream, in output order.
pub fn probe_frames(path: &Path) -> Vec<f64> {
    probe_stream_frames(path, "v:0")
        .iter()
        .map(|f| f.ts)
        .collect()
}

/// The container's `start_time` (seconds): the earliest stream start, the
/// zero that timestamps are compared against.
pub fn format_start(path: &Path) -> f64 {
    let v = ffprobe_json(path, &["-show_entries", "format=start_time"]);
    num(&v["format"]["start_time"]).unwrap_or(0.0)
}

/// One packet of a stream, in demux (decode) order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Packet {
    /// Presentation timestamp, seconds (NaN when unknown).
    pub pts: f64,
    /// Whether the container flags it as a keyframe.
    pub key: bool,
    /// Whether the demuxer marks it to be decoded but discarded (edit lists).
    pub discard: bool,
}

/// Packets of the stream `selector` in decode order.
pub fn packets(path: &Path, selector: &str) -> Vec<Packet> {
    let v = ffprobe_json(
        path,
        &[
            "-select_streams",
            selector,
            "-show_entries",
            "packet=pts_time,flags",
        ],
    );
    v["packets"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let flags = p["flags"].as_str().unwrap_or("");
            Packet {
                pts: num(&p["pts_time"]).unwrap_or(f64::NAN),
                key: flags.contains('K'),
                discard: flags.contains('D'),
            }
        })
        .collect()
}

/// Counts "leading pictures": packets that follow a non-first keyframe in
/// decode order but are shown before it. Their presence after a keyframe
/// means the GOP is open (they may reference the previous GOP).
pub fn leading_pictures(path: &Path) -> usize {
    let mut count = 0;
    let mut last_key: Option<f64> = None;
    let mut keys_seen = 0;
    for p in packets(path, "v:0") {
        if p.key {
            keys_seen += 1;
            last_key = (keys_seen > 1).then_some(p.pts);
        } else if let Some(k) = last_key {
            if p.pts < k {
                count += 1;
            }
        }
    }
    count
}

/// Stream metadata that the tests compare between source and output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamInfo {
    /// Stream index in the container.
    pub index: u64,
    /// `video`, `audio`, ...
    pub codec_type: String,
    /// e.g. `h264`, `aac`.
    pub codec_name: String,
    /// Coded width (video).
    pub width: Option<u64>,
    /// Coded height (video).
    pub height: Option<u64>,
    /// Pixel format (video).
    pub pix_fmt: Option<String>,
    /// The `language` tag, if any.
    pub language: Option<String>,
    /// Display-matrix rotation in degrees as ffprobe reports it, if any.
    pub rotation: Option<f64>,
    /// `color_primaries`, if reported.
    pub color_primaries: Option<String>,
    /// `color_transfer`, if reported.
    pub color_transfer: Option<String>,
    /// `color_space`, if reported.
    pub color_space: Option<String>,
    /// `color_range`, if reported.
    pub color_range: Option<String>,
    /// Audio sample rate.
    pub sample_rate: Option<u64>,
    /// Audio channel count.
    pub channels: Option<u64>,
    /// Audio channel layout as ffprobe names it (`stereo`, `5.1(side)`), if known.
    pub channel_layout: Option<String>,
    /// Sample aspect ratio as ffprobe reports it: FFmpeg's `av_guess_sample_aspect_ratio`
    /// (the container's, else the codec's), `(num, den)`; `None` when unknown (0:1).
    pub sample_aspect: Option<(u64, u64)>,
}

impl StreamInfo {
    /// Width over height as shown on screen (coded size times the sample aspect, square
    /// pixels when the aspect is unknown).
    pub fn display_aspect(&self) -> Option<f64> {
        let (w, h) = (self.width? as f64, self.height? as f64);
        let (n, d) = self.sample_aspect.unwrap_or((1, 1));
        (h > 0.0 && d > 0).then(|| w * n as f64 / (h * d as f64))
    }
}

/// `"16:11"` as `(16, 11)`; `None` for `0:1`, `N/A` and the like.
fn ratio(v: &Value) -> Option<(u64, u64)> {
    let (n, d) = v.as_str()?.split_once(':')?;
    let (n, d): (u64, u64) = (n.parse().ok()?, d.parse().ok()?);
    (n > 0 && d > 0).then_some((n, d))
}

/// All streams of a file with the metadata in [`StreamInfo`].
pub fn stream_info(path: &Path) -> Vec<StreamInfo> {
    let v = ffprobe_json(path, &["-show_streams"]);
    let streams = v["streams"].as_array().cloned().unwrap_or_default();
    streams
        .iter()
        .map(|s| {
            let rotation = s["side_data_list"].as_array().and_then(|list| {
                list.iter()
                    .filter(|d| d["side_data_type"] == "Display Matrix")
                    .find_map(|d| num(&d["rotation"]))
            });
            StreamInfo {
                index: num(&s["index"]).unwrap_or(0.0) as u64,
                codec_type: string(&s["codec_type"]).unwrap_or_default(),
                codec_name: string(&s["codec_name"]).unwrap_or_default(),
                width: num(&s["width"]).map(|w| w as u64),
                height: num(&s["height"]).map(|h| h as u64),
                pix_fmt: string(&s["pix_fmt"]),
                language: string(&s["tags"]["language"]),
                rotation,
                color_primaries: string(&s["color_primaries"]),
                color_transfer: string(&s["color_transfer"]),
                color_space: string(&s["color_space"]),
                color_range: string(&s["color_range"]),
                sample_rate: num(&s["sample_rate"]).map(|r| r as u64),
                channels: num(&s["channels"]).map(|c| c as u64),
                channel_layout: string(&s["channel_layout"]).filter(|l| l != "unknown"),
                sample_aspect: ratio(&s["sample_aspect_ratio"]),
            }
        })
        .collect()
}

/// The streams of `kind` (`video` or `audio`) in container order.
pub fn streams_of(path: &Path, kind: &str) -> Vec<StreamInfo> {
    stream_info(path)
        .into_iter()
        .filter(|s| s.codec_type == kind)
        .collect()
}

/// Average PSNR (dB, all planes, as ffmpeg's `psnr` filter reports it) of
/// `output`'s first video stream against `source`'s. The source is scaled to
/// the output's coded size, both go to yuv420p, and the n-th output frame is
/// compared with the n-th source frame; no autorotation is applied to
/// either. Identical inputs give infinity.
pub fn psnr(output: &Path, source: &Path) -> f64 {
    let out = streams_of(output, "video");
    let (w, h) = match out.first() {
        Some(StreamInfo {
            width: Some(w),
            height: Some(h),
            ..
        }) => (*w, *h),
        _ => panic!("{} has no video stream with a size", output.display()),
    };
    // Frames are paired by index (pts := frame number in one shared time
    // base), so sub-millisecond timestamp rounding in either container can't
    // pair a frame with its neighbour; timestamps are checked separately.
    let graph = format!(
        "[0:v:0]settb=1/25,setpts=N,format=yuv420p[o];\
         [1:v:0]settb=1/25,setpts=N,scale={w}:{h}:flags=bicubic,format=yuv420p[s];\
         [o][s]psnr"
    );
    psnr_graph(output, source, &graph)
}

/// Runs the filter `graph` (ending in `psnr`) over `output` (input 0) and `source` (input 1)
/// with no autorotation; returns the average PSNR (dB) ffmpeg reports.
pub fn psnr_graph(output: &Path, source: &Path, graph: &str) -> f64 {
    let run = run_ffmpeg_tool(
        "ffmpeg",
        [
            "-hide_banner".as_ref(),
            "-nostdin".as_ref(),
            "-noautorotate".as_ref(),
            "-i".as_ref(),
            output.as_os_str(),
            "-noautorotate".as_ref(),
            // A source whose size changes mid-stream: the graph is not rebuilt (which would
            // restart `N` and pair the wrong frames); `scale` takes each frame as it comes.
            "-reinit_filter".as_ref(),
            "0".as_ref(),
            "-i".as_ref(),
            source.as_os_str(),
            "-lavfi".as_ref(),
            std::ffi::OsStr::new(graph),
            "-f".as_ref(),
            "null".as_ref(),
            "-".as_ref(),
        ],
    );
    let line = run
        .stderr
        .lines()
        .rev()
        .find(|l| l.contains("PSNR") && l.contains("average:"))
        .unwrap_or_else(|| panic!("no PSNR line in ffmpeg output\n{}", run.describe()));
    let value = line
        .split("average:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unparsable PSNR line: {line}"));
    if value == "inf" {
        f64::INFINITY
    } else {
        value
            .parse()
            .unwrap_or_else(|e| panic!("unparsable PSNR {value:?} ({e}) in: {line}"))
    }
}
