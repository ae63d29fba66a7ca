//! A spot fleet that churns (issue 45): two workers, one of them SIGKILLed every 7 to 15 s
//! (preferring one that holds a task) and replaced, while jobs run; among them one long task that is killed again and again.
//! With the farm's default budget for deliveries that vanish with their worker
//! (`lost_limit` 20, apart from the 3 own failures of the test farm), every job ends done
//! and frame-exact: a task is charged for what points at it, not for its fleet's churn.
//!
//! CI runs 45 s of churn; `TESSERA_CHURN_SECONDS=120` (scripts/broker-suite.sh) the issue's
//! two minutes, `TESSERA_CHURN_SEED` another schedule.

use std::time::{Duration, Instant};

use serde_json::json;
use tessera_tests::farm::Farm;
use tessera_tests::fixture::{fixture, Fixture};

const JOB_TIMEOUT: Duration = Duration::from_secs(600);

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// xorshift64: the same seed, the same kills.
fn draw(state: &mut u64, below: u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state % below.max(1)
}

/// Whether worker `i` holds a task now: its staging directory has a task's directory (each
/// segment, stitch or whole input gets one, removed when it ends; `sources` is the cache of
/// cut sources).
fn busy(farm: &Farm, i: usize) -> bool {
    std::fs::read_dir(farm.worker_staging(i))
        .map(|rd| {
            rd.flatten()
                .any(|e| e.path().is_dir() && e.file_name() != "sources")
        })
        .unwrap_or(false)
}

/// The slot of `live` to kill: a worker holding a task where one does within 5 s (a spot
/// reclaim takes what runs, and on a loaded machine the fleet may still be starting when the
/// timer fires), drawn among those; else any.
fn pick_victim(farm: &Farm, live: &[usize], rng: &mut u64) -> usize {
    let waited = Instant::now();
    loop {
        let holding: Vec<usize> = (0..live.len()).filter(|&s| busy(farm, live[s])).collect();
        if !holding.is_empty() {
            return holding[draw(rng, holding.len() as u64) as usize];
        }
        if waited.elapsed() > Duration::from_secs(5) {
            return draw(rng, live.len() as u64) as usize;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The highest `attempt=` of the "segment encoded" lines of `log`.
fn last_attempt(log: &str) -> u64 {
    (log.lines())
        .filter(|l| l.contains("segment encoded"))
        .filter_map(|l| {
            let rest = &l[l.find("attempt=")? + "attempt=".len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn jobs_on_a_fleet_killed_every_few_seconds_all_end_done_and_frame_exact() {
    let churn = Duration::from_secs(env_u64("TESSERA_CHURN_SECONDS", 45));
    let mut rng = env_u64("TESSERA_CHURN_SEED", 45) | 1;
    let mut farm = Farm::start_with("churn", 2, &[("TESSERA_LOST_LIMIT", "20")]);
    let mut jobs = Vec::new();
    let mut submit = |farm: &Farm, kind: Fixture, name: &str, out: serde_json::Value, seg| {
        let src = fixture(kind);
        farm.upload(&src, "input", &format!("{name}.src"));
        let key = format!("{name}.mp4");
        let id = farm.submit(
            &format!("s3://input/{name}.src"),
            &format!("s3://output/{key}"),
            out,
            json!({ "segment_seconds": seg }),
        );
        jobs.push((id, src, key));
    };
    // One long task (a 12 s segment at a slow preset): the one churn kills again and again.
    submit(
        &farm,
        Fixture::Hd720Long,
        "long",
        json!({"preset": "slow"}),
        12,
    );
    submit(&farm, Fixture::ClosedGopH264, "short-0", json!({}), 1);
    submit(&farm, Fixture::OpenGopH264, "short-1", json!({}), 1);
    let (mut live, mut next_worker) = (vec![0usize, 1], 2usize);
    let (mut kills, mut busy_kills) = (0, 0);
    let started = Instant::now();
    while started.elapsed() < churn {
        std::thread::sleep(Duration::from_millis(7000 + draw(&mut rng, 3001)));
        let slot = pick_victim(&farm, &live, &mut rng);
        let victim = live[slot];
        busy_kills += usize::from(busy(&farm, victim));
        farm.signal_worker(victim, "KILL");
        farm.wait_worker_exit(victim, Duration::from_secs(10));
        farm.add_worker(next_worker);
        live[slot] = next_worker;
        next_worker += 1;
        kills += 1;
        // Work keeps coming, so that most kills find a worker holding some.
        let name = format!("short-{}", kills + 1);
        submit(&farm, Fixture::Hd720Long, &name, json!({}), 1);
    }
    let logs = || -> String {
        (0..next_worker)
            .map(|i| farm.log(&format!("worker-{i}.log")))
            .collect()
    };
    for (id, src, key) in &jobs {
        let job = farm.wait_job(id, JOB_TIMEOUT);
        assert_eq!(job["state"], "done", "{key}: {job}\n{}", logs());
        farm.assert_frame_exact(src, key);
    }
    let attempts = last_attempt(&logs());
    println!(
        "churn {churn:?}: {kills} kills ({busy_kills} of a busy worker), {} jobs done, \
         highest attempt of a segment {attempts}",
        jobs.len()
    );
    assert!(busy_kills > 0, "no kill hit a worker holding work");
    assert!(attempts > 1, "no segment was redelivered after a kill");
}
