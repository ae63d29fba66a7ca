//! One run of the smoke test: its settings, the rows of its table, and the helpers every
//! step uses to run `tessera` under the step limit and keep what it printed.
//!
//! Why apart from steps.rs and cases.rs: both add steps to the run; this holds what they share.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::checks::{Probe, Row};
use crate::programs::limited;

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
    /// The table's rows so far.
    pub rows: Vec<Row>,
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

    /// Frames, size and codec of `file` by `tessera probe` (zeros when it cannot be read).
    pub fn probe(&self, file: &Path) -> Probe {
        let mut cmd = self.tessera_cmd(&["probe"]);
        cmd.arg(file).arg("--json").stderr(Stdio::null());
        Probe::from_json(&self.to_file(cmd, "probe.json")).unwrap_or_default()
    }

    pub fn tessera_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.tessera);
        cmd.args(args);
        cmd
    }

    /// Runs `cmd` with its stdout into `OUT/name`; that text.
    pub fn to_file(&self, cmd: Command, name: &str) -> String {
        self.to_file_status(cmd, name, false).1
    }

    /// Runs `cmd` with its stdout (and its stderr too, if `both`) into `OUT/name`: how it
    /// ended (none: past the limit) and the text.
    pub fn to_file_status(
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
pub fn step(title: &str) {
    println!("\n==> {title}");
}
