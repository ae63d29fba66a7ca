//! Poison on every queue (issue 9): messages of a newer release, malformed or truncated
//! JSON, impossible job ids, bodies over the message limit, a task of a job that does not
//! exist, and S3 event notifications with odd keys. Each is dead-lettered (or, for a job that
//! does not run here, settled) and the job it names, where there is one, fails with the
//! reason; workers and the dispatcher stay up, every queue drains, and the next job is
//! frame-exact.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tessera_farm::queue::{dead_letter_queue, Queue};
use tessera_model::wire::{valid_job_id, QUEUE_ENCODE_CPU, QUEUE_EVENTS, QUEUE_STITCH};
use tessera_tests::farm::{Farm, TOKEN, WATCH_EVENTS_QUEUE};
use tessera_tests::fixture::{fixture, Fixture};
use tessera_tests::poison::{self, Poison, S3Outcome};

const JOB_TIMEOUT: Duration = Duration::from_secs(240);
/// Past the farm's 4 MiB message limit.
const HUGE: usize = 5 << 20;

fn publish(farm: &Farm, queue: &str, body: Vec<u8>) {
    farm.with_broker(|q| async move {
        q.declare(queue).await.expect("declare");
        q.publish(queue, body).await.expect("publish")
    });
}

/// The body of one ready task of `queue`, left on the queue.
fn peek(farm: &Farm, queue: &str) -> Vec<u8> {
    farm.with_broker(|q| async move {
        let mut c = q.consume(queue, 1).await.expect("consume");
        let d = c.next().await.expect("next").expect("a task");
        let body = d.body.clone();
        d.acker.reject(true).await.expect("requeue");
        body
    })
}

/// Ready messages of every queue the farm uses, and of their dead-letter queues.
fn queue_lengths(farm: &Farm, queues: &[&str]) -> Vec<(String, u64)> {
    let mut all: Vec<String> = queues.iter().map(|q| q.to_string()).collect();
    all.extend(queues.iter().map(|q| dead_letter_queue(q)));
    all.into_iter()
        .map(|q| {
            let n = farm.vhost.ready(&q);
            (q, n)
        })
        .collect()
}

/// A counter of the dispatcher's `/metrics` (0 when absent).
fn metric(farm: &Farm, series: &str) -> u64 {
    let out = std::process::Command::new("curl")
        .args(["-sS", "-m", "10", &format!("{}/metrics", farm.api)])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

fn submit(farm: &Farm, key: &str) -> String {
    let name = format!("{key}.src.mp4");
    farm.upload(&fixture(Fixture::ClosedGopH264), "input", &name);
    farm.submit(
        &format!("s3://input/{name}"),
        &format!("s3://output/{key}"),
        json!({}),
        json!({"segment_seconds": 1}),
    )
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ok() {
        assert!(started.elapsed() < JOB_TIMEOUT, "{what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn poison_on_every_queue_is_dead_lettered_and_named_jobs_fail_with_the_reason() {
    let seed = std::env::var("TESSERA_POISON_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(9);
    let mut farm = Farm::start("poison", 0);
    // Two jobs wait for workers with every task on the queue.
    let victims: Vec<String> = ["segment", "event"]
        .iter()
        .map(|k| submit(&farm, &format!("victim-{k}.mp4")))
        .collect();
    wait_until("the victims' segments were never all published", || {
        let total: u64 = victims
            .iter()
            .map(|id| farm.job(id)["segments_total"].as_u64().unwrap_or(0))
            .sum();
        total > 0 && farm.vhost.ready(QUEUE_ENCODE_CPU) == total
    });
    // A real task: its plan is the victims' (same input, same settings); moved to a job
    // that does not exist (keys and all), it is the ghost.
    let real: Value = serde_json::from_slice(&peek(&farm, QUEUE_ENCODE_CPU)).expect("task");
    let plan = real["plan"].as_u64().expect("plan");
    let ghost_id = format!("{:032x}", u128::from(poison::next(&mut seed.clone())));
    let mut ghost_task = real.to_string();
    for id in &victims {
        ghost_task = ghost_task.replace(id.as_str(), &ghost_id);
    }
    // Their real tasks are lost (as in a purge), so what ends them is the poison naming
    // them: a segment task of a newer release, an event of a newer release.
    farm.vhost.purge(QUEUE_ENCODE_CPU);
    // A third job gets a stitch task of its plan in its segment phase: one of an earlier run
    // (a resumed job), superseded by the stitch it publishes itself, so it must finish.
    let bystander = submit(&farm, "bystander.mp4");
    wait_until("the bystander was never planned", || {
        farm.job(&bystander)["segments_total"].as_u64().unwrap_or(0) > 0
    });
    let named = [
        (
            QUEUE_ENCODE_CPU,
            poison::newer_version(&victims[0], plan, json!({"segment": 0, "chunk_key": "k"})),
        ),
        (
            QUEUE_EVENTS,
            poison::newer_version(
                &victims[1],
                plan,
                json!({"task": {"segment": 0}, "worker": "w9", "outcome": "done"}),
            ),
        ),
        (
            QUEUE_STITCH,
            poison::oversized(&bystander, plan, json!({"output": 0}), HUGE),
        ),
    ];
    let mut dropped = 0;
    for (queue, p) in &named {
        publish(&farm, queue, p.body.clone());
    }
    for queue in [QUEUE_ENCODE_CPU, QUEUE_STITCH, QUEUE_EVENTS] {
        for p in poison::jobless(seed ^ queue.len() as u64, HUGE) {
            // The router acks an event of a job it does not run: only events that name no
            // possible job are dead letters there.
            let routable = queue == QUEUE_EVENTS && names_a_job_id(&p);
            dropped += u64::from(!routable);
            publish(&farm, queue, p.body);
        }
    }
    publish(&farm, QUEUE_ENCODE_CPU, ghost_task.into_bytes());

    farm.add_worker(0);
    farm.add_worker(1);
    let expect = [
        // A newer release's task goes back for a newer worker until its deliveries run out.
        "segment 0 was lost: it is wire version 99",
        "the result of segment 0 could not be read by the dispatcher",
    ];
    for (id, why) in victims.iter().zip(expect) {
        let job = farm.wait_job(id, JOB_TIMEOUT);
        assert_eq!(job["state"], "failed", "{job}");
        assert_eq!(job["error"]["code"], "task_lost", "{job}");
        let message = job["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(why), "{id}: {message}");
    }
    let job = farm.wait_job(&bystander, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    farm.assert_frame_exact(&fixture(Fixture::ClosedGopH264), "bystander.mp4");
    let queues = [QUEUE_ENCODE_CPU, QUEUE_STITCH, QUEUE_EVENTS];
    wait_until("poison left on the queues", || {
        queue_lengths(&farm, &queues).iter().all(|(_, n)| *n == 0)
    });
    wait_until("dead letters not all counted", || {
        metric(&farm, "tessera_dead_letters_total{kind=\"dropped\"}") >= dropped
    });
    assert_eq!(
        metric(&farm, "tessera_dead_letters_total{kind=\"dropped\"}"),
        dropped
    );
    assert_eq!(
        metric(&farm, "tessera_dead_letters_total{kind=\"job\"}"),
        // The two victims', the bystander's stitch, and the ghost's task once its deliveries
        // ran out (its chunk does not exist: failed, reported, dead-lettered at the limit).
        4,
        "dead letters that named a job:\n{}",
        farm.log("dispatcher.log")
            .lines()
            .filter(|l| l.contains("dead-lettered"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(farm.workers_alive(), "a worker died of poison");
    // The farm still works, frame-exact.
    let next = submit(&farm, "after-poison.mp4");
    let job = farm.wait_job(&next, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    farm.assert_frame_exact(&fixture(Fixture::ClosedGopH264), "after-poison.mp4");
}

fn names_a_job_id(p: &Poison) -> bool {
    p.body.len() <= tessera_model::wire::MAX_MESSAGE_BYTES
        && serde_json::from_slice::<Value>(&p.body)
            .ok()
            .and_then(|v| v["job_id"].as_str().map(valid_job_id))
            == Some(true)
}

#[test]
fn s3_events_with_odd_keys_start_a_job_fail_one_with_a_reason_or_are_dead_lettered() {
    let farm = Farm::start("s3poison", 1);
    let src = fixture(Fixture::ClosedGopH264);
    let utf8 = "incoming/case01 vidéo été 🎬.mp4";
    farm.upload(&src, "input", utf8);
    let etag = farm.etag("input", utf8);
    let size = std::fs::metadata(&src).expect("fixture").len();
    let created = "ObjectCreated:Put";
    let long = format!("incoming/case06-{}.mp4", "a".repeat(1100));
    use S3Outcome::*;
    let cases: Vec<(&str, Vec<u8>, S3Outcome)> = vec![
        ("case01", poison::s3_event("input", utf8, created, &etag, size), Done),
        ("case02", poison::s3_event_raw("input", "incoming/case02%zz.mp4", created, "e", 9), DeadLettered),
        ("case03", poison::s3_event_raw("input", "incoming/case03%FF%FE.mp4", created, "e", 9), DeadLettered),
        ("case04", poison::s3_event("input", "incoming/case04\u{1}.mp4", created, "e", 9), FailedJob),
        ("case05", poison::s3_event("input", "incoming/../private/case05.mp4", created, "e", 9), FailedJob),
        ("case06", poison::s3_event("input", &long, created, "e", 9), FailedJob),
        ("case07", poison::s3_event("input", "incoming/case07-ghost.mp4", created, "e", 9), FailedJob),
        ("case08", poison::s3_event("input", "elsewhere/case08.mp4", created, "e", 9), Ignored),
        ("case09", poison::s3_event("input", "incoming/case09.mp4", "ObjectRemoved:Delete", "e", 9), Ignored),
        ("case10", poison::s3_event("private", "incoming/case10.mp4", created, "e", 9), Ignored),
        ("case11", br#"{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"input"}"#.to_vec(), Ignored),
        ("case12", br#"{"Records": 5}"#.to_vec(), DeadLettered),
        ("case13", br#"{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"input"},"object":{"key":7}}}]}"#.to_vec(), DeadLettered),
        ("case14", poison::noise(&mut 14, 300), DeadLettered),
    ];
    for (_, body, _) in &cases {
        publish(&farm, WATCH_EVENTS_QUEUE, body.clone());
    }
    let jobs_expected = cases
        .iter()
        .filter(|c| matches!(c.2, FailedJob | Done))
        .count();
    let dead_expected = cases.iter().filter(|c| c.2 == DeadLettered).count() as u64;
    wait_until("odd-key events did not all end", || {
        let jobs = farm.jobs();
        jobs.len() >= jobs_expected
            && jobs
                .iter()
                .all(|j| matches!(j["state"].as_str(), Some("done" | "failed")))
    });
    let jobs = farm.jobs();
    assert_eq!(jobs.len(), jobs_expected, "{jobs:#?}");
    for (tag, _, outcome) in &cases {
        let mine: Vec<&Value> = jobs
            .iter()
            .filter(|j| j.to_string().contains(tag))
            .collect();
        match outcome {
            Done => {
                assert_eq!(mine.len(), 1, "{tag}: {jobs:#?}");
                assert_eq!(mine[0]["state"], "done", "{tag}: {}", mine[0]);
            }
            FailedJob => {
                assert_eq!(mine.len(), 1, "{tag}: {jobs:#?}");
                let j = mine[0];
                assert_eq!(j["state"], "failed", "{tag}: {j}");
                let message = j["error"]["message"].as_str().unwrap_or("");
                assert!(
                    message.contains(tag),
                    "{tag}: the reason names no input: {j}"
                );
            }
            DeadLettered | Ignored => assert!(mine.is_empty(), "{tag}: {mine:?}"),
        }
    }
    assert!(
        farm.list("output", "processed/")
            .iter()
            .any(|k| k.contains("vidéo été 🎬")),
        "{:?}",
        farm.list("output", "processed/")
    );
    wait_until("S3 events left on the queue", || {
        farm.vhost.ready(WATCH_EVENTS_QUEUE) == 0
    });
    // Dead-lettering from a quorum queue is asynchronous: wait for the count to settle.
    let dead = dead_letter_queue(WATCH_EVENTS_QUEUE);
    let settle = Instant::now();
    while farm.vhost.ready(&dead) < dead_expected && settle.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(250));
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        farm.vhost.ready(&dead),
        dead_expected,
        "dead-lettered S3 events; queues:\n{}\n--- dispatcher\n{}",
        farm.vhost.list_queues(),
        tessera_tests::run::tail(&farm.log("dispatcher.log"), 4000)
    );
    let (status, _) = farm.http("GET", "/healthz", Some(TOKEN), None);
    assert_eq!(status, 200);
}
