//! Planning a long source on the dispatcher's side: a 2-hour 60 fps H.264-like index (432,000
//! packets, 2 s GOPs, B-pyramid) crosses the process boundary as the probe child writes it
//! (JSON with the compact index), is read back, and planned into 10 s segments.
//!
//! Target (issue 8): under 2 s and under 200 MiB in the dispatcher. Printed with the median of
//! five runs and the ratio to a baseline measured in the same run: sorting the same pts, the
//! O(n log n) floor any planner pays.
//!
//!   cargo bench -p tessera-model --bench plan

use std::time::Instant;

use tessera_model::plan::{plan_segments, timestamp_bias};
use tessera_model::probe::{
    AudioInfo, ColorInfo, PacketEntry, Probe, ProbeInfo, Rational, VideoInfo,
};
use tessera_model::timestamps::DtsRule;

const FPS: i64 = 60;
const SECONDS: i64 = 2 * 3600;
const GOP: i64 = 120;

/// Packets in decode order: per GOP an IDR, then P frames each followed by its three
/// B-frames (pyramid), as x264 writes them; pts in a 1/90000 time base.
fn index() -> Vec<PacketEntry> {
    let tick = 90_000 / FPS;
    let n = FPS * SECONDS;
    let mut order = Vec::with_capacity(n as usize);
    let mut gop = 0;
    while gop < n {
        order.push(gop);
        let mut i = gop + 1;
        while i < (gop + GOP).min(n) {
            let p = (i + 3).min((gop + GOP).min(n) - 1);
            order.push(p);
            for b in [i + 1, i, i + 2] {
                if b < p {
                    order.push(b);
                }
            }
            i = p + 1;
        }
        gop += GOP;
    }
    let pts: Vec<i64> = order.iter().map(|f| f * tick).collect();
    let mut deriver = DtsRule::of(&pts).deriver();
    order
        .iter()
        .map(|f| {
            let pts = f * tick;
            PacketEntry {
                pts,
                dts: deriver.next(pts),
                key: f % GOP == 0,
                discard: false,
                recovery: None,
            }
        })
        .collect()
}

fn probe(packets: Vec<PacketEntry>) -> Probe {
    let tb = Rational {
        num: 1,
        den: 90_000,
    };
    Probe {
        info: ProbeInfo {
            container: "mov,mp4,m4a,3gp,3g2,mj2".into(),
            duration_seconds: SECONDS as f64,
            start_seconds: 0.0,
            video: VideoInfo {
                index: 0,
                codec: "h264".into(),
                width: 1920,
                height: 1080,
                pix_fmt: "yuv420p".into(),
                bit_depth: 8,
                time_base: tb,
                frame_rate: Rational { num: 60, den: 1 },
                avg_frame_rate: Rational { num: 60, den: 1 },
                sample_aspect_ratio: Rational { num: 1, den: 1 },
                frames: packets.len() as u64,
                color: ColorInfo::default(),
                rotation: 0.0,
                display_matrix: None,
            },
            audio: Vec::<AudioInfo>::new(),
            size_bytes: 0,
            ignored: Vec::new(),
            chapters: Vec::new(),
            title: None,
            subtitles: Vec::new(),
            warnings: Vec::new(),
            run_shifts_seconds: Vec::new(),
        },
        dts_rule: DtsRule::of(&packets.iter().map(|p| p.pts).collect::<Vec<_>>()),
        packets,
        derived_pts: None,
    }
}

fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let packets = index();
    let n = packets.len();
    let json = serde_json::to_vec(&probe(packets)).expect("serialise");
    println!(
        "index: {n} packets ({} s at {FPS} fps), {:.1} MiB as the probe child's JSON",
        SECONDS,
        json.len() as f64 / 1048576.0
    );
    let (mut planning, mut floor, mut segments) = (Vec::new(), Vec::new(), 0);
    let rss_before = rss_kib("VmRSS:");
    let mut grown = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let probe: Probe = serde_json::from_slice(&json).expect("deserialise");
        let tb = probe.info.video.time_base;
        let plans = plan_segments(&probe.packets, tb, 10.0, 8);
        let bias = timestamp_bias(&probe.packets, tb);
        planning.push(t.elapsed().as_secs_f64());
        grown = grown.max(rss_kib("VmRSS:").saturating_sub(rss_before));
        segments = plans.len();
        assert!(bias > 0 && plans.iter().map(|p| p.frames).sum::<u64>() == n as u64);

        let mut pts: Vec<i64> = probe.packets.iter().map(|p| p.pts).collect();
        let t = Instant::now();
        pts.sort_unstable();
        floor.push(t.elapsed().as_secs_f64());
    }
    let (plan_s, floor_s) = (median(planning), median(floor));
    println!(
        "read + plan: median {plan_s:.3} s over 5 runs, {segments} segments (target < 2 s: {})",
        if plan_s < 2.0 { "met" } else { "MISSED" }
    );
    println!(
        "baseline (sort of the pts): median {floor_s:.4} s; ratio plan/sort = {:.1}",
        plan_s / floor_s.max(1e-9)
    );
    println!(
        "memory: RSS grew {:.1} MiB while reading and planning, peak RSS of the process {:.1} MiB (target < 200 MiB: {})",
        grown as f64 / 1024.0,
        rss_kib("VmHWM:") as f64 / 1024.0,
        if rss_kib("VmHWM:") < 200 * 1024 { "met" } else { "MISSED" }
    );
}
