//! `tessera probe FILE [--plan] [--json]`: what tessera sees in a file.
//!
//! Why: when a file surprises a user (a job fails, frames look off, a track is missing), the
//! first question is what tessera made of it: its streams, where a decoder can start, how it
//! would cut it, and what it keeps or leaves out. This answers with the same probe and planner
//! the farm runs, the probe in a sandboxed child like every other look at an untrusted file.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use tessera_farm::sandbox::{Confinement, Limits, MediaOp, Sandbox};
use tessera_model::plan::plan_segments_busy;
use tessera_model::probe::{Probe, SegmentPlan};

/// `tessera probe` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    /// The file to look at.
    pub input: PathBuf,
    /// Also show the segment plan `tessera transcode` would use.
    #[arg(long)]
    pub plan: bool,
    /// Target segment length in seconds for --plan.
    #[arg(long, default_value_t = 10.0)]
    pub segment_seconds: f64,
    /// Segments expected to encode at once, for --plan (default: the CPU count).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `tessera probe`; fails with the probe's error (naming the file and the reason).
pub async fn run(args: &ProbeArgs) -> anyhow::Result<()> {
    let sandbox = Sandbox::current()?.confined(Confinement::default().reading(&args.input));
    let limits = Limits {
        timeout: Duration::from_secs(600),
        ..Limits::default()
    };
    let op = MediaOp::Probe {
        input: args.input.clone(),
        max_frames: None,
    };
    let (probe, _): (Probe, _) = sandbox.run(&op, limits, &mut |_| {}).await?;
    let workers = args.workers.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    // The plan of `tessera transcode`: its audio step takes one worker's child too.
    let transcoded: Vec<usize> = (probe.info.audio.iter())
        .filter(|a| !a.stream_copies())
        .map(|a| a.index)
        .collect();
    let plans = args.plan.then(|| {
        plan_segments_busy(
            &probe.packets,
            probe.info.video.time_base,
            args.segment_seconds,
            workers,
            tessera_engine::audio_step_frames(&probe.info, &transcoded, 1),
        )
    });
    let facts = describe(&probe, plans.as_deref());
    let text = if args.json {
        serde_json::to_string_pretty(&facts)? + "\n"
    } else {
        render_text(&args.input, &facts)
    };
    // A reader that stops early (`tessera probe x | head`) is not an error.
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Everything `tessera probe` reports, as one JSON value (the text form prints the same).
fn describe(probe: &Probe, plans: Option<&[SegmentPlan]>) -> serde_json::Value {
    let info = &probe.info;
    let v = &info.video;
    let tb = v.time_base;
    let flagged_not_clean = probe
        .packets
        .iter()
        .filter(|p| !p.key && p.recovery.is_some())
        .count();
    let keys: Vec<f64> = probe
        .packets
        .iter()
        .filter(|p| p.key && !p.discard)
        .map(|p| tb.seconds(p.pts))
        .collect();
    let max_gap = keys.windows(2).map(|w| w[1] - w[0]).fold(0.0f64, f64::max);
    let subtitles = info.subtitles.iter().map(|t| {
        format!(
            "subtitle stream {} ({}{}), {} cues, as text",
            t.source_index,
            t.codec,
            t.language
                .as_deref()
                .map(|l| format!(", {l}"))
                .unwrap_or_default(),
            t.cues.len()
        )
    });
    let keeps: Vec<String> = std::iter::once(format!("video stream {} ({})", v.index, v.codec))
        .chain(info.audio.iter().map(|a| {
            format!(
                "audio stream {} ({}{}), {}",
                a.index,
                a.codec,
                a.language
                    .as_deref()
                    .map(|l| format!(", {l}"))
                    .unwrap_or_default(),
                if a.stream_copies() {
                    "copied"
                } else {
                    "re-encoded to AAC"
                }
            )
        }))
        .chain(subtitles)
        .collect();
    let plan = plans.map(|plans| {
        plans
            .iter()
            .map(|s| {
                json!({
                    "index": s.index,
                    "start_s": tb.seconds(s.start_pts),
                    "end_s": tb.seconds(s.end_pts),
                    "frames": s.frames,
                    "first_packet": s.first_packet,
                    "last_packet": s.last_packet,
                    "chunk_packets": s.last_packet + 1 - s.first_packet,
                    "starts_on_keyframe": s.starts_on_keyframe,
                })
            })
            .collect::<Vec<_>>()
    });
    json!({
        "container": info.container,
        "size_bytes": info.size_bytes,
        "duration_s": info.duration_seconds,
        "start_s": info.start_seconds,
        "video": v,
        "audio": info.audio,
        "keyframes": {
            "clean": keys.len(),
            "recovery_points": flagged_not_clean,
            "first_s": keys.iter().take(8).collect::<Vec<_>>(),
            "longest_gap_s": max_gap,
            "reorder_depth": probe.dts_rule.depth,
        },
        "packets": probe.packets.len(),
        "keeps": keeps,
        "leaves_out": info.ignored,
        "plan": plan,
    })
}

fn render_text(input: &std::path::Path, f: &serde_json::Value) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let v = &f["video"];
    let _ = writeln!(out, "{}", input.display());
    let _ = writeln!(
        out,
        "  container {}, {} bytes, duration {:.3} s, starts at {:.3} s",
        f["container"].as_str().unwrap_or("?"),
        f["size_bytes"],
        f["duration_s"].as_f64().unwrap_or(0.0),
        f["start_s"].as_f64().unwrap_or(0.0)
    );
    let _ = writeln!(
        out,
        "  video: {} {}x{} {} ({}-bit), {} frames, time base {}/{}, rotation {}",
        v["codec"].as_str().unwrap_or("?"),
        v["width"],
        v["height"],
        v["pix_fmt"].as_str().unwrap_or("?"),
        v["bit_depth"],
        v["frames"],
        v["time_base"]["num"],
        v["time_base"]["den"],
        v["rotation"]
    );
    let _ = writeln!(out, "  colour: {}", v["color"]);
    let k = &f["keyframes"];
    let _ = writeln!(
        out,
        "  keyframes: {} clean, {} recovery points, longest gap {:.2} s, reorder depth {}",
        k["clean"],
        k["recovery_points"],
        k["longest_gap_s"].as_f64().unwrap_or(0.0),
        k["reorder_depth"]
    );
    for line in f["keeps"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "  keeps {}", line.as_str().unwrap_or(""));
    }
    for line in f["leaves_out"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "  leaves out {}", line.as_str().unwrap_or(""));
    }
    if let Some(plan) = f["plan"].as_array() {
        let _ = writeln!(out, "  plan: {} segments", plan.len());
        for s in plan {
            let _ = writeln!(
                out,
                "    #{:<4} {:>10.3} - {:>10.3} s  {:>6} frames  {:>6} packets  {}",
                s["index"],
                s["start_s"].as_f64().unwrap_or(0.0),
                s["end_s"].as_f64().unwrap_or(0.0),
                s["frames"],
                s["chunk_packets"],
                if s["starts_on_keyframe"].as_bool() == Some(true) {
                    "on a keyframe"
                } else {
                    "decodes from an earlier point"
                }
            );
        }
    }
    out
}
