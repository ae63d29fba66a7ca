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
pub mod shape;

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::farm::Farm;
use crate::fixture::{fixture, Fixture};
use checks::{check_clean, check_jobs, duplicated_deliveries, jobs_view};
use checks::{reference_contents, submit_references};
pub use faults::{Fault, Rig, ALL};
pub use report::Report;
pub use shape::{submit, Shape};

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
/// `TESSERA_CHAOS_KINDS` (names as `{:?}` prints them, comma-separated) narrows the kinds,
/// to run one fault again while its bug is hunted.
pub fn schedule(plan: &Plan) -> Vec<Fault> {
    let kinds = std::env::var("TESSERA_CHAOS_KINDS").unwrap_or_default();
    schedule_of(plan, &kinds_named(&kinds))
}

/// The kinds of [`ALL`] named in `names` (all of them when `names` is empty).
fn kinds_named(names: &str) -> Vec<Fault> {
    let wanted: Vec<&str> = names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    let kinds: Vec<Fault> = (ALL.iter().copied())
        .filter(|f| wanted.is_empty() || wanted.contains(&format!("{f:?}").as_str()))
        .collect();
    assert!(
        !kinds.is_empty(),
        "TESSERA_CHAOS_KINDS={names:?} names no fault of {ALL:?}"
    );
    kinds
}

fn schedule_of(plan: &Plan, kinds: &[Fault]) -> Vec<Fault> {
    let mut rng = Rng(plan.seed.max(1));
    let mut faults: Vec<Fault> = kinds.iter().copied().take(plan.faults).collect();
    while faults.len() < plan.faults {
        faults.push(kinds[rng.below(kinds.len() as u64) as usize]);
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
/// a job hung, was lost, corrupt or partial, failed without a fault meant to fail it, or the
/// farm was left dirty.
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
    let mut mixed: Vec<Shape> = (0..plan.jobs)
        .map(|_| Shape::Files(KINDS[rng.below(KINDS.len() as u64) as usize]))
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
            let shape = Shape::Files(KINDS[rng.below(KINDS.len() as u64) as usize]);
            ids.push(submit(&rig.farm, &format!("chaos/{}", ids.len()), shape));
            mixed.push(shape);
        }
        let mut draw = |n: u64| rng.below(n);
        let mut extra = |farm: &Farm, shape: Shape| {
            let i = ids.len();
            ids.push(submit(farm, &format!("chaos/{i}"), shape));
            mixed.push(shape);
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
    let refs = reference_contents(farm, &reference_jobs);
    check_jobs(farm, (&views, &mixed), &rig.may_fail, &refs, &mut report);
    report.duplicated = duplicated_deliveries(&farm.log("dispatcher.log"));
    check_clean(farm, &mut report);
    eprintln!(
        "chaos report ({last_end:.0} s to the last job's end, {:.0} s in all):\n{}",
        started.elapsed().as_secs_f64(),
        report.table()
    );
    let failed_without_reason = views.len() - report.done - report.failed_with_reason - report.hung;
    let broken = report.hung
        + report.lost
        + report.duplicated
        + report.corrupt
        + report.partial
        + report.failed_unexpectedly;
    if broken + failed_without_reason > 0 || report.queued_left > 0 || report.work_left > 0 {
        keep(farm, plan.seed);
    }
    assert!(
        report.hung == 0
            && report.lost == 0
            && report.duplicated == 0
            && report.corrupt == 0
            && report.partial == 0
            && report.failed_unexpectedly == 0
            && failed_without_reason == 0
            && report.queued_left == 0
            && report.work_left == 0,
        "chaos invariants broken:\n{}\n--- dispatcher\n{}",
        report.table(),
        crate::run::tail(&farm.log("dispatcher.log"), 6000)
    );
    report
}

/// Keeps the farm's folder (every process's log, the outputs and references the checks
/// downloaded) in `/tmp/tessera-chaos-kept/seed-N` when a run breaks an invariant: a corrupt
/// output is a race to hunt, and the farm's temporary folder goes with the farm.
fn keep(farm: &Farm, seed: u64) {
    let kept = std::path::PathBuf::from(format!("/tmp/tessera-chaos-kept/seed-{seed}"));
    let _ = std::fs::remove_dir_all(&kept);
    let _ = std::fs::create_dir_all(&kept);
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", farm.dir.path().display()))
        .arg(&kept)
        .status();
    eprintln!(
        "chaos: the farm's folder is kept in {} ({copied:?})",
        kept.display()
    );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_holds_every_kind_or_only_the_kinds_named() {
        let plan = |faults| Plan {
            jobs: 0,
            workers: 0,
            faults,
            seed: 11,
            store_outage_secs: 0,
            gap_secs: 0,
            restart_broker: false,
            jobs_per_fault: 0,
        };
        let all = schedule_of(&plan(ALL.len()), &kinds_named(""));
        assert!(ALL.iter().all(|k| all.contains(k)), "{all:?}");
        let named = kinds_named("KillDispatcherPackaging, ClockJump");
        assert_eq!(named, [Fault::KillDispatcherPackaging, Fault::ClockJump]);
        let some = schedule_of(&plan(5), &named);
        assert_eq!(some.len(), 5);
        assert!(some.iter().all(|k| named.contains(k)), "{some:?}");
    }

    #[test]
    #[should_panic(expected = "names no fault")]
    fn a_misspelt_kind_is_refused() {
        kinds_named("KillDispatcherPackagin");
    }
}
