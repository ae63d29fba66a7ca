//! The transcode invariants of a `tessera transcode` run: what [`crate::playback::compare_media`]
//! checks of the output against its source, plus the report (frames, segments, timings) and
//! the output and work directories left clean. All violations are collected and reported
//! together.

use std::fmt::Write as _;
use std::path::Path;

use crate::job::{Job, Report};
use crate::playback::{compare_media, Summary};
use crate::run::Run;

/// What [`check_transcode`] measured, for test-specific extra assertions.
/// It owns the [`Job`], so the output stays on disk while it lives.
#[derive(Debug)]
pub struct Comparison {
    /// The transcode (output path, report, temp dir).
    pub job: Job,
    /// The source.
    pub src: Summary,
    /// The output.
    pub out: Summary,
    /// The report the binary wrote.
    pub report: Report,
    /// Oracle PSNR of output against source (dB).
    pub psnr: f64,
}

/// Checks a finished, successful transcode of `src` by `job` against all
/// the invariants and panics listing every violation (with the command and
/// its stderr). `min_segments` is the least segment count the report must
/// show.
pub fn check_transcode(src: &Path, job: Job, run: &Run, min_segments: u32) -> Comparison {
    let (c, p) = measure_transcode(src, job, min_segments);
    if !p.is_empty() {
        let mut msg = format!(
            "{} invariant(s) violated transcoding {}:\n",
            p.len(),
            src.display()
        );
        for line in &p {
            let _ = writeln!(msg, "  - {line}");
        }
        panic!("{msg}{}\nreport: {:?}", run.describe(), c.report);
    }
    c
}

/// Measures a finished, successful transcode of `src` by `job` like
/// [`check_transcode`], but returns the violated invariants (empty when all
/// hold) instead of panicking on them. It still panics when the oracle
/// itself cannot run (ffprobe fails, no report).
pub fn measure_transcode(src: &Path, job: Job, min_segments: u32) -> (Comparison, Vec<String>) {
    let s = Summary::of(src);
    let o = Summary::of(&job.output);
    let report = job.report();
    let mut p: Vec<String> = Vec::new();
    if report.frames != s.frame_count {
        p.push(format!(
            "report frames {} != source frames {}",
            report.frames, s.frame_count
        ));
    }
    if report.segments < min_segments {
        p.push(format!(
            "report segments {} < {min_segments}: not split",
            report.segments
        ));
    }
    // The encodes run between preparing and finishing: the fixed overhead the benchmark
    // reads is a part of the wall time, never all of it.
    if !(report.prepare_s > 0.0
        && report.finish_s > 0.0
        && report.prepare_s + report.finish_s < report.wall_s)
    {
        p.push(format!(
            "report prepare_s {} + finish_s {} not within wall_s {}",
            report.prepare_s, report.finish_s, report.wall_s
        ));
    }
    // The QC gate checked the output, after the last segment.
    if !(report.qc_s > 0.0 && report.qc_s < report.finish_s) {
        p.push(format!(
            "report qc_s {} not within finish_s {}",
            report.qc_s, report.finish_s
        ));
    }
    let db = compare_media(&s, &o, &mut p);
    let entries = job.out_dir_entries();
    let name = job
        .output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    if entries.len() != 1 || Some(&entries[0]) != name.as_ref() {
        p.push(format!(
            "output dir should hold only the output, holds {entries:?}"
        ));
    }
    let work = job.work_files_left();
    if !work.is_empty() {
        p.push(format!("work dir not cleaned after success: {work:?}"));
    }
    let c = Comparison {
        job,
        src: s,
        out: o,
        report,
        psnr: db,
    };
    (c, p)
}

/// Transcodes fixture file `src` to `out_name` with `segment_seconds`
/// segments (plus `extra` arguments) and checks every invariant, requiring
/// at least two segments.
pub fn transcode_and_check(
    src: &Path,
    out_name: &str,
    segment_seconds: u32,
    extra: &[&str],
) -> Comparison {
    let job = Job::new(src, out_name);
    let run = job.run_ok(segment_seconds, extra);
    check_transcode(src, job, &run, 2)
}
