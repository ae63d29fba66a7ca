//! The GPU smoke test's checks, as pure functions of what the programs printed: `tessera
//! probe --json` and `tessera gpu --json`, the NVDEC check's line, a transcode's log and
//! report, `nvidia-smi`'s samples; and the result table. Unit-tested in `checks/tests.rs`
//! on passing and failing samples (what `scripts/gpu-smoke.sh --self-test` runs).

use serde_json::Value;

mod proof;
pub use proof::{
    budgets_of, coding_problems, pixel_problems, psnr_of, psnr_problem, session_problems,
    smi_problems, Coding,
};

/// Frames, size and codec of a file's video, as `tessera probe FILE --json` reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probe {
    /// Decoded video frames.
    pub frames: u64,
    /// Width (pixels).
    pub width: u64,
    /// Height (pixels).
    pub height: u64,
    /// The video codec (`h264`, `hevc`).
    pub codec: String,
    /// The pixel format (`yuv420p10le`).
    pub pix_fmt: String,
    /// Bits per sample.
    pub bit_depth: u64,
    /// Colour primaries, transfer and matrix tags, where tagged.
    pub primaries: Option<String>,
    /// See `primaries`.
    pub transfer: Option<String>,
    /// See `primaries`.
    pub matrix: Option<String>,
}

impl Probe {
    /// Reads the `video` object of `tessera probe --json`; zeros and no codec where a field
    /// is missing, None when the text is no JSON object.
    pub fn from_json(text: &str) -> Option<Probe> {
        let v: Value = serde_json::from_str(text).ok()?;
        let video = v.as_object()?.get("video")?;
        let n = |key: &str| video[key].as_u64().unwrap_or(0);
        Some(Probe {
            frames: n("frames"),
            width: n("width"),
            height: n("height"),
            codec: video["codec"].as_str().unwrap_or("").to_string(),
            pix_fmt: video["pix_fmt"].as_str().unwrap_or("").to_string(),
            bit_depth: n("bit_depth"),
            primaries: video["color"]["primaries"].as_str().map(String::from),
            transfer: video["color"]["transfer"].as_str().map(String::from),
            matrix: video["color"]["matrix"].as_str().map(String::from),
        })
    }
}

/// What `tessera gpu --json` says of this machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// NVIDIA cards NVML lists.
    pub cards: usize,
    /// NVENC sessions a worker could open now (0 on cards without NVENC).
    pub nvenc_sessions: u64,
    /// Why NVML could not be read, if it could not.
    pub nvml_error: Option<String>,
}

impl Inventory {
    /// Reads `tessera gpu --json`; an unreadable report is a machine without cards.
    pub fn from_json(text: &str) -> Inventory {
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            return Inventory::default();
        };
        Inventory {
            cards: v["cards"].as_array().map_or(0, Vec::len),
            nvenc_sessions: v["nvenc_sessions_available"].as_u64().unwrap_or(0),
            nvml_error: v["nvml_error"].as_str().map(String::from),
        }
    }

    /// How the cases run: `off` for the self-test (no card needed), `require` where the
    /// card has NVENC, else `decode` (NVDEC, then libx264/libx265).
    pub fn mode(&self, self_test: bool) -> &'static str {
        if self_test {
            "off"
        } else if self.nvenc_sessions > 0 {
            "require"
        } else {
            "decode"
        }
    }

    /// Why nothing runs: no card, with NVML's reason (100 characters at most).
    pub fn no_card_reason(&self) -> String {
        let why: String = self
            .nvml_error
            .as_deref()
            .unwrap_or("")
            .chars()
            .take(100)
            .collect();
        format!("no NVIDIA card here ({why})")
    }
}

/// The frames and fps of `tessera gpu --nvdec-check`'s line `NVDEC decode: N frames WxH in
/// S s = F fps (...)`.
pub fn nvdec_line(text: &str) -> Option<(u64, Option<String>)> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("NVDEC decode: "))?;
    let frames = line.split(' ').next()?.parse().ok()?;
    let words: Vec<&str> = line.split(' ').collect();
    let fps = words
        .windows(2)
        .rev()
        .find(|w| w[1].starts_with("fps"))
        .map(|w| w[0].to_string());
    Some((frames, fps))
}

/// The NVDEC row's result and fps: passed when it decoded the clip's `want` frames.
pub fn nvdec_result(text: &str, want: u64) -> (String, String, bool) {
    match nvdec_line(text) {
        Some((got, fps)) if got == want => (
            format!("passed ({got} frames)"),
            fps.unwrap_or_else(|| "-".into()),
            true,
        ),
        Some((got, _)) => (format!("FAILED: {got} of {want} frames"), "-".into(), false),
        None => (format!("FAILED: no frames of {want}"), "-".into(), false),
    }
}

/// What a transcode's log (`TESSERA_LOG=info`) tells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFacts {
    /// Lines of segments that ran on the GPU path ("GPU segment").
    pub gpu_segments: usize,
    /// The most NVENC sessions the worker held at once (`sessions_in_use=N`), 0 if none.
    pub sessions_held: u64,
    /// The first `error...` text, cut to 40 characters.
    pub first_error: Option<String>,
}

impl LogFacts {
    /// Reads a transcode's log.
    pub fn of(log: &str) -> LogFacts {
        let held = log
            .match_indices("sessions_in_use=")
            .filter_map(|(at, key)| {
                let rest = &log[at + key.len()..];
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse::<u64>().ok()
            })
            .max();
        let first_error = log
            .lines()
            .find_map(|l| l.find("error").map(|at| l[at..].chars().take(40).collect()));
        LogFacts {
            gpu_segments: log.lines().filter(|l| l.contains("GPU segment")).count(),
            sessions_held: held.unwrap_or(0),
            first_error,
        }
    }
}

/// One case: the source's frames and the outputs' probes.
#[derive(Debug, Clone)]
pub struct CaseOutcome<'a> {
    /// The requested codec.
    pub codec: &'a str,
    /// The requested height of the main output (none: the source's).
    pub height: Option<u64>,
    /// The source's frames.
    pub src_frames: u64,
    /// The main output.
    pub main: Probe,
    /// Each extra rendition: its height and probe.
    pub also: Vec<(u64, Probe)>,
    /// Segments that ran on the GPU path.
    pub gpu_segments: usize,
    /// The `--gpu` mode.
    pub mode: &'a str,
}

impl CaseOutcome<'_> {
    /// What is wrong, each part ending in `;` (empty when the case passed): a frame lost or
    /// added, a size or codec not asked for, no segment on the GPU path (unless `--gpu off`).
    pub fn problems(&self) -> String {
        let mut p = String::new();
        let (m, src) = (&self.main, self.src_frames);
        if m.frames != src {
            p += &format!(" main has {} of {src} frames;", m.frames);
        }
        if let Some(h) = self.height.filter(|h| *h != m.height) {
            p += &format!(" main is {}p, not {h}p;", m.height);
        }
        if m.codec != self.codec {
            p += &format!(" main is {};", m.codec);
        }
        for (h, a) in &self.also {
            if a.frames != src || a.height != *h {
                p += &format!(" {h}p has {} frames at {}p;", a.frames, a.height);
            }
            if a.codec != self.codec {
                p += &format!(" {h}p is {};", a.codec);
            }
        }
        if self.gpu_segments == 0 && self.mode != "off" {
            p += " no segment ran on the GPU path;";
        }
        p
    }
}

/// The report's `encode_fps`, cut to 6 characters (`-` without one).
pub fn fps_text(report: &str) -> String {
    serde_json::from_str::<Value>(report)
        .ok()
        .and_then(|v| v.get("encode_fps").cloned())
        .filter(|f| !f.is_null())
        .map_or("-".into(), |f| f.to_string().chars().take(6).collect())
}

/// `held N, nvidia-smi M, enc E% dec D%, VRAM V MiB` from the sessions the worker held and
/// the `nvidia-smi` samples taken during the case (`index, sessions, enc %, dec %, gpu %,
/// VRAM MiB`; V the peak over the samples of a card).
pub fn sessions_text(held: u64, samples: &[String]) -> String {
    let col = |s: &String, i: usize| s.split(',').nth(i).map(|c| c.trim().to_string());
    let num = |c: Option<String>| c.and_then(|c| c.parse::<f64>().ok()).unwrap_or(0.0);
    let seen = samples
        .iter()
        .map(|s| num(col(s, 1)))
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let seen = seen.map_or("?".into(), |v| format!("{v}"));
    let mut text = format!("held {held}, nvidia-smi {seen}");
    if !samples.is_empty() {
        let n = samples.len() as f64;
        let avg = |i| samples.iter().map(|s| num(col(s, i))).sum::<f64>() / n;
        text += &format!(", enc {}% dec {}%", avg(2) as i64, avg(3) as i64);
        let vram = samples.iter().map(|s| num(col(s, 5))).fold(0.0, f64::max);
        if vram > 0.0 {
            text += &format!(", VRAM {vram} MiB");
        }
    }
    text
}

/// One line of the result table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The case.
    pub case: String,
    /// passed / FAILED / skipped, and why.
    pub result: String,
    /// Frames per second, or `-`.
    pub fps: String,
    /// Sessions held and seen, or `-`.
    pub sessions: String,
}

impl Row {
    /// A row of four cells.
    pub fn new(case: &str, result: &str, fps: &str, sessions: &str) -> Row {
        Row {
            case: case.into(),
            result: result.into(),
            fps: fps.into(),
            sessions: sessions.into(),
        }
    }

    /// Whether the row counts against the run: a case that ran and failed.
    pub fn failed(&self) -> bool {
        self.result.starts_with("FAILED")
    }
}

/// The table: a header line and a line per row.
pub fn table(rows: &[Row]) -> String {
    let line = |a: &str, b: &str, c: &str, d: &str| format!("{a:<13} | {b:<44} | {c:>8} | {d}\n");
    let mut text = line("case", "result", "fps", "sessions");
    for r in rows {
        text += &line(&r.case, &r.result, &r.fps, &r.sessions);
    }
    text
}

#[cfg(test)]
mod tests;
