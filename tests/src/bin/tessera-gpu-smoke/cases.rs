//! The smoke test's transcode cases and the proof that its checks catch wrong input: each case
//! is a `tessera transcode --quality` of a clip, checked for frames, size, codec, PSNR against
//! the source, the decoder and encoders its segments reported, NVENC sessions against each
//! card's budget and (10-bit) pixel format and colour tags; then the same checks are run on
//! inputs that must fail them (a garbled copy of an output, the run's facts against the other
//! mode, a budget the sessions break, an 8-bit output as a 10-bit one).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::checks::{
    coding_problems, fps_text, pixel_problems, psnr_of, psnr_problem, session_problems,
    sessions_text, smi_problems, CaseOutcome, Coding, LogFacts, Row,
};
use crate::programs::{limited, Sampler};
use crate::smoke::{step, Smoke};

/// One case.
pub struct Case<'a> {
    /// Its name in the table.
    pub name: &'a str,
    /// The clip.
    pub clip: PathBuf,
    /// The requested codec.
    pub codec: &'a str,
    /// The main output's height (none: the source's).
    pub height: Option<u64>,
    /// Heights of the extra renditions.
    pub also: &'a [u64],
    /// `--segment-seconds`.
    pub segment_seconds: u32,
    /// Whether the output must be 10-bit with the source's colour tags.
    pub ten_bit: bool,
    /// Whether the sessions must fill the budget (the sessions case: more segments than it).
    pub fill: bool,
}

/// What a case left for the catch checks: its output, its source and its facts.
pub struct Ran {
    /// The main output.
    pub main: PathBuf,
    /// The clip.
    pub clip: PathBuf,
    /// Its decoders, encoders and sessions.
    pub coding: Coding,
}

impl Smoke {
    /// Runs `case` with `--gpu mode` against the cards' `budgets`; its row; what it left
    /// when it ran.
    pub fn case(
        &mut self,
        sampler: &Sampler,
        mode: &str,
        budgets: &BTreeMap<u64, u64>,
        case: &Case,
    ) -> Option<Ran> {
        let dir = self.out.join(case.name);
        std::fs::create_dir_all(&dir).expect("create the case's directory");
        let log = dir.join("transcode.log");
        let cmd = self.transcode_cmd(case, mode, &dir, &log);
        let before = sampler.count();
        step(&format!(
            "case {}: {} -> {} {} (+ {:?}) in {} s segments (--gpu {mode})",
            case.name,
            case.clip.display(),
            case.codec,
            case.height
                .map_or("source size".into(), |h| format!("{h}p")),
            case.also,
            case.segment_seconds
        ));
        let started = Instant::now();
        let status = limited(cmd, self.timeout);
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        let facts = LogFacts::of(&log_text);
        if !status.is_some_and(|s| s.success()) {
            let why = if status.is_none() || started.elapsed() >= self.timeout {
                format!("timed out after {} s", self.timeout.as_secs())
            } else {
                (facts.first_error.clone()).unwrap_or_else(|| format!("see {}", log.display()))
            };
            self.rows
                .push(Row::new(case.name, &format!("FAILED: {why}"), "-", "-"));
            let lines: Vec<&str> = log_text.lines().collect();
            println!("{}", lines[lines.len().saturating_sub(5)..].join("\n"));
            return None;
        }
        let (src, main) = (self.probe(&case.clip), self.probe(&dir.join("main.mp4")));
        let outcome = CaseOutcome {
            codec: case.codec,
            height: case.height,
            src_frames: src.frames,
            main: main.clone(),
            also: (case.also.iter())
                .map(|h| (*h, self.probe(&dir.join(format!("also-{h}.mp4")))))
                .collect(),
            gpu_segments: facts.gpu_segments,
            mode,
        };
        let report = std::fs::read_to_string(dir.join("report.json")).unwrap_or_default();
        let psnr = psnr_of(&report);
        let coding = Coding::of(&log_text);
        let held = if case.fill { coding.segments } else { 0 };
        let mut problems = outcome.problems() + &psnr_problem(psnr);
        problems += &coding_problems(&coding, mode);
        problems += &session_problems(&coding.held, budgets, held, mode);
        if case.ten_bit {
            problems += &pixel_problems(&main, &src);
        }
        let samples = sampler.since(before);
        problems += &smi_problems(&samples, budgets.values().sum(), mode);
        let result = if problems.is_empty() {
            format!(
                "passed ({} frames, {:.1} dB, {} GPU segments)",
                outcome.src_frames,
                psnr.unwrap_or(0.0),
                facts.gpu_segments
            )
        } else {
            format!("FAILED:{problems}")
        };
        let sessions = sessions_text(facts.sessions_held, &samples);
        self.rows
            .push(Row::new(case.name, &result, &fps_text(&report), &sessions));
        Some(Ran {
            main: dir.join("main.mp4"),
            clip: case.clip.clone(),
            coding,
        })
    }

    /// The `tessera transcode` of `case`, its log in `log`.
    fn transcode_cmd(&self, case: &Case, mode: &str, dir: &Path, log: &Path) -> Command {
        let preset = if mode == "require" { "p4" } else { "veryfast" };
        let mut cmd = Command::new(&self.tessera);
        cmd.arg("transcode")
            .arg(&case.clip)
            .arg("-o")
            .arg(dir.join("main.mp4"));
        let seconds = case.segment_seconds.to_string();
        cmd.args(["--gpu", mode, "--codec", case.codec, "--preset", preset]);
        cmd.args([
            "--segment-seconds",
            &seconds,
            "--progress",
            "none",
            "--quality",
        ]);
        cmd.arg("--report").arg(dir.join("report.json"));
        if let Some(h) = case.height {
            cmd.args(["--height", &h.to_string()]);
        }
        for h in case.also {
            let path = dir.join(format!("also-{h}.mp4"));
            cmd.arg("--also").arg(format!("{h}={}", path.display()));
        }
        cmd.env("TESSERA_LOG", "info")
            .stderr(File::create(log).expect("create the log"));
        cmd
    }

    /// The checks on inputs that must fail them, from what `plain` (an 8-bit case) and
    /// `ten_bit` left: each row passes when its check caught the wrong input.
    pub fn catches(&mut self, mode: &str, plain: Option<&Ran>, ten_bit: Option<&Ran>) {
        step("the checks against wrong input (each must catch it)");
        let Some(plain) = plain else {
            let why = "skipped: the same-size case did not run";
            for name in ["catch-psnr", "catch-coding", "catch-session", "catch-10bit"] {
                self.rows.push(Row::new(name, why, "-", "-"));
            }
            return;
        };
        let garbled = self.out.join("garbled.mp4");
        let psnr = match scramble(&plain.main, &garbled) {
            Ok(()) => {
                let mut cmd = Command::new(&self.tessera);
                cmd.arg("quality")
                    .arg(&plain.clip)
                    .arg(&garbled)
                    .arg("--json");
                psnr_of(&self.to_file(cmd, "garbled-quality.json"))
            }
            Err(e) => {
                println!("garbling {}: {e}", plain.main.display());
                None
            }
        };
        self.caught("catch-psnr", psnr_problem(psnr), "a garbled copy");
        // The run's facts as if the other mode had been asked for.
        let other = if mode == "off" { "require" } else { "off" };
        let coding = coding_problems(&plain.coding, other);
        self.caught(
            "catch-coding",
            coding,
            &format!("its coding as --gpu {other}"),
        );
        let (held, budgets) = if mode == "require" {
            let zero = plain.coding.held.keys().map(|c| (*c, 0)).collect();
            (plain.coding.held.clone(), zero)
        } else {
            (plain.coding.held.clone(), BTreeMap::from([(0, 4)]))
        };
        let sessions = session_problems(&held, &budgets, 10, "require");
        self.caught(
            "catch-session",
            sessions,
            "sessions against a budget they break",
        );
        let pixel = match ten_bit {
            Some(t) => pixel_problems(&self.probe(&plain.main), &self.probe(&t.clip)),
            None => String::new(),
        };
        self.caught("catch-10bit", pixel, "an 8-bit output as a 10-bit one");
    }

    /// A row that passes when `problems` names what the check caught in `what`.
    fn caught(&mut self, name: &str, problems: String, what: &str) {
        let result = if problems.is_empty() {
            format!("FAILED: {what} passed the check")
        } else {
            let shown: String = problems.trim().chars().take(60).collect();
            format!("passed: caught in {what}: {shown}")
        };
        self.rows.push(Row::new(name, &result, "-", "-"));
    }
}

/// A copy of `from` at `to` with 2% of its bytes, from 45% in, scrambled (XOR 0x55): a file
/// that still opens and decodes, with garbled pictures.
fn scramble(from: &Path, to: &Path) -> std::io::Result<()> {
    let mut bytes = std::fs::read(from)?;
    let start = bytes.len() * 45 / 100;
    let end = start + bytes.len() / 50;
    for b in &mut bytes[start..end] {
        *b ^= 0x55;
    }
    std::fs::write(to, bytes)
}
