//! The chaos run: jobs of mixed length with two outputs each go through the real farm while a
//! seeded schedule of faults hits it (workers killed and drained, RabbitMQ restarted, Garage
//! stopped, the dispatcher killed). Afterwards every job is checked against S3, the API and
//! the queues, not the API alone.
//!
//! Why a module: the CI test runs a small fixed-seed sample; `scripts/chaos.sh` runs the
//! same code longer (more jobs, more rounds, other seeds) through environment variables.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::farm::{Farm, TOKEN};
use crate::fixture::{fixture, Fixture};
use crate::playback::Summary;
use crate::rabbit::rabbitmqctl;

/// One fault the schedule can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL a random worker, start a new one.
    KillWorker,
    /// SIGTERM a random worker (it drains), start a new one.
    DrainWorker,
    /// `rabbitmqctl stop_app`, a few seconds, `start_app` (or, sharing the broker, the farm's
    /// vhost closed and refused for as long).
    RestartBroker,
    /// Stop Garage for a while, then start it again.
    StopStore,
    /// SIGKILL the dispatcher and start it again on the same database.
    KillDispatcher,
}

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

/// The fault schedule of a plan: every kind at least once when there are enough faults, the
/// rest drawn from the seed.
pub fn schedule(plan: &Plan) -> Vec<Fault> {
    let all = [
        Fault::KillWorker,
        Fault::DrainWorker,
        Fault::RestartBroker,
        Fault::StopStore,
        Fault::KillDispatcher,
    ];
    let mut rng = Rng(plan.seed.max(1));
    let mut faults: Vec<Fault> = all.iter().copied().take(plan.faults).collect();
    while faults.len() < plan.faults {
        faults.push(all[rng.below(all.len() as u64) as usize]);
    }
    // Shuffle (Fisher-Yates) so the order differs between seeds.
    for i in (1..faults.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        faults.swap(i, j);
    }
    faults
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    /// Jobs done with every output frame-exact.
    pub done: usize,
    /// Jobs failed with a reason code.
    pub failed_with_reason: usize,
    /// Jobs not final at the end.
    pub hung: usize,
    /// Done jobs with an output missing.
    pub lost: usize,
    /// Outputs whose frame count differs from the source's.
    pub corrupt: usize,
    /// Outputs the dispatcher delivered more than once (its log, across restarts).
    pub duplicated: usize,
    /// Failed jobs with an output at a destination.
    pub partial: usize,
    /// Messages left on the farm's queues.
    pub queued_left: u64,
    /// Objects left in the work area.
    pub work_left: usize,
    /// The first few of them, for the report.
    pub work_left_keys: Vec<String>,
    /// (fault, seconds from its end until the farm made progress again); faults that came
    /// after every job had ended are not listed.
    pub recoveries: Vec<(Fault, f64)>,
}

impl Report {
    /// The figures as lines for logs and docs.
    pub fn table(&self) -> String {
        let mut out = format!(
            "done {} | failed with reason {} | hung {} | lost {} | duplicated {} | corrupt {} | \
             partial {} | queued left {} | work objects left {}\n",
            self.done,
            self.failed_with_reason,
            self.hung,
            self.lost,
            self.duplicated,
            self.corrupt,
            self.partial,
            self.queued_left,
            self.work_left
        );
        for key in &self.work_left_keys {
            out.push_str(&format!("left in the work area: {key}\n"));
        }
        for (fault, secs) in &self.recoveries {
            out.push_str(&format!("recovery after {fault:?}: {secs:.1} s\n"));
        }
        out
    }
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

fn submit(farm: &Farm, i: usize, kind: Fixture) -> String {
    let outputs = json!([
        {"destination": format!("s3://output/chaos/{i}/a.mp4"), "preset": "ultrafast"},
        {"destination": format!("s3://output/chaos/{i}/b.mkv"), "preset": "ultrafast", "height": 144},
    ]);
    let body = json!({"input": format!("s3://input/chaos/{kind:?}.mp4"), "outputs": outputs,
        "segment_seconds": 1});
    // The API may be restarting (a dispatcher kill): retry briefly.
    farm.submit_retrying(&body, 100, Duration::from_millis(300))
        .unwrap_or_else(|| panic!("job {i} could not be submitted"))
}

fn jobs_view(farm: &Farm, ids: &[String]) -> Vec<Value> {
    ids.iter()
        .map(|id| {
            farm.http("GET", &format!("/v1/jobs/{id}"), Some(TOKEN), None)
                .1
        })
        .collect()
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

fn inject(
    farm: &mut Farm,
    fault: Fault,
    rng: &mut Rng,
    next_worker: &mut usize,
    live: &mut Vec<usize>,
    plan: &Plan,
) {
    match fault {
        Fault::KillWorker | Fault::DrainWorker => {
            let pick = rng.below(live.len() as u64) as usize;
            let victim = live.remove(pick);
            let signal = if fault == Fault::KillWorker {
                "KILL"
            } else {
                "TERM"
            };
            farm.signal_worker(victim, signal);
            farm.add_worker(*next_worker);
            live.push(*next_worker);
            *next_worker += 1;
        }
        Fault::RestartBroker if plan.restart_broker => {
            rabbitmqctl(&["stop_app"]).assert_success();
            std::thread::sleep(Duration::from_secs(3));
            rabbitmqctl(&["start_app"]).assert_success();
        }
        Fault::RestartBroker => {
            // Tests of other binaries may share the broker (nextest runs them at once): as
            // this farm's clients see it, a blocked vhost is a broker that went away.
            farm.vhost.block();
            std::thread::sleep(Duration::from_secs(3));
            farm.vhost.unblock();
        }
        Fault::StopStore => {
            farm.garage.stop();
            std::thread::sleep(Duration::from_secs(plan.store_outage_secs));
            farm.garage.restart();
        }
        Fault::KillDispatcher => {
            farm.kill_dispatcher();
            farm.start_dispatcher();
        }
    }
}

/// Destinations the log shows delivered more than once ("output delivered" lines).
pub fn duplicated_deliveries(log: &str) -> usize {
    let mut seen = std::collections::HashMap::<&str, usize>::new();
    for line in log.lines().filter(|l| l.contains("output delivered")) {
        if let Some(dest) = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("destination="))
        {
            *seen.entry(dest).or_default() += 1;
        }
    }
    seen.values().filter(|n| **n > 1).count()
}

/// Runs `plan` on a fresh farm and checks every job afterwards; panics with the report when
/// a job hung, was lost, corrupt or partial, or the farm was left dirty.
pub fn run(plan: Plan) -> Report {
    let faults = schedule(&plan);
    eprintln!("chaos: {plan:?}, faults {faults:?}");
    let mut farm = Farm::start("chaos", plan.workers);
    let mut live: Vec<usize> = (0..plan.workers).collect();
    let mut next_worker = plan.workers;
    for kind in &KINDS[..4] {
        farm.upload(&fixture(*kind), "input", &format!("chaos/{kind:?}.mp4"));
    }
    let mut rng = Rng(plan.seed.wrapping_mul(31).max(1));
    let mixed: Vec<Fixture> = (0..plan.jobs)
        .map(|_| KINDS[rng.below(KINDS.len() as u64) as usize])
        .collect();
    let ids: Vec<String> = mixed
        .iter()
        .enumerate()
        .map(|(i, k)| submit(&farm, i, *k))
        .collect();
    let mut report = Report::default();
    for fault in faults {
        std::thread::sleep(Duration::from_secs(
            plan.gap_secs + rng.below(plan.gap_secs + 1),
        ));
        inject(
            &mut farm,
            fault,
            &mut rng,
            &mut next_worker,
            &mut live,
            &plan,
        );
        if let Some(secs) = recovery(&farm, &ids) {
            report.recoveries.push((fault, secs));
        }
    }
    // Every job must end; a job that does not within the budget is hung.
    let deadline = Instant::now() + Duration::from_secs(600 + 20 * plan.jobs as u64);
    let views = loop {
        let views = jobs_view(&farm, &ids);
        if all_final(&views) || Instant::now() > deadline {
            break views;
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    check_jobs(&farm, &views, &mixed, &mut report);
    report.duplicated = duplicated_deliveries(&farm.log("dispatcher.log"));
    check_clean(&farm, &mut report);
    eprintln!("chaos report:\n{}", report.table());
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

/// Each job's end against S3: a done job has both outputs, each with its source's frame
/// count; a failed one has a reason and no output. Counts into `report`.
fn check_jobs(farm: &Farm, views: &[Value], mixed: &[Fixture], report: &mut Report) {
    for (i, (job, kind)) in views.iter().zip(mixed).enumerate() {
        let outputs = [format!("chaos/{i}/a.mp4"), format!("chaos/{i}/b.mkv")];
        let present: Vec<&String> = outputs
            .iter()
            .filter(|k| !farm.list("output", k).is_empty())
            .collect();
        match job["state"].as_str() {
            Some("done") => {
                report.done += 1;
                if present.len() != outputs.len() {
                    report.lost += 1;
                    continue;
                }
                let source = Summary::of(&fixture(*kind)).frame_count;
                for key in &outputs {
                    let local = farm.dir.path().join(key.replace('/', "_"));
                    farm.download("output", key, &local);
                    if Summary::of(&local).frame_count != source {
                        report.corrupt += 1;
                    }
                }
            }
            Some("failed" | "cancelled") => {
                if job["error"]["code"].as_str().is_some_and(|c| !c.is_empty()) {
                    report.failed_with_reason += 1;
                }
                if !present.is_empty() {
                    report.partial += 1;
                }
            }
            _ => report.hung += 1,
        }
    }
}

/// The farm is left clean: queues drained, work area empty (cleanup is asynchronous).
/// Workers stop a dead job's tasks within seconds; the dispatcher sweeps an ended job's
/// work area again a minute after its end. Waits up to 2 minutes; counts into `report`.
fn check_clean(farm: &Farm, report: &mut Report) {
    let clean_by = Instant::now() + Duration::from_secs(120);
    loop {
        report.queued_left = ["tessera.encode.cpu", "tessera.stitch", "tessera.events"]
            .iter()
            .flat_map(|q| [q.to_string(), format!("{q}.dead")])
            .map(|q| farm.vhost.ready(&q))
            .sum();
        let left = farm.list("work", "jobs/");
        report.work_left = left.len();
        report.work_left_keys = left.into_iter().take(5).collect();
        if (report.queued_left == 0 && report.work_left == 0) || Instant::now() > clean_by {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}
