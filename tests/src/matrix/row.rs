//! Running one matrix case through `tessera` and the oracle, as a table row
//! that says pass or fail and why, without panicking.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

use super::axes::Labels;
use super::edges::{EdgeCase, EDGE_SEGMENT_SECONDS};
use super::field::{FieldCase, FIELD_SEGMENT_SECONDS};
use super::{Case, MATRIX_SEED};
use crate::check::measure_transcode;
use crate::job::Job;
use crate::probe::frame_count;
use crate::run::{run_command, Run};

/// Segment length passed to `tessera` (s): each clip gets several segments.
pub const SEGMENT_SECONDS: u32 = 1;
/// Reasons longer than this are cut in table rows.
const REASON_MAX: usize = 200;

impl Case {
    /// The labels of the case's four axes.
    pub fn labels(&self) -> Labels {
        Labels {
            container: self.container.label(),
            video: self.video.label(),
            audio: self.audio.label(),
            timing: self.timing.label(),
        }
    }
}

/// The outcome of one case.
#[derive(Debug, Clone)]
pub struct Row {
    /// The case's name.
    pub name: String,
    /// What the case is.
    pub labels: Labels,
    /// Whether tessera succeeded and every invariant held.
    pub passed: bool,
    /// Why it failed: tessera's `error:` line, or the violated invariants
    /// (empty when it passed).
    pub problems: Vec<String>,
    /// Decoded source video frames, when known.
    pub frames_expected: Option<u64>,
    /// Decoded output video frames, when there is an output.
    pub frames_got: Option<u64>,
    /// Largest difference of a frame's timestamp (from the presentation
    /// start) between output and source, seconds, over the frames both
    /// have.
    pub max_ts_error: Option<f64>,
    /// Oracle PSNR of the output against the source (dB).
    pub psnr: Option<f64>,
    /// Time spent on the case (build, transcode, oracle).
    pub elapsed: Duration,
}

impl Row {
    /// The first problem, on one line, or `""` when it passed.
    pub fn reason(&self) -> String {
        let first = self
            .problems
            .first()
            .map_or("", |p| p.lines().next().unwrap_or(""));
        let more = match self.problems.len() {
            0 | 1 => String::new(),
            n => format!(" (+{} more)", n - 1),
        };
        let mut r = format!("{}{more}", shorten_paths(first));
        if r.len() > REASON_MAX {
            let mut cut = REASON_MAX;
            while !r.is_char_boundary(cut) {
                cut -= 1;
            }
            r.truncate(cut);
            r.push_str("...");
        }
        r
    }

    /// The row as a markdown table line (see [`TABLE_HEADER`]).
    pub fn markdown(&self) -> String {
        let c = &self.labels;
        let opt = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
        let cells = [
            format!("`{}`", self.name),
            c.container.to_owned(),
            c.video.to_owned(),
            c.audio.to_owned(),
            c.timing.to_owned(),
            if self.passed { "pass" } else { "**FAIL**" }.to_owned(),
            format!("{}/{}", opt(self.frames_expected), opt(self.frames_got)),
            self.max_ts_error
                .map_or("-".into(), |e| format!("{:.1}", e * 1000.0)),
            self.psnr.map_or("-".into(), |p| format!("{p:.1}")),
            format!("{:.0}", self.elapsed.as_secs_f64()),
            self.reason().replace('|', "\\|"),
        ];
        format!("| {} |", cells.join(" | "))
    }
}

/// Markdown table header matching [`Row::markdown`].
pub const TABLE_HEADER: &str = "| case | container | video | audio | timing | result \
    | frames exp/got | max ts err (ms) | PSNR (dB) | time (s) | reason |\n\
    |---|---|---|---|---|---|---|---|---|---|---|";

/// `N passed, M failed`.
pub fn summary_line(rows: &[Row]) -> String {
    let passed = rows.iter().filter(|r| r.passed).count();
    format!("{passed} passed, {} failed", rows.len() - passed)
}

/// Replaces absolute paths of two or more components by `.../<file name>`
/// (temp and fixture dirs say nothing and crowd out the reason).
fn shorten_paths(line: &str) -> String {
    line.split(' ')
        .map(|word| {
            let core = word.trim_end_matches([':', ',', ';', ')']);
            let name = core.rsplit('/').next().unwrap_or(core);
            if core.starts_with('/') && core.matches('/').count() >= 2 {
                format!(".../{name}{}", &word[core.len()..])
            } else {
                word.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn panic_text(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "panic without a message".into())
}

/// The line of tessera's stderr that says why it failed: the last
/// `error:` line, else a panic line, else the last line.
fn error_line(run: &Run) -> String {
    if run.timed_out {
        return format!("timed out after {:.0} s", run.elapsed.as_secs_f64());
    }
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("error"))
        .or_else(|| lines.iter().find(|l| l.contains("panicked")))
        .or(lines.last())
        .copied()
        .unwrap_or("no stderr");
    format!(
        "exit {}: {line}",
        run.status.code().map_or("signal".into(), |c| c.to_string())
    )
}

/// Largest |output - source| frame timestamp (from each file's presentation
/// start) over the frames both have.
fn max_ts_error(src: &[f64], out: &[f64]) -> Option<f64> {
    src.iter()
        .zip(out)
        .map(|(s, o)| (s - o).abs())
        .reduce(f64::max)
}

/// Builds the case's clip, transcodes it with `tessera` (1 s segments, 2
/// workers, H.264 MP4 out) and applies every invariant of
/// [`crate::check`]. Never panics: a failing ffmpeg build, tessera error or
/// oracle error becomes a failed row with the reason.
pub fn check(case: &Case) -> Row {
    check_with(case, &matrix_args())
}

/// [`check`] with `extra` flags for `tessera transcode` (e.g. a target quality, whose
/// segments are cut at scene changes): the same oracle must hold.
pub fn check_with(case: &Case, extra: &[String]) -> Row {
    check_built(
        (case.name(), case.labels()),
        || case.build(),
        (SEGMENT_SECONDS, extra),
        None,
    )
}

/// The extra transcode flags of a matrix run: `TESSERA_MATRIX_ARGS`, split at spaces
/// (scripts/input-matrix.sh passes it on).
fn matrix_args() -> Vec<String> {
    std::env::var("TESSERA_MATRIX_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// The target VMAF `TESSERA_MATRIX_ARGS` asks for (`--target-vmaf V`), for the farm's runs
/// of the same cases, which take it as the API's output `target`.
pub fn matrix_target() -> Option<f64> {
    let args = matrix_args();
    let at = args.iter().position(|a| a == "--target-vmaf")?;
    args.get(at + 1)?.parse().ok()
}

/// [`check`] for a recording from the field, at the production segment length; a class that
/// must be reported (timestamps that jump back) also needs its warning in the report.
pub fn check_field(case: &FieldCase) -> Row {
    check_built(
        (case.name(), case.class.labels()),
        || case.build(),
        (FIELD_SEGMENT_SECONDS, &matrix_args()),
        case.class.expected_warning(),
    )
}

/// [`check`] for a source at the edges of sync (issue 44), at [`EDGE_SEGMENT_SECONDS`]; a
/// case whose source the farm must repair needs the repair's warning in the report.
pub fn check_edge(case: &EdgeCase) -> Row {
    check_built(
        (case.name(), case.labels()),
        || case.build(),
        (EDGE_SEGMENT_SECONDS, &matrix_args()),
        case.expected_warning(),
    )
}

fn check_built(
    (name, labels): (String, Labels),
    build: impl FnOnce() -> std::path::PathBuf + std::panic::UnwindSafe,
    (segment_seconds, extra): (u32, &[String]),
    warning: Option<&str>,
) -> Row {
    let start = Instant::now();
    let mut row = Row {
        name,
        labels,
        passed: false,
        problems: Vec::new(),
        frames_expected: None,
        frames_got: None,
        max_ts_error: None,
        psnr: None,
        elapsed: Duration::ZERO,
    };
    let src = match catch_unwind(build) {
        Ok(p) => p,
        Err(e) => {
            row.problems
                .push(format!("fixture build failed: {}", panic_text(&*e)));
            row.elapsed = start.elapsed();
            return row;
        }
    };
    row.frames_expected = catch_unwind(|| frame_count(&src)).ok();
    let job = Job::new(&src, "out.mp4");
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let run = job.run(segment_seconds, &extra);
    if !run.status.success() || run.timed_out {
        row.problems.push(error_line(&run));
    } else if !job.output.is_file() {
        row.problems.push("exit 0 but no output file".into());
    } else {
        match catch_unwind(AssertUnwindSafe(|| measure(&src, job))) {
            Ok((c, problems)) => {
                row.frames_got = Some(c.out.frame_count);
                row.max_ts_error = max_ts_error(&c.src.rel_times(), &c.out.rel_times());
                row.psnr = Some(c.psnr);
                row.problems = problems;
                // Every source here is a clean encode (a cut's undecodable head is not damage):
                // nothing may be charged against `source_corrupt`.
                if c.report.decode_errors > 0 {
                    row.problems.push(format!(
                        "{} decode errors charged to a clean source",
                        c.report.decode_errors
                    ));
                }
                if let Some(w) = warning {
                    if !c.report.warnings.iter().any(|r| r.contains(w)) {
                        row.problems.push(format!(
                            "no warning saying \"{w}\" in the report: {:?}",
                            c.report.warnings
                        ));
                    }
                }
                row.passed = row.problems.is_empty();
            }
            Err(e) => row
                .problems
                .push(format!("oracle failed: {}", panic_text(&*e))),
        }
    }
    row.elapsed = start.elapsed();
    row
}

fn measure(src: &Path, job: Job) -> (crate::check::Comparison, Vec<String>) {
    measure_transcode(src, job, 2)
}

/// First line of `program args` stdout, or `"unknown"`.
fn first_line(program: &str, args: &[&str]) -> String {
    let run = run_command(program.as_ref(), args, Duration::from_secs(30));
    run.stdout
        .lines()
        .next()
        .unwrap_or("unknown")
        .trim()
        .to_owned()
}

/// Today's UTC date as `YYYY-MM-DD`.
fn utc_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut date = tessera_model::civil::utc_datetime(secs as i64);
    date.truncate(10);
    date
}

/// The whole report as markdown: a header saying how it was made (date,
/// FFmpeg version, tessera commit, seed), the table and the summary line.
pub fn markdown_report(rows: &[Row]) -> String {
    let ffmpeg = first_line("ffmpeg", &["-hide_banner", "-version"]);
    let ffmpeg: String = ffmpeg.split(' ').take(3).collect::<Vec<_>>().join(" ");
    let bin = crate::run::tessera_bin();
    let commit = first_line("git", &["describe", "--always", "--dirty"]);
    let mut md = format!(
        "# Input matrix\n\n\
         Generated by `scripts/input-matrix.sh` (test `full_matrix` in \
         `tests/tests/input_matrix.rs`, generator `tests/src/matrix.rs`, seed \
         `{MATRIX_SEED:#x}`) on {} with `{}` built from `{commit}` \
         (`-dirty`: with uncommitted changes), and `{ffmpeg}`.\n\n\
         Each clip is made with the ffmpeg CLI and transcoded with `tessera transcode \
         --segment-seconds {SEGMENT_SECONDS} --workers 2 --codec h264 --preset veryfast` \
         to MP4; the oracle (ffprobe, ffmpeg psnr) requires the exact frame count, every \
         frame timestamp within one frame, the A/V offset and audio duration kept, size, \
         rotation and colour kept, PSNR >= 30 dB and at least 2 segments. \
         The display aspect and the audio channels and layout must be the source's; the A/V \
         offset is measured from the first presented samples (packets an edit list discards \
         do not count, a decoder's delay does not move a track). \
         The rows after the cross product are recordings from the field \
         (`tests/src/matrix/field.rs`): broadcast, legacy and phone sources of 21-29 s \
         (seeded), cut at the production default of {FIELD_SEGMENT_SECONDS} s segments, \
         so the halved last round puts cuts between keyframes (inside open GOPs). \
         The last rows are sources at the edges of sync (`tests/src/matrix/edges.rs`, \
         segments of {EDGE_SEGMENT_SECONDS} s): recordings cut at a seeded transport packet or \
         pack offset (MPEG-TS and MPEG-PS, H.264, HEVC and MPEG-2), every channel layout up to \
         7.1 and eight mono tracks, two recordings joined with an audio overlap or gap of \
         seeded size, and the three inputs of issue 44. Every source carries a white flash and \
         a beep at each whole second; the sync oracle (`tests/src/sync.rs`) finds every pair \
         in source and output and requires each output pair's A/V offset to equal the \
         source's within one frame, from the first second to the last. \
         No case may have a decode error charged against `source_corrupt` (every source is a \
         clean encode; a cut's undecodable head is not damage). \
         \"max ts err\" compares frames pairwise; \"reason\" is tessera's error line or the \
         first violated invariant.\n\n",
        utc_date(),
        bin.display()
    );
    md.push_str(TABLE_HEADER);
    md.push('\n');
    for r in rows {
        md.push_str(&r.markdown());
        md.push('\n');
    }
    md.push_str(&format!("\n{}\n", summary_line(rows)));
    md
}
