//! The chaos run: jobs of mixed length with two outputs each go through the real farm while a
//! seeded schedule of faults hits it (workers killed, drained and hung, RabbitMQ restarted
//! and partitioned from the dispatcher, Garage stopped, throttled, slowed and partitioned,
//! the dispatcher killed, also inside a delivery and while the broker is down, its clock
//! jumping). Afterwards every job is checked against S3 (every decoded frame against the
//! same job run without faults), the API and the queues, not the API alone.
//!
//! Why a module: the CI test runs a small fixed-seed sample; `scripts/chaos.sh` runs the
//! same code longer (more jobs, more rounds, other seeds) through environment variables.

pub mod checks;
pub mod faults;
pub mod frames;
pub mod report;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::farm::Farm;
use crate::fixture::{fixture, Fixture};
use checks::{check_clean, check_jobs, duplicated_deliveries, jobs_view};
use checks::{reference_hashes, submit_references};
pub use faults::{Fault, Rig, ALL};
pub use report::Report;

/// The size of a run.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Jobs submitted at the start.
    pub jobs: usize,
    /// Workers running at once.
    pub workers: usize,
    /// Faults injected, one every `gap_secs` to twice that.
    pub faults: usize,
    /// Seed of the fault schedule and the job mix.
    pub seed: u64,
    /// Seconds Garage stays stopped.
    pub store_outage_secs: u64,
    /// Seconds between faults: from this to twice this.
    pub gap_secs: u64,
    /// Restart the whole broker (`stop_app`/`start_app`) rather than cut this farm's vhost
    /// off: only where no other test shares the broker (`TESSERA_CHAOS_BROKER_RESTART=1`).
    pub restart_broker: bool,
    /// Jobs submitted before each fault besides the first `jobs`, so that a long schedule
    /// still meets jobs in every stage (`TESSERA_CHAOS_JOBS_PER_FAULT`).
    pub jobs_per_fault: usize,
}

impl Plan {
    /// `base`, with `TESSERA_CHAOS_JOBS`, `_WORKERS`, `_FAULTS`, `_SEED`, `_STORE_OUTAGE`
    /// from the environment where set (the long run of `scripts/chaos.sh`).
    pub fn from_env(base: Plan) -> Plan {
        let get = |name: &str, default: u64| {
            std::env::var(format!("TESSERA_CHAOS_{name}"))
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        Plan {
            jobs: get("JOBS", base.jobs as u64) as usize,
            workers: get("WORKERS", base.workers as u64) as usize,
            faults: get("FAULTS", base.faults as u64) as usize,
            seed: get("SEED", base.seed),
            store_outage_secs: get("STORE_OUTAGE", base.store_outage_secs),
            gap_secs: get("GAP", base.gap_secs),
            restart_broker: get("BROKER_RESTART", u64::from(base.restart_broker)) != 0,
            jobs_per_fault: get("JOBS_PER_FAULT", base.jobs_per_fault as u64) as usize,
        }
    }
}

/// A small deterministic generator (xorshift64*): the same seed gives the same schedule.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The fault schedule of a plan: every kind at least once when there are enough faults (in
/// the order of [`ALL`]: a short plan gets the first few), the rest drawn from the seed.
pub fn schedule(plan: &Plan) -> Vec<Fault> {
    let mut rng = Rng(plan.seed.max(1));
    let mut faults: Vec<Fault> = ALL.iter().copied().take(plan.faults).collect();
    while faults.len() < plan.faults {
        faults.push(ALL[rng.below(ALL.len() as u64) as usize]);
    }
    // Shuffle (Fisher-Yates) so the order differs between seeds.
    for i in (1..faults.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        faults.swap(i, j);
    }
    faults
}

/// The job mix: short clips (4 s) and, twice as likely, the 12 s 720p clip, so that faults
/// land while segments are encoding.
const KINDS: [Fixture; 5] = [
    Fixture::ClosedGopH264,
    Fixture::NoAudio,
    Fixture::TwoAudioLanguages,
    Fixture::Hd720Long,
    Fixture::Hd720Long,
];

/// Submits the chaos job of `kind` with its outputs under `s3://output/{prefix}/`.
fn submit(farm: &Farm, prefix: &str, kind: Fixture) -> String {
    let outputs = json!([
        {"destination": format!("s3://output/{prefix}/a.mp4"), "preset": "ultrafast"},
        {"destination": format!("s3://output/{prefix}/b.mkv"), "preset": "ultrafast", "height": 144},
    ]);
    let body = json!({"input": format!("s3://input/chaos/{kind:?}.mp4"), "outputs": outputs,
        "segment_seconds": 1});
    // The API may be restarting (a dispatcher kill): retry briefly.
    farm.submit_retrying(&body, 100, Duration::from_millis(300))
        .unwrap_or_else(|| panic!("job {prefix} could not be submitted"))
}

fn progress(views: &[Value]) -> u64 {
    views
        .iter()
        .map(|j| {
            j["segments_done"].as_u64().unwrap_or(0) + if j["state"] == "done" { 1000 } else { 0 }
        })
        .sum()
}

fn all_final(views: &[Value]) -> bool {
    views
        .iter()
        .all(|j| matches!(j["state"].as_str(), Some("done" | "failed" | "cancelled")))
}

/// Runs `plan` on a fresh farm and checks every job afterwards; panics with the report when
/// a job hung, was lost, corrupt or partial, or the farm was left dirty.
pub fn run(plan: Plan) -> Report {
    let faults = schedule(&plan);
    eprintln!("chaos: {plan:?}, faults {faults:?}");
    let started = Instant::now();
    let mut rig = Rig::start(plan.workers, faults.contains(&Fault::ClockJump));
    (rig.restart_broker, rig.outage_secs) = (plan.restart_broker, plan.store_outage_secs);
    for kind in &KINDS[..4] {
        let key = format!("chaos/{kind:?}.mp4");
        rig.farm.upload(&fixture(*kind), "input", &key);
    }
    let mut rng = Rng(plan.seed.wrapping_mul(31).max(1));
    let mut mixed: Vec<Fixture> = (0..plan.jobs)
        .map(|_| KINDS[rng.below(KINDS.len() as u64) as usize])
        .collect();
    let mut ids: Vec<String> = mixed
        .iter()
        .enumerate()
        .map(|(i, k)| submit(&rig.farm, &format!("chaos/{i}"), *k))
        .collect();
    let mut report = Report::default();
    for fault in faults {
        std::thread::sleep(Duration::from_secs(
            plan.gap_secs + rng.below(plan.gap_secs + 1),
        ));
        for _ in 0..plan.jobs_per_fault {
            let kind = KINDS[rng.below(KINDS.len() as u64) as usize];
            ids.push(submit(&rig.farm, &format!("chaos/{}", ids.len()), kind));
            mixed.push(kind);
        }
        let mut draw = |n: u64| rng.below(n);
        let mut extra = |farm: &Farm, kind: Fixture| {
            let i = ids.len();
            ids.push(submit(farm, &format!("chaos/{i}"), kind));
            mixed.push(kind);
            i
        };
        let note = rig.inject(fault, &mut draw, &mut extra);
        eprintln!("chaos: {fault:?}: {note}");
        report.faults.push(format!("{fault:?}: {note}"));
        if let Some(secs) = recovery(&rig.farm, &ids) {
            report.recoveries.push((fault, secs));
        }
    }
    let farm = &rig.farm;
    // The same jobs without faults, for the frame-by-frame check: the faults are over, so
    // they run beside the last of the chaos jobs.
    let reference_jobs = submit_references(farm, &mixed, submit);
    // Every job must end; a job that does not within the budget is hung.
    let deadline = Instant::now() + Duration::from_secs(600 + 20 * ids.len() as u64);
    let views = loop {
        let views = jobs_view(farm, &ids);
        if all_final(&views) || Instant::now() > deadline {
            break views;
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    let last_end = started.elapsed().as_secs_f64();
    let refs = reference_hashes(farm, &reference_jobs);
    check_jobs(farm, &views, &mixed, &refs, &mut report);
    report.duplicated = duplicated_deliveries(&farm.log("dispatcher.log"));
    check_clean(farm, &mut report);
    eprintln!(
        "chaos report ({last_end:.0} s to the last job's end, {:.0} s in all):\n{}",
        started.elapsed().as_secs_f64(),
        report.table()
    );
    let failed_without_reason = views.len() - report.done - report.failed_with_reason - report.hung;
    assert!(
        report.hung == 0
            && report.lost == 0
            && report.duplicated == 0
            && report.corrupt == 0
            && report.partial == 0
            && failed_without_reason == 0
            && report.queued_left == 0
            && report.work_left == 0,
        "chaos invariants broken:\n{}\n--- dispatcher\n{}",
        report.table(),
        crate::run::tail(&farm.log("dispatcher.log"), 6000)
    );
    report
}

/// Recovery from a fault just injected: seconds from its end to the farm's next progress
/// (300 at most); None when every job had already ended.
fn recovery(farm: &Farm, ids: &[String]) -> Option<f64> {
    let started = Instant::now();
    let after = jobs_view(farm, ids);
    if all_final(&after) {
        return None;
    }
    let before = progress(&after);
    loop {
        let views = jobs_view(farm, ids);
        if progress(&views) > before || all_final(&views) {
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Some(started.elapsed().as_secs_f64())
}
