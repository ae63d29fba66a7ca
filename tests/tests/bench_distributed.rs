//! The distributed benchmark (issue 3) as a test: the farm (dispatcher, two workers,
//! RabbitMQ, Garage) against plain ffmpeg, alternated; see [`tessera_tests::bench`].

use tessera_tests::bench::{
    bench_input, bench_run, phases_line, segment_phases, start_bench_farm, BenchSettings,
    BenchSummary,
};
use tessera_tests::probe::frame_count;

/// The whole farm against plain ffmpeg on a generated 1080p30 input (`BENCH_RUNS` runs,
/// default 3, of `BENCH_SECONDS`, default 60): prints each run, the median ratio and
/// per-segment overhead against their targets (reported, not asserted) and the workers'
/// median segment phases. Asserts that every job ends done with the input's frame count.
///
/// Run it with `bench/distributed.sh` (release binaries), or by hand after building the
/// binaries of the same profile (`cargo build --release --bins`):
/// `cargo test --release -p tessera-tests --test bench_distributed -- --ignored --nocapture`.
/// RabbitMQ and Garage must be installed (`scripts/setup-deps.sh --services`).
#[test]
#[ignore = "a benchmark: minutes of 1080p encoding; bench/distributed.sh runs it"]
fn distributed_farm_against_ffmpeg() {
    let settings = BenchSettings::from_env();
    let input = bench_input(settings.seconds);
    let farm = start_bench_farm();
    println!("==> upload: {}", input.display());
    farm.upload(&input, "input", "bench/input.mp4");
    let want = frame_count(&input);
    let work = tempfile::tempdir().expect("temp dir");
    let mut runs = Vec::new();
    for n in 1..=settings.runs {
        let run = bench_run(&farm, n, &input, want, work.path());
        println!("{}", run.line(n));
        runs.push(run);
    }
    let summary = BenchSummary::of(&runs);
    for line in summary.lines() {
        println!("{line}");
    }
    let logs: Vec<String> = (0..2)
        .map(|i| farm.log(&format!("worker-{i}.log")))
        .collect();
    if let Some(line) = phases_line(&segment_phases(logs.iter().map(String::as_str))) {
        println!("{line}");
    }
    assert!(
        summary.exact,
        "a job's frame count is not the input's ({want}): {runs:?}"
    );
}
