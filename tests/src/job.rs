//! One `tessera transcode` invocation in its own temporary directory, and
//! the JSON report it writes.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tempfile::TempDir;

use crate::run::{run_tessera, Run};

/// The `--report FILE` JSON the binary writes (fields the tests rely on;
/// extra fields are ignored).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Report {
    /// Encoded video frames in the output.
    pub frames: u64,
    /// Segments the video was split into.
    pub segments: u32,
    /// Frames of each segment, in order.
    #[serde(default)]
    pub segment_frames: Vec<u64>,
    /// Wall-clock seconds of the whole transcode.
    pub wall_s: f64,
    /// Seconds before the encodes (probe, plan, split).
    #[serde(default)]
    pub prepare_s: f64,
    /// Seconds after the last segment (stitch, QC decode, delivery).
    #[serde(default)]
    pub finish_s: f64,
    /// Of `finish_s`, the QC gate's seconds.
    #[serde(default)]
    pub qc_s: f64,
    /// Peak resident memory of any child process, bytes.
    pub peak_child_rss_bytes: u64,
    /// Present with `--quality`.
    #[serde(default)]
    pub quality: Option<Quality>,
    /// Source packets rejected and frames concealed by the decoder.
    #[serde(default)]
    pub decode_errors: u64,
    /// What the user is told about an output delivered anyway.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Each output delivered.
    #[serde(default)]
    pub outputs: Vec<OutputEntry>,
}

/// One delivered output of the report.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct OutputEntry {
    /// Its size.
    pub bytes: u64,
    /// With a target quality: each segment's search, in segment order.
    #[serde(default)]
    pub target: Vec<Option<TargetEntry>>,
    /// The largest gap between a segment's searched and measured VMAF.
    #[serde(default)]
    pub target_vmaf_error: Option<f64>,
}

/// One segment's target-quality search.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct TargetEntry {
    /// The VMAF aimed at.
    pub target: f64,
    /// The rate factor kept.
    pub rate_factor: f64,
    /// The kept probe's VMAF.
    pub vmaf: f64,
    /// Every probe: rate factor and VMAF.
    pub probes: Vec<ProbeEntry>,
}

/// One probe of a search.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
pub struct ProbeEntry {
    /// The rate factor probed.
    pub rate_factor: f64,
    /// Its VMAF.
    pub vmaf: f64,
}

/// Quality figures in the report (with `--quality`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Quality {
    /// PSNR of output against source, dB.
    pub psnr: f64,
    /// SSIM of output against source, 0..1.
    pub ssim: f64,
    /// VMAF of output against source.
    #[serde(default)]
    pub vmaf: Option<Vmaf>,
}

/// The report's VMAF: the whole output, and each segment.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Vmaf {
    /// The whole output.
    pub pooled: VmafFigures,
    /// Each segment, in order.
    pub segments: Vec<VmafFigures>,
}

/// Per-frame VMAF pooled over some frames.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
pub struct VmafFigures {
    /// Frames pooled.
    pub frames: u64,
    /// Mean.
    pub mean: f64,
    /// 1st percentile.
    pub p1: f64,
    /// 5th percentile.
    pub p5: f64,
    /// The worst frame.
    pub min: f64,
}

/// A private directory layout for one transcode: `out/` holds only the
/// output (so leftovers next to it are visible), `work/` is `--work-dir`,
/// and the report goes to `report.json` beside them. Dropping the job
/// deletes everything unless `TESSERA_KEEP_TMP` is set.
#[derive(Debug)]
pub struct Job {
    _dir: Option<TempDir>,
    root: PathBuf,
    /// The input file passed to `tessera`.
    pub input: PathBuf,
    /// The output file (`out/<name>`).
    pub output: PathBuf,
    /// The `--work-dir` (`work/`).
    pub work: PathBuf,
    /// The `--report` path.
    pub report: PathBuf,
}

impl Job {
    /// Prepares directories for transcoding `input` to an output named
    /// `out_name` (its extension picks the container).
    pub fn new(input: &Path, out_name: &str) -> Job {
        let dir = tempfile::Builder::new()
            .prefix("tessera-test-")
            .tempdir()
            .expect("create temp dir");
        let root = dir.path().to_path_buf();
        for sub in ["out", "work"] {
            fs::create_dir(root.join(sub)).expect("create job subdir");
        }
        let dir = if std::env::var_os("TESSERA_KEEP_TMP").is_some() {
            eprintln!("keeping {}", dir.keep().display());
            None
        } else {
            Some(dir)
        };
        Job {
            _dir: dir,
            input: input.to_path_buf(),
            output: root.join("out").join(out_name),
            work: root.join("work"),
            report: root.join("report.json"),
            root,
        }
    }

    /// The job's temporary root directory (a place for extra files).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory the output is written into.
    pub fn out_dir(&self) -> PathBuf {
        self.root.join("out")
    }

    /// The standard arguments: H.264 at default quality with preset
    /// `veryfast`, 2 workers, the given segment length, our work dir and
    /// report, `--progress none` unless `extra` sets `--progress` (and H.264 unless it
    /// sets `--codec`); `extra`
    /// is appended.
    pub fn args(&self, segment_seconds: u32, extra: &[&str]) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec![
            "transcode".into(),
            self.input.clone().into(),
            "-o".into(),
            self.output.clone().into(),
            "--preset".into(),
            "veryfast".into(),
            "--segment-seconds".into(),
            segment_seconds.to_string().into(),
            "--workers".into(),
            "2".into(),
            "--work-dir".into(),
            self.work.clone().into(),
            "--report".into(),
            self.report.clone().into(),
        ];
        if !extra.contains(&"--codec") {
            a.extend(["--codec".into(), "h264".into()]);
        }
        if !extra.contains(&"--progress") {
            a.extend(["--progress".into(), "none".into()]);
        }
        a.extend(extra.iter().map(OsString::from));
        a
    }

    /// Runs `tessera` with [`Job::args`] and returns the finished run.
    pub fn run(&self, segment_seconds: u32, extra: &[&str]) -> Run {
        run_tessera(self.args(segment_seconds, extra))
    }

    /// Like [`Job::run`] but panics (with command and stderr) unless it
    /// exits 0 and the output file exists.
    pub fn run_ok(&self, segment_seconds: u32, extra: &[&str]) -> Run {
        let run = self.run(segment_seconds, extra);
        run.assert_success();
        assert!(
            self.output.is_file(),
            "tessera exited 0 but wrote no {}\n{}",
            self.output.display(),
            run.describe()
        );
        run
    }

    /// Parses the `--report` JSON; panics with the file's text if it is
    /// missing or does not match [`Report`].
    pub fn report(&self) -> Report {
        let text = fs::read_to_string(&self.report)
            .unwrap_or_else(|e| panic!("report {} unreadable: {e}", self.report.display()));
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("report does not match the contract ({e}):\n{text}"))
    }

    /// Asserts that `run` rejected the input cleanly: a non-zero exit code
    /// (not a signal, not Rust's panic code 101), no "panicked" in stderr,
    /// stderr naming the input path and giving a reason, nothing at all
    /// left in the output directory, and no files left in the work dir.
    pub fn assert_rejected(&self, run: &Run) {
        let mut p: Vec<String> = Vec::new();
        match run.status.code() {
            Some(0) => p.push("exit status 0 for a bad input".into()),
            Some(101) => p.push("exit code 101 (Rust panic)".into()),
            None => p.push(format!("killed by a signal or timeout ({})", run.status)),
            Some(_) => {}
        }
        if run.stderr.contains("panicked") {
            p.push("stderr shows a panic".into());
        }
        let path = self.input.to_string_lossy();
        if !run.stderr.contains(path.as_ref()) {
            p.push(format!("stderr does not name the input path {path}"));
        }
        let reason_letters = run
            .stderr
            .replace(path.as_ref(), "")
            .chars()
            .filter(char::is_ascii_alphabetic)
            .count();
        if reason_letters < 10 {
            p.push("stderr gives no reason beside the path".into());
        }
        if self.output.exists() {
            p.push(format!("output {} exists", self.output.display()));
        }
        let left = self.out_dir_entries();
        if !left.is_empty() {
            p.push(format!("output directory not empty: {left:?}"));
        }
        let work = self.work_files_left();
        if !work.is_empty() {
            p.push(format!("work dir not cleaned: {work:?}"));
        }
        assert!(
            p.is_empty(),
            "bad input {path} not rejected cleanly:\n  - {}\n{}",
            p.join("\n  - "),
            run.describe()
        );
    }

    /// Files (not directories) still under the work dir, relative paths,
    /// sorted. A finished or failed job must have cleaned its work area.
    pub fn work_files_left(&self) -> Vec<String> {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
            let Ok(entries) = fs::read_dir(dir) else {
                return;
            };
            for e in entries.flatten() {
                let path = e.path();
                if path.is_dir() {
                    walk(&path, base, out);
                } else {
                    let rel = path.strip_prefix(base).unwrap_or(&path);
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
        let mut files = Vec::new();
        walk(&self.work, &self.work, &mut files);
        files.sort();
        files
    }

    /// Names of everything in the output directory, sorted.
    pub fn out_dir_entries(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.out_dir())
            .expect("read output dir")
            .map(|e| {
                e.expect("dir entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }
}
