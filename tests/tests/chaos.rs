//! The chaos suite's CI sample (review C1-H12, issue 9): eight jobs with two outputs each
//! through two workers while every kind of fault hits the farm once, 2-4 s apart, in a
//! fixed-seed order.
//! `scripts/chaos.sh` runs the same code with 30 jobs, more faults and other seeds.

use tessera_tests::chaos::{run, Plan};

#[test]
fn jobs_end_frame_exact_or_with_a_reason_under_every_kind_of_fault() {
    let plan = Plan::from_env(Plan {
        jobs: 8,
        workers: 2,
        faults: 5,
        seed: 7,
        store_outage_secs: 8,
        gap_secs: 2,
        restart_broker: false,
        jobs_per_fault: 0,
    });
    let report = run(plan);
    assert!(report.done > 0, "no job survived:\n{}", report.table());
}
