//! The batch benchmark (issue 31) as a test: a batch of mixed uploads submitted at once to
//! the farm (dispatcher, two workers, RabbitMQ, Garage) against `xargs -P 2 ffmpeg` on the
//! same files, alternated; see [`tessera_tests::bench::batch`].

use tessera_tests::bench::batch::{
    load_line, run_round, uploads, BatchFarm, BatchSettings, Summary,
};

/// `BENCH_BATCH_FILES` uploads (default 40, 2 s to 3 minutes at `BENCH_BATCH_SCALE`, default
/// 1.0) through the farm and through `xargs -P 2 ffmpeg`, `BENCH_RUNS` rounds (default 3):
/// prints each round and the medians against the targets (reported, not asserted). Asserts
/// that every job ends done and each output has its input's decoded frame count.
///
/// Run it with `bench/batch.sh` (release binaries), or by hand after building the binaries
/// of the same profile (`cargo build --release --bins`):
/// `cargo test --release -p tessera-tests --test bench_batch -- --ignored --nocapture`.
#[test]
#[ignore = "a benchmark: minutes of encoding per round; bench/batch.sh runs it"]
fn batch_through_the_farm_against_xargs_ffmpeg() {
    let settings = BatchSettings::from_env();
    println!("==> settings: {settings:?}");
    let batch = uploads(settings.files, settings.scale);
    let minutes: f64 = batch.iter().map(|u| u.duration_s).sum::<f64>() / 60.0;
    let short = batch.iter().filter(|u| u.duration_s < 10.0).count();
    println!(
        "==> batch: {} uploads, {minutes:.2} min of output, {short} under 10 s",
        batch.len()
    );
    let mut farm = BatchFarm::start(batch);
    let mut rounds = Vec::new();
    for n in 1..=settings.rounds {
        let round = run_round(&mut farm, n);
        for line in round.lines(n) {
            println!("{line}");
        }
        println!("round {n}: {}", load_line());
        rounds.push(round);
    }
    for line in Summary::of(&rounds).lines(rounds.len()) {
        println!("{line}");
    }
    println!("{}", load_line());
}
