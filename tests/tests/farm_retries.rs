//! A task's own failures end at the task's limit on every broker version (issue 45): RabbitMQ
//! 4.3 stopped counting `basic.nack` requeues, so the worker counts a task's failed attempts
//! in its message. Run against Debian's 3.10 by default, and against 4.x with 4.3's defaults
//! by `scripts/broker-suite.sh` (tests/src/rabbit.rs). Also: a broker that refuses the
//! farm's queues stops a dispatcher at start with the queue and the broker's reply.

use std::time::{Duration, Instant};

use serde_json::json;
use tessera_farm::queue::Queue;
use tessera_model::wire::QUEUE_ENCODE_CPU;
use tessera_tests::farm::Farm;
use tessera_tests::fixture::{fixture, Fixture};

const JOB_TIMEOUT: Duration = Duration::from_secs(300);
/// The test farm's own-failure limit (tests/src/farm.rs).
const DELIVERY_LIMIT: usize = 3;

/// `(segment, attempt)` of every "task attempt failed" line of a worker's log.
fn failed_attempts(log: &str) -> Vec<(u64, u64)> {
    let field = |line: &str, name: &str| -> Option<u64> {
        let rest = &line[line.find(name)? + name.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    log.lines()
        .filter(|l| l.contains("task attempt failed"))
        .filter_map(|l| Some((field(l, "task=segment ")?, field(l, " attempt=")?)))
        .collect()
}

#[test]
fn a_task_whose_child_times_out_every_time_fails_at_exactly_its_limit() {
    let mut farm = Farm::start("retries", 0);
    // Every encode of this input runs past the worker's 1 s segment limit: its media child
    // is killed on every attempt (child_timeout, retryable).
    farm.add_worker_with(0, &["--segment-timeout", "1"]);
    let src = fixture(Fixture::Hd720Long);
    farm.upload(&src, "input", "slow.mp4");
    let id = farm.submit(
        "s3://input/slow.mp4",
        "s3://output/slow.mp4",
        json!({"preset": "veryslow"}),
        json!({"segment_seconds": 2}),
    );
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    let log = farm.log("worker-0.log");
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "child_timeout", "{job}\n{log}");
    let failed = failed_attempts(&log);
    assert!(!failed.is_empty(), "no failed attempt logged:\n{log}");
    // Each segment's attempts count 1, 2, 3 and stop there: the one that failed the job
    // reached the limit, none went past it.
    let mut reached = 0;
    for segment in failed
        .iter()
        .map(|(s, _)| *s)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let attempts: Vec<u64> = (failed.iter())
            .filter(|(s, _)| *s == segment)
            .map(|(_, a)| *a)
            .collect();
        let counted: Vec<u64> = (1..=attempts.len() as u64).collect();
        assert_eq!(attempts, counted, "segment {segment}:\n{log}");
        assert!(
            attempts.len() <= DELIVERY_LIMIT,
            "segment {segment} past the limit:\n{log}"
        );
        reached += usize::from(attempts.len() == DELIVERY_LIMIT);
    }
    assert!(
        reached >= 1,
        "no segment reached the limit: {failed:?}\n{log}"
    );
    assert!(farm.list("output", "slow.mp4").is_empty(), "partial output");
    // The farm moves on: the next job (no timeout issue) on a worker without the limit.
    farm.add_worker(1);
    let next = fixture(Fixture::ClosedGopH264);
    farm.upload(&next, "input", "next.mp4");
    let id = farm.submit(
        "s3://input/next.mp4",
        "s3://output/next.mp4",
        json!({}),
        json!({}),
    );
    let done = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(done["state"], "done", "{done}");
    farm.assert_frame_exact(&next, "next.mp4");
}

#[test]
fn a_broker_that_refuses_a_farm_queue_stops_the_dispatcher_with_the_reason() {
    let mut farm = Farm::start("refusal", 0);
    farm.kill_dispatcher();
    // An operator's queue of the same name, declared otherwise (a classic queue where the
    // farm declares a quorum one).
    farm.vhost.delete();
    farm.vhost.create();
    farm.with_broker(|q| async move {
        q.declare_reports(QUEUE_ENCODE_CPU, 10, Duration::from_secs(60))
            .await
            .expect("a classic queue")
    });
    let started = Instant::now();
    let (code, log) = farm.run_second_dispatcher("refused.db", Duration::from_secs(60));
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "the dispatcher waited for a broker that answers"
    );
    assert!(code.is_some_and(|c| c != 0), "exit {code:?}\n{log}");
    for needle in [
        QUEUE_ENCODE_CPU,
        "refused",
        "PRECONDITION_FAILED",
        "inequivalent arg",
    ] {
        assert!(log.contains(needle), "{needle} not in\n{log}");
    }
}
