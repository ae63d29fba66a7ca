//! The checks that make a pass mean the GPU path works (GPU re-review, "the smoke test would
//! pass with green or garbled frames"): the picture against the source (a PSNR floor), the
//! decoder and encoders that did the work (from each segment's log line, as the media child
//! reported them), the NVENC sessions held against each card's budget, and 10-bit outputs'
//! pixel format and colour tags. Each answers its problems, each ending in `;` (empty: passed).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::Probe;

/// The lowest luma PSNR (dB) a case's output may have against its source, as the review
/// asks for testsrc2. Why 35: a real encode of the smoke clips at the cases' settings
/// measures 41-45 dB; green frames, garbled ones or a wrong plane come out far below it (an
/// output with 2% of its bytes scrambled measured 23.5 to 27.4 dB).
pub const PSNR_FLOOR_DB: f64 = 35.0;

/// The luma PSNR of a transcode's report (`quality.psnr_y`) or of `tessera quality --json`
/// (`psnr_y`).
pub fn psnr_of(json: &str) -> Option<f64> {
    let v: Value = serde_json::from_str(json).ok()?;
    v.get("quality")
        .and_then(|q| q.get("psnr_y"))
        .or_else(|| v.get("psnr_y"))
        .and_then(Value::as_f64)
}

/// A PSNR missing or under [`PSNR_FLOOR_DB`].
pub fn psnr_problem(psnr: Option<f64>) -> String {
    match psnr {
        None => " no PSNR measured;".into(),
        Some(db) if db.is_nan() || db < PSNR_FLOOR_DB => {
            format!(" luma PSNR {db:.1} dB under the {PSNR_FLOOR_DB} dB floor;")
        }
        Some(_) => String::new(),
    }
}

/// What `nvidia-smi` saw while a case ran (rows `index, sessions, enc %, dec %, gpu %`): with
/// `require`, an encoder session seen, never more than the cards' `budget`, and the encoder
/// busy; with `decode`, the decoder busy. No samples (no nvidia-smi): nothing to check.
pub fn smi_problems(samples: &[String], budget: u64, mode: &str) -> String {
    if samples.is_empty() || mode == "off" {
        return String::new();
    }
    let col = |s: &String, i: usize| -> f64 {
        (s.split(',').nth(i))
            .and_then(|c| c.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let most = |i| samples.iter().map(|s| col(s, i)).fold(0.0, f64::max);
    let mut p = String::new();
    if mode == "require" {
        let seen = most(1);
        if seen == 0.0 {
            p += " nvidia-smi saw no encoder session;";
        } else if seen > budget as f64 {
            p += &format!(" nvidia-smi saw {seen} sessions, over the budget of {budget};");
        }
        if most(2) == 0.0 {
            p += " the encoder's use stayed at 0%;";
        }
    } else if most(3) == 0.0 {
        p += " the decoder's use stayed at 0%;";
    }
    p
}

/// What decoded and encoded a run's segments, from their `segment encoded` log lines
/// (`encoders=... decoder=... nvdec_frames=N uploaded_frames=M`), and the NVENC sessions each
/// card held (`card=C ... sessions_in_use=N` of the `GPU segment` lines).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coding {
    /// `segment encoded` lines.
    pub segments: usize,
    /// Every encoder named.
    pub encoders: BTreeSet<String>,
    /// Every decoder named (`software`, `h264_nvdec`, ...).
    pub decoders: BTreeSet<String>,
    /// Frames NVDEC gave on the card, summed.
    pub nvdec_frames: u64,
    /// Frames decoded in system memory and uploaded, summed.
    pub uploaded_frames: u64,
    /// The most NVENC sessions held on each card.
    pub held: BTreeMap<u64, u64>,
}

/// The value of `key=` in a log line, up to the next space.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    line[at..].split(' ').next()
}

impl Coding {
    /// Reads a transcode's log.
    pub fn of(log: &str) -> Coding {
        let mut c = Coding::default();
        let num = |l: &str, k: &str| field(l, k).and_then(|v| v.parse::<u64>().ok());
        for line in log.lines() {
            if line.contains("segment encoded") {
                c.segments += 1;
                let encoders = field(line, "encoders").unwrap_or("");
                c.encoders.extend(
                    encoders
                        .split(',')
                        .filter(|e| !e.is_empty())
                        .map(String::from),
                );
                c.decoders
                    .insert(field(line, "decoder").unwrap_or("?").to_string());
                c.nvdec_frames += num(line, "nvdec_frames").unwrap_or(0);
                c.uploaded_frames += num(line, "uploaded_frames").unwrap_or(0);
            } else if line.contains("GPU segment") {
                if let (Some(card), Some(n)) = (num(line, "card"), num(line, "sessions_in_use")) {
                    let held = c.held.entry(card).or_default();
                    *held = (*held).max(n);
                }
            }
        }
        c
    }
}

/// Whether the work ran where `mode` says: `require`, NVDEC and NVENC; `decode`, NVDEC and a
/// software encoder (cards without NVENC); `off`, nothing on a card.
pub fn coding_problems(c: &Coding, mode: &str) -> String {
    let mut p = String::new();
    if c.segments == 0 {
        return " no segment reported its decoder and encoders;".into();
    }
    let nvenc = |e: &String| e.ends_with("_nvenc");
    let nvdec = |d: &String| d.contains("nvdec") || d.contains("cuda");
    match mode {
        "require" | "decode" => {
            if mode == "require" {
                if let Some(e) = c.encoders.iter().find(|e| !nvenc(e)) {
                    p += &format!(" encoded by {e}, not NVENC;");
                }
            } else if let Some(e) = c.encoders.iter().find(|e| nvenc(e)) {
                p += &format!(" encoded by {e} on a card said to have no NVENC;");
            }
            if let Some(d) = c.decoders.iter().find(|d| !nvdec(d)) {
                p += &format!(" decoded by {d}, not NVDEC;");
            }
            if c.uploaded_frames > 0 {
                p += &format!(
                    " {} frames decoded in software (NVDEC fell back);",
                    c.uploaded_frames
                );
            }
            if c.nvdec_frames == 0 {
                p += " no frame came from NVDEC;";
            }
        }
        _ => {
            if c.encoders.iter().any(nvenc) || c.decoders.iter().any(nvdec) {
                p += " a card was used with --gpu off;";
            }
        }
    }
    p
}

/// NVENC sessions against each card's budget (`budgets`, by card index) while `segments`
/// segments ran: never over the budget, and with more segments than the budget allows, the
/// budget filled (the rest waited: the one more that waits). Only `require` holds sessions.
pub fn session_problems(
    held: &BTreeMap<u64, u64>,
    budgets: &BTreeMap<u64, u64>,
    segments: usize,
    mode: &str,
) -> String {
    if mode != "require" {
        return String::new();
    }
    let mut p = String::new();
    if held.values().all(|&n| n == 0) {
        return " no NVENC session was held;".into();
    }
    for (card, &n) in held {
        match budgets.get(card) {
            None => p += &format!(" card {card} is not in the inventory;"),
            Some(&b) if n > b => {
                p += &format!(" card {card} held {n} sessions, over its budget of {b};")
            }
            _ => {}
        }
    }
    let total: u64 = budgets.values().sum();
    let most: u64 = held.values().sum();
    if segments as u64 > total && most < total {
        p += &format!(
            " at most {most} of {total} sessions held with {segments} segments: the budget was \
             not filled;"
        );
    }
    p
}

/// A 10-bit case's output: a 10-bit pixel format, and the source's colour tags kept.
pub fn pixel_problems(out: &Probe, src: &Probe) -> String {
    let mut p = String::new();
    if out.bit_depth != 10 || !out.pix_fmt.contains("10") {
        p += &format!(
            " output is {} ({}-bit), not 10-bit;",
            out.pix_fmt, out.bit_depth
        );
    }
    for (what, o, s) in [
        ("primaries", &out.primaries, &src.primaries),
        ("transfer", &out.transfer, &src.transfer),
        ("matrix", &out.matrix, &src.matrix),
    ] {
        if o != s {
            p += &format!(" {what} {o:?}, the source's {s:?};");
        }
    }
    p
}

/// Each card's NVENC budget from `tessera gpu --json`'s `cards[].encode_budget`, and which
/// cards decode AV1 on NVDEC (`cards[].av1_nvdec`).
pub fn budgets_of(gpu_json: &str) -> (BTreeMap<u64, u64>, BTreeSet<u64>) {
    let v: Value = serde_json::from_str(gpu_json).unwrap_or(Value::Null);
    let cards = v["cards"].as_array().cloned().unwrap_or_default();
    let budgets = cards
        .iter()
        .filter_map(|c| Some((c["index"].as_u64()?, c["encode_budget"].as_u64()?)))
        .collect();
    let av1 = cards
        .iter()
        .filter(|c| c["av1_nvdec"].as_bool() == Some(true))
        .filter_map(|c| c["index"].as_u64())
        .collect();
    (budgets, av1)
}

#[cfg(test)]
mod tests;
