//! The GPU smoke test's steps: the NVML inventory, the NVDEC decode check, the five
//! transcode cases with `nvidia-smi` sampled meanwhile, and the table. Each program runs
//! under the step limit (`--timeout`); what it printed is kept under the output directory.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::checks::{
    fps_text, nvdec_result, sessions_text, table, CaseOutcome, Inventory, LogFacts, Probe, Row,
};
use crate::programs::{limited, on_path, Sampler};

/// The cases that are skipped together when there is no card.
const ALL_CASES: [&str; 6] = ["nvdec", "same-size", "resize", "hevc", "10-bit", "ladder"];

/// One run of the smoke test.
pub struct Smoke {
    /// The `tessera` binary.
    pub tessera: PathBuf,
    /// `h264-1080p.mp4` and `hevc10-1080p.mp4`.
    pub clips: PathBuf,
    /// Where logs, reports and outputs go.
    pub out: PathBuf,
    /// The limit of each step.
    pub timeout: Duration,
    /// Cases with `--gpu off`, no card needed.
    pub self_test: bool,
    rows: Vec<Row>,
}

impl Smoke {
    /// A smoke run with these settings.
    pub fn new(
        tessera: PathBuf,
        clips: PathBuf,
        out: PathBuf,
        timeout: Duration,
        self_test: bool,
    ) -> Smoke {
        Smoke {
            tessera,
            clips,
            out,
            timeout,
            self_test,
            rows: Vec::new(),
        }
    }

    /// Runs every step and prints the table: 0 when every case that could run passed (or
    /// there is no card, said plainly), 1 otherwise.
    pub fn run(&mut self) -> u8 {
        step("1. driver, cards and budgets (NVML)");
        let inv = self.inventory();
        if inv.cards == 0 && !self.self_test {
            println!("NOT RUN ON A CARD: {}", inv.no_card_reason());
            for case in ALL_CASES {
                self.rows.push(Row::new(case, "skipped: no card", "-", "-"));
            }
            print!("\n{}", table(&self.rows));
            return 0;
        }
        let mode = inv.mode(self.self_test);
        println!(
            "cards: {}; NVENC sessions available: {}; cases run with --gpu {mode}",
            inv.cards, inv.nvenc_sessions
        );
        step("2. NVDEC decode check (in-process, then under RLIMIT_AS = 8 GiB)");
        self.nvdec();
        let sampler = Sampler::start(self.out.join("nvidia-smi.csv"));
        let (h264, hevc10) = (
            self.clips.join("h264-1080p.mp4"),
            self.clips.join("hevc10-1080p.mp4"),
        );
        self.case(&sampler, mode, ("same-size", &h264, "h264", None), &[]);
        self.case(&sampler, mode, ("resize", &h264, "h264", Some(720)), &[]);
        self.case(&sampler, mode, ("hevc", &h264, "hevc", None), &[]);
        self.case(&sampler, mode, ("10-bit", &hevc10, "hevc", None), &[]);
        self.case(&sampler, mode, ("ladder", &h264, "h264", None), &[720, 480]);
        sampler.stop();
        let after = self.tessera_cmd(&["gpu", "--json"]);
        let _ = self.to_file(after, "gpu-after.json");
        print!("\n{}", table(&self.rows));
        if self.rows.iter().any(Row::failed) {
            println!("GPU smoke: FAILED (logs under {})", self.out.display());
            1
        } else {
            println!("GPU smoke: every case passed");
            0
        }
    }

    /// `nvidia-smi`'s view (when it is here) and `tessera gpu`, printed; `tessera gpu
    /// --json`, read.
    fn inventory(&self) -> Inventory {
        if on_path("nvidia-smi") {
            let query = "--query-gpu=index,name,pci.bus_id,driver_version,memory.total,\
                         compute_mode,encoder.stats.sessionCount";
            let mut smi = Command::new("nvidia-smi");
            smi.args([query, "--format=csv"]);
            let _ = limited(smi, self.timeout);
        } else {
            println!("nvidia-smi not found (NVML is still read through libnvidia-ml)");
        }
        let text = self.to_file(self.tessera_cmd(&["gpu"]), "gpu.txt");
        print!("{text}");
        Inventory::from_json(&self.to_file(self.tessera_cmd(&["gpu", "--json"]), "gpu.json"))
    }

    /// The NVDEC check of the H.264 clip against its frame count, then the same under an
    /// 8 GiB address-space limit (reported, not counted).
    fn nvdec(&mut self) {
        let clip = self.clips.join("h264-1080p.mp4");
        let want = self.probe(&clip).frames;
        if self.self_test {
            self.rows
                .push(Row::new("nvdec", "skipped: self-test", "-", "-"));
            return;
        }
        let clip_arg = clip.to_string_lossy().into_owned();
        let args = ["gpu", "--nvdec-check", clip_arg.as_str(), "--device", "0"];
        let (status, text) = self.to_file_status(self.tessera_cmd(&args), "nvdec.txt", true);
        let row = match status {
            Some(s) if s.success() => {
                let (result, fps, _) = nvdec_result(&text, want);
                Row::new("nvdec", &result, &fps, "-")
            }
            _ => Row::new("nvdec", "FAILED (see nvdec.txt)", "-", "-"),
        };
        self.rows.push(row);
        print!("{text}");
        if on_path("prlimit") {
            let mut limited_as = Command::new("prlimit");
            limited_as
                .arg(format!("--as={}", 8u64 << 30))
                .arg(&self.tessera)
                .args(args);
            let (status, text) = self.to_file_status(limited_as, "nvdec-rlimit.txt", true);
            if status.is_some_and(|s| s.success()) {
                println!(
                    "under RLIMIT_AS 8 GiB: context created (the RSS bound of GPU children is \
                     a choice, not a need)"
                );
            } else {
                println!(
                    "under RLIMIT_AS 8 GiB: FAILED as the review predicted (GPU children run \
                     without it):"
                );
                let lines: Vec<&str> = text.lines().collect();
                println!("{}", lines[lines.len().saturating_sub(3)..].join("\n"));
            }
        }
    }

    /// One case: `tessera transcode` of `clip` to `codec` (at `height`, plus a rendition per
    /// height in `also`), checked for frames, size, codec and GPU segments.
    fn case(
        &mut self,
        sampler: &Sampler,
        mode: &str,
        what: (&str, &Path, &str, Option<u64>),
        also: &[u64],
    ) {
        let (name, clip, codec, height) = what;
        let dir = self.out.join(name);
        std::fs::create_dir_all(&dir).expect("create the case's directory");
        let preset = if mode == "require" { "p4" } else { "veryfast" };
        let mut cmd = Command::new(&self.tessera);
        cmd.arg("transcode")
            .arg(clip)
            .arg("-o")
            .arg(dir.join("main.mp4"));
        cmd.args([
            "--gpu",
            mode,
            "--codec",
            codec,
            "--preset",
            preset,
            "--segment-seconds",
            "2",
            "--progress",
            "none",
        ]);
        cmd.arg("--report").arg(dir.join("report.json"));
        if let Some(h) = height {
            cmd.args(["--height", &h.to_string()]);
        }
        for h in also {
            cmd.arg("--also").arg(format!(
                "{h}={}",
                dir.join(format!("also-{h}.mp4")).display()
            ));
        }
        let log = dir.join("transcode.log");
        cmd.env("TESSERA_LOG", "info")
            .stderr(File::create(&log).expect("create the log"));
        let before = sampler.count();
        let size = height.map_or("source size".to_string(), |h| h.to_string());
        let extra: Vec<String> = also.iter().map(u64::to_string).collect();
        let extra = if also.is_empty() {
            String::new()
        } else {
            format!("(+ {}) ", extra.join(" "))
        };
        step(&format!(
            "case {name}: {} -> {codec} {size} {extra}(--gpu {mode})",
            clip.display()
        ));
        let started = Instant::now();
        let status = limited(cmd, self.timeout);
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        let facts = LogFacts::of(&log_text);
        if !status.is_some_and(|s| s.success()) {
            let why = match status {
                None => format!("timed out after {} s", self.timeout.as_secs()),
                Some(_) if started.elapsed() >= self.timeout => {
                    format!("timed out after {} s", self.timeout.as_secs())
                }
                Some(_) => facts
                    .first_error
                    .clone()
                    .unwrap_or_else(|| format!("see {}", log.display())),
            };
            self.rows
                .push(Row::new(name, &format!("FAILED: {why}"), "-", "-"));
            let lines: Vec<&str> = log_text.lines().collect();
            println!("{}", lines[lines.len().saturating_sub(5)..].join("\n"));
            return;
        }
        let outcome = CaseOutcome {
            codec,
            height,
            src_frames: self.probe(clip).frames,
            main: self.probe(&dir.join("main.mp4")),
            also: also
                .iter()
                .map(|h| (*h, self.probe(&dir.join(format!("also-{h}.mp4")))))
                .collect(),
            gpu_segments: facts.gpu_segments,
            mode,
        };
        let fps = fps_text(&std::fs::read_to_string(dir.join("report.json")).unwrap_or_default());
        let sessions = sessions_text(facts.sessions_held, &sampler.since(before));
        let problems = outcome.problems();
        let result = if problems.is_empty() {
            format!(
                "passed ({} frames, {} GPU segments)",
                outcome.src_frames, facts.gpu_segments
            )
        } else {
            format!("FAILED:{problems}")
        };
        self.rows.push(Row::new(name, &result, &fps, &sessions));
    }

    /// Frames, size and codec of `file` by `tessera probe` (zeros when it cannot be read).
    fn probe(&self, file: &Path) -> Probe {
        let mut cmd = self.tessera_cmd(&["probe"]);
        cmd.arg(file).arg("--json").stderr(Stdio::null());
        Probe::from_json(&self.to_file(cmd, "probe.json")).unwrap_or_default()
    }

    fn tessera_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.tessera);
        cmd.args(args);
        cmd
    }

    /// Runs `cmd` with its stdout into `OUT/name`; that text.
    fn to_file(&self, cmd: Command, name: &str) -> String {
        self.to_file_status(cmd, name, false).1
    }

    /// Runs `cmd` with its stdout (and its stderr too, if `both`) into `OUT/name`: how it
    /// ended (none: past the limit) and the text.
    fn to_file_status(
        &self,
        mut cmd: Command,
        name: &str,
        both: bool,
    ) -> (Option<ExitStatus>, String) {
        let path = self.out.join(name);
        let file = File::create(&path).expect("create an output file");
        if both {
            cmd.stderr(file.try_clone().expect("clone a file handle"));
        }
        cmd.stdout(file);
        let status = limited(cmd, self.timeout);
        (status, std::fs::read_to_string(&path).unwrap_or_default())
    }
}

/// Prints a step's title.
fn step(title: &str) {
    println!("\n==> {title}");
}
