//! Dispatcher capacity (issue 31, item 4) as a test: many small jobs through the API at a
//! steady rate, fake workers on the real broker; see [`tessera_tests::bench::capacity`].

use tessera_tests::bench::capacity::{run, CapacitySettings};

/// Submits `BENCH_CAPACITY_JOBS` jobs (default 10,000) at `BENCH_CAPACITY_RATE` a second
/// (default 200) to the release dispatcher on Garage and a RabbitMQ vhost, answers its tasks
/// with fake workers, and prints the API latency, the rates it sustained, its RSS, CPU per
/// thread and database size, and what gave out first. Figures are printed, not asserted (a
/// benchmark measures the machine too); what is asserted: the API accepted jobs, and every
/// accepted job ended done (the fake workers' events and objects are what the dispatcher
/// needs) before the jobs stopped ending; with `BENCH_CAPACITY_WAIT=0` (the API alone, no
/// waiting for the jobs), that every submission was accepted.
///
/// Run it with `bench/capacity.sh` (release binaries), or by hand after building the
/// binaries of the same profile:
/// `cargo test --release -p tessera-tests --test bench_capacity -- --ignored --nocapture`.
#[test]
#[ignore = "a load test: minutes of thousands of jobs on the whole farm; bench/capacity.sh runs it"]
fn dispatcher_capacity() {
    let settings = CapacitySettings::from_env();
    let (outcome, figures) = run(&settings);
    println!("figures: {figures:?}");
    assert!(figures.accepted > 0, "the API accepted no job");
    if !settings.wait {
        // The API alone (BENCH_CAPACITY_WAIT=0): every submission accepted.
        assert_eq!(figures.accepted, outcome.submits.len() as u64);
        return;
    }
    assert!(
        !outcome.stalled,
        "jobs stopped ending: {} of {} done",
        figures.done, figures.accepted
    );
    assert_eq!(
        (figures.done, figures.failed),
        (figures.accepted, 0),
        "every accepted job should end done"
    );
}
