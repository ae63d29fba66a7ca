//! The generated input matrix (`tessera_tests::matrix`): a fixed-seed CI
//! sample that must pass, generated bad inputs that must be refused, and
//! (with `TESSERA_FULL_MATRIX=1`, see `scripts/input-matrix.sh`) the whole
//! matrix as a table.

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use tessera_tests::matrix::{
    bad_inputs, check, check_edge, check_field, check_with, edge_cases, edge_cases_with_seed,
    edge_sample, field_cases, markdown_report, matrix, sample, summary_line, Audio, Container,
    EdgeClass, FieldClass, Row, Timing, Video, TABLE_HEADER,
};
use tessera_tests::Job;

/// Seed and size of the CI sample: one case per container plus two more,
/// a few minutes on two cores.
const SAMPLE_SEED: u64 = 2024;
const SAMPLE_SIZE: usize = 12;

/// Runs `cases` one by one (the transcodes use both cores), printing each
/// row as it finishes.
fn run_rows(cases: &[tessera_tests::matrix::Case]) -> Vec<Row> {
    println!("{TABLE_HEADER}");
    cases.iter().map(|c| printed(check(c))).collect()
}

/// [`run_rows`] for recordings from the field.
fn run_field_rows(cases: &[tessera_tests::matrix::FieldCase]) -> Vec<Row> {
    cases.iter().map(|c| printed(check_field(c))).collect()
}

fn printed(row: Row) -> Row {
    println!("{}", row.markdown());
    row
}

/// The generator keeps only valid pairs, stays in size and covers every
/// value of every axis several times; names are unique.
#[test]
fn matrix_shape() {
    let cases = matrix();
    for c in &cases {
        println!("{}: ffmpeg {}", c.name(), c.recipe().join(" ; ffmpeg "));
    }
    assert!(
        (80..=130).contains(&cases.len()),
        "matrix has {} cases",
        cases.len()
    );
    let names: HashSet<String> = cases.iter().map(|c| c.name()).collect();
    assert_eq!(names.len(), cases.len(), "case names must be unique");
    assert!(cases.iter().all(|c| c.is_valid()), "invalid case generated");
    let count =
        |f: &dyn Fn(&tessera_tests::matrix::Case) -> bool| cases.iter().filter(|c| f(c)).count();
    for &c in Container::ALL {
        let n = count(&|k| k.container == c);
        assert!(n >= 4, "container {c:?} appears {n} times");
    }
    for &v in Video::ALL {
        let n = count(&|k| k.video == v);
        assert!(
            n >= 3 || (v == Video::Av1 && n == 0),
            "video {v:?} appears {n} times"
        );
    }
    for &a in Audio::ALL {
        let n = count(&|k| k.audio == a);
        assert!(n >= 3, "audio {a:?} appears {n} times");
    }
    for &t in Timing::ALL {
        let n = count(&|k| k.timing == t);
        assert!(n >= 3, "timing {t:?} appears {n} times");
    }
    let s = sample(SAMPLE_SEED, SAMPLE_SIZE);
    assert_eq!(s.len(), SAMPLE_SIZE, "sample size");
    assert_eq!(
        s,
        sample(SAMPLE_SEED, SAMPLE_SIZE),
        "sample is deterministic"
    );
    for &c in Container::ALL {
        assert!(s.iter().any(|k| k.container == c), "sample misses {c:?}");
    }
}

/// Cases with a failure cause still open. They are run and their result printed, but do not
/// fail CI until their fix lands; any other failure does. Empty: add a name only with the
/// issue that will fix it, and remove it the moment its case passes.
const KNOWN_OPEN: &[&str] = &[];

/// Bad inputs still accepted: none now (truncated Matroska/WebM/AVI files are refused since the
/// probe compares the header's duration with the packets'). Add a name prefix here only with
/// the issue that will fix it.
const KNOWN_OPEN_BAD: &[&str] = &[];

/// The CI sample: every case must transcode and pass the whole oracle.
#[test]
fn ci_sample_passes() {
    let rows = run_rows(&sample(SAMPLE_SEED, SAMPLE_SIZE));
    assert_rows_pass(&rows);
}

/// Target quality under the same oracle (issue 46): a few sample cases of other containers
/// and codecs, each segment searching its rate factor and cut at the source's scene changes,
/// must still come out frame-exact and in sync. `TESSERA_MATRIX_ARGS="--target-vmaf 92"
/// scripts/input-matrix.sh` runs the whole matrix so.
#[test]
fn ci_sample_passes_with_target_quality() {
    let target = ["--target-vmaf".to_string(), "92".to_string()];
    println!("{TABLE_HEADER}");
    let rows: Vec<Row> = (sample(SAMPLE_SEED + 46, 4).iter())
        .map(|c| printed(check_with(c, &target)))
        .collect();
    assert_rows_pass(&rows);
}

/// Every class of recording from the field, once (the regression guard of issue 27: each
/// class keeps a case in CI): broadcast MPEG-2 with open GOPs, program streams, ASF, 3GP,
/// DV, fragmented MP4, variable rate in Matroska and WebM, wrapping, jumping and size-changing
/// MPEG-TS, pixel aspects in the bitstream, surround audio.
#[test]
fn field_sample_passes() {
    let cases = field_cases();
    for &class in FieldClass::ALL {
        assert!(cases.iter().any(|c| c.class == class), "no {class:?} case");
    }
    println!("{TABLE_HEADER}");
    let rows = run_field_rows(&cases);
    assert_rows_pass(&rows);
}

/// Sources at the edges of sync (issue 44), one fixed-seed case of each new axis (a recording
/// cut mid-GOP, a channel layout, two recordings joined with an audio overlap or gap) and the
/// three inputs the issue reported: each transcoded frame-exact and in sync at every second.
#[test]
fn edge_sample_passes() {
    let cases = edge_sample(SAMPLE_SEED);
    for axis in ["cut", "layout", "join"] {
        assert!(
            cases.iter().any(|c| c.class.axis() == axis),
            "no {axis} case"
        );
    }
    for reported in [
        EdgeClass::ReportedMidGop,
        EdgeClass::ReportedSevenOne,
        EdgeClass::ReportedJoin,
    ] {
        assert!(cases.iter().any(|c| c.class == reported), "no {reported:?}");
    }
    println!("{TABLE_HEADER}");
    let rows: Vec<Row> = cases.iter().map(|c| printed(check_edge(c))).collect();
    assert_rows_pass(&rows);
}

/// The edge generator covers every value of its axes once, with unique names.
#[test]
fn edge_cases_cover_their_axes() {
    let cases = edge_cases();
    let names: HashSet<String> = cases.iter().map(|c| c.name()).collect();
    assert_eq!(names.len(), cases.len(), "edge case names must be unique");
    let count = |axis: &str| cases.iter().filter(|c| c.class.axis() == axis).count();
    // TS and PS x H.264, HEVC, MPEG-2; 8 layouts and 8 mono tracks; overlap and gap x with
    // and without a size change; the three reported inputs.
    assert_eq!(
        [
            count("cut"),
            count("layout"),
            count("join"),
            count("reported")
        ],
        [6, 9, 4, 3]
    );
    // A seeded figure is in its range and differs between seeds somewhere.
    let other: Vec<u32> = edge_cases()
        .into_iter()
        .map(|c| tessera_tests::matrix::EdgeCase { seed: 7, ..c }.figure())
        .collect();
    assert!(cases.iter().zip(&other).any(|(c, o)| c.figure() != *o));
}

/// Fails unless every row passed (or is a known open case, which must still fail).
fn assert_rows_pass(rows: &[Row]) {
    println!("{}", summary_line(rows));
    for r in rows
        .iter()
        .filter(|r| KNOWN_OPEN.contains(&r.name.as_str()))
    {
        println!(
            "known open: {} {}",
            r.name,
            if r.passed {
                "now PASSES: remove it from KNOWN_OPEN"
            } else {
                "still fails"
            }
        );
    }
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| !r.passed && !KNOWN_OPEN.contains(&r.name.as_str()))
        .map(|r| format!("{}: {}", r.name, r.problems.join("; ")))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} sample cases failed:\n  {}",
        failed.len(),
        rows.len(),
        failed.join("\n  ")
    );
}

/// Generated bad inputs: each must be refused with a non-zero exit, an
/// error naming the file and a reason, no panic and no output.
#[test]
fn bad_inputs_are_rejected() {
    let dir = tempfile::Builder::new()
        .prefix("tessera-matrix-bad-")
        .tempdir()
        .expect("temp dir");
    let inputs = bad_inputs(dir.path());
    assert!(inputs.len() >= 10, "generator made {} inputs", inputs.len());
    let mut failed = Vec::new();
    for bad in &inputs {
        if KNOWN_OPEN_BAD.iter().any(|k| bad.name.starts_with(k)) {
            println!("known open: {} ({}) not checked", bad.name, bad.what);
            continue;
        }
        let job = Job::new(&bad.path, "out.mp4");
        let run = job.run(1, &[]);
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| job.assert_rejected(&run))) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "assertion failed".into());
            failed.push(format!("{} ({}): {msg}", bad.name, bad.what));
        } else {
            println!("ok: {} ({}) refused", bad.name, bad.what);
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} bad inputs not refused cleanly:\n\n{}",
        failed.len(),
        inputs.len(),
        failed.join("\n\n")
    );
}

/// The whole matrix, only with `TESSERA_FULL_MATRIX=1` (about ten
/// minutes on two cores). Prints one row per case and `N passed, M
/// failed`; writes the markdown report to `$TESSERA_MATRIX_REPORT` if set.
/// `TESSERA_MATRIX_FILTER=a,b` keeps only cases whose name contains `a`
/// or `b`. Never fails on failing cases: it is a report, not a gate.
#[test]
fn full_matrix() {
    if std::env::var_os("TESSERA_FULL_MATRIX").is_none_or(|v| v != "1") {
        println!("skipped: set TESSERA_FULL_MATRIX=1 (scripts/input-matrix.sh)");
        return;
    }
    let filter = std::env::var("TESSERA_MATRIX_FILTER").unwrap_or_default();
    let wanted = |name: String| filter.split(',').any(|f| name.contains(f));
    let cases: Vec<_> = matrix().into_iter().filter(|c| wanted(c.name())).collect();
    let field: Vec<_> = field_cases()
        .into_iter()
        .filter(|c| wanted(c.name()))
        .collect();
    let edge_seed = std::env::var("TESSERA_EDGE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(tessera_tests::matrix::MATRIX_SEED);
    let edges: Vec<_> = edge_cases_with_seed(edge_seed)
        .into_iter()
        .filter(|c| wanted(c.name()))
        .collect();
    let mut rows = run_rows(&cases);
    rows.extend(run_field_rows(&field));
    rows.extend(edges.iter().map(|c| printed(check_edge(c))));
    println!("{}", summary_line(&rows));
    if let Some(path) = std::env::var_os("TESSERA_MATRIX_REPORT").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        std::fs::write(&path, markdown_report(&rows))
            .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        println!("wrote {}", path.display());
    }
}
