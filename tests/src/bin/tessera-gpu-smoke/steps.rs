//! The GPU smoke test's steps: the NVML inventory, the NVDEC decode check, the transcode
//! cases (cases.rs) with `nvidia-smi` sampled meanwhile, the checks against wrong input, and
//! the table with its verdict. Each program runs
//! under the step limit (`--timeout`); what it printed is kept under the output directory.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use crate::cases::Case;
use crate::checks::{budgets_of, nvdec_result, table, Inventory, Row};
use crate::programs::{limited, on_path, Sampler};
use crate::smoke::{step, Smoke};

/// The cases that are skipped together when there is no card.
const ALL_CASES: [&str; 9] = [
    "nvdec",
    "probe",
    "same-size",
    "resize",
    "hevc",
    "10-bit",
    "ladder",
    "sessions",
    "av1",
];

impl Smoke {
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
        step("2. NVDEC decode check (in-process, then under RLIMIT_AS = 8 GiB), the card probe");
        self.nvdec();
        self.card_probe(mode, inv.cards);
        let sampler = Sampler::start(self.out.join("nvidia-smi.csv"));
        let (budgets, av1) = self.budgets();
        let ran = self.cases(&sampler, mode, &budgets, &av1);
        self.catches(mode, ran.0.as_ref(), ran.1.as_ref());
        sampler.stop();
        let after = self.tessera_cmd(&["gpu", "--json"]);
        let _ = self.to_file(after, "gpu-after.json");
        print!("\n{}", table(&self.rows));
        let failed: Vec<&str> = (self.rows.iter().filter(|r| r.failed()))
            .map(|r| r.case.as_str())
            .collect();
        if failed.is_empty() {
            println!("GPU smoke: PASSED: every case that ran passed every check, and every check caught its wrong input (--gpu {mode})");
            0
        } else {
            println!(
                "GPU smoke: FAILED: {} (logs under {})",
                failed.join(", "),
                self.out.display()
            );
            1
        }
    }

    /// Each card's NVENC budget and the cards whose NVDEC decodes AV1 (`tessera gpu --json`).
    fn budgets(&self) -> (BTreeMap<u64, u64>, BTreeSet<u64>) {
        let text = std::fs::read_to_string(self.out.join("gpu.json")).unwrap_or_default();
        budgets_of(&text)
    }

    /// The transcode cases; what the same-size and 10-bit cases left, for the catch checks.
    fn cases(
        &mut self,
        sampler: &Sampler,
        mode: &str,
        budgets: &BTreeMap<u64, u64>,
        av1: &BTreeSet<u64>,
    ) -> (Option<crate::cases::Ran>, Option<crate::cases::Ran>) {
        let clips = self.clips.clone();
        let clip = |name: &str| clips.join(name);
        let case = |name, clip: PathBuf, codec, height| Case {
            name,
            clip,
            codec,
            height,
            also: &[],
            segment_seconds: 2,
            ten_bit: false,
            fill: false,
        };
        let h264 = clip("h264-1080p.mp4");
        let plain = self.case(
            sampler,
            mode,
            budgets,
            &case("same-size", h264.clone(), "h264", None),
        );
        self.case(
            sampler,
            mode,
            budgets,
            &case("resize", h264.clone(), "h264", Some(720)),
        );
        self.case(
            sampler,
            mode,
            budgets,
            &case("hevc", h264.clone(), "hevc", None),
        );
        let ten = Case {
            ten_bit: true,
            ..case("10-bit", clip("hevc10-1080p.mp4"), "hevc", None)
        };
        let ten_bit = self.case(sampler, mode, budgets, &ten);
        let ladder = Case {
            also: &[720, 480],
            ..case("ladder", h264.clone(), "h264", None)
        };
        self.case(sampler, mode, budgets, &ladder);
        let sessions = Case {
            segment_seconds: 1,
            fill: true,
            ..case("sessions", h264, "h264", None)
        };
        self.case(sampler, mode, budgets, &sessions);
        if mode == "off" || !av1.is_empty() {
            let av1_case = case("av1", clip("av1-1080p.mp4"), "h264", None);
            self.case(sampler, mode, budgets, &av1_case);
        } else {
            let why = "skipped: no card here decodes AV1 on NVDEC (Ampere or later)";
            self.rows.push(Row::new("av1", why, "-", "-"));
        }
        (plain, ten_bit)
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

    /// The worker's card probe (`tessera gpu --probe`): on a card it must pass, NVENC
    /// included unless the cases run `--gpu decode`; on the self-test without a card it must
    /// fail (what keeps a card that cannot encode out after its probation).
    fn card_probe(&mut self, mode: &str, cards: usize) {
        let mut args = vec!["gpu", "--probe", "--device", "0"];
        if mode == "decode" {
            args.push("--decode-only");
        }
        let (status, text) = self.to_file_status(self.tessera_cmd(&args), "probe.txt", true);
        let passed = status.is_some_and(|s| s.success());
        let said = (text.lines().rev())
            .find(|l| l.contains("card probe"))
            .unwrap_or("no probe line");
        let said: String = said
            .trim_start_matches("error: ")
            .chars()
            .take(90)
            .collect();
        print!("{text}");
        let row = match (cards > 0, passed) {
            (true, true) => Row::new("probe", &format!("passed: {said}"), "-", "-"),
            (true, false) => Row::new("probe", &format!("FAILED: {said}"), "-", "-"),
            (false, false) => Row::new(
                "catch-probe",
                &format!("passed: caught without a card: {said}"),
                "-",
                "-",
            ),
            (false, true) => Row::new(
                "catch-probe",
                "FAILED: the probe passed without a card",
                "-",
                "-",
            ),
        };
        self.rows.push(row);
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
}
