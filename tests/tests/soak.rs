//! The soak (issue 9), run by `scripts/soak.sh`: `TESSERA_SOAK_JOBS` (200) short jobs, 20 in
//! flight, through two workers while one is SIGKILLed every 5-10 s. Every job ends done and
//! frame-exact or failed with a reason, and the dispatcher does not grow: its RSS at the end
//! is within 50% of its RSS after the first job, and its descriptors within 32.

use tessera_tests::soak::run;

#[test]
#[ignore = "long: run scripts/soak.sh"]
fn two_hundred_jobs_through_a_kill_loop_leave_nothing_growing() {
    let jobs = std::env::var("TESSERA_SOAK_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let report = run(jobs, 20, 17);
    println!("{}", report.table());
    assert!(
        report.bad.is_empty(),
        "{:#?}\n{}",
        report.bad,
        report.table()
    );
    assert_eq!(
        report.done_exact + report.failed_with_reason,
        jobs,
        "{}",
        report.table()
    );
    let (start, _, end) = report.dispatcher_rss_kib;
    assert!(
        end <= start + start / 2,
        "dispatcher grew:\n{}",
        report.table()
    );
    let (fds_start, fds_end) = report.dispatcher_fds;
    assert!(
        fds_end <= fds_start + 32,
        "descriptors grew:\n{}",
        report.table()
    );
}
