//! The retry mechanism under each broker's counting rule: generated schedules of attempts
//! that fail on their own, vanish with their worker, or are drained, run through the
//! worker's own verdict and copies against the in-process queue counting as RabbitMQ up to
//! 4.2 does (every return) and as a broker stricter than 4.3 does (no explicit return).
//! Whatever the rule, a task fails at its `delivery_limit`-th own failure or is lost at its
//! `lost_limit`-th vanished delivery, whichever comes first, and a drain spends neither.

use std::time::Duration;

use tessera_farm::queue::{dead_letter_queue, MemoryQueue, Queue, ReturnCounting};
use tessera_farm::FarmError;

use super::{republish, verdict, Verdict};
use crate::attempts::Attempts;

const DELIVERY_LIMIT: u32 = 3;
const LOST_LIMIT: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The media child crashed: a failure of the task's own.
    Fail,
    /// The worker was killed holding it: the delivery is dropped unsettled.
    Vanish,
    /// The worker drained (spot notice): given back as a bounce.
    Drain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Failed its job at its own attempt number n, dead-lettered by the worker.
    Failed(u32),
    /// Lost: its deliveries ran out without a verdict (by the broker or the worker).
    Lost,
}

/// Where the schedule ends, by the rules alone: the step index and how.
fn expected(schedule: &[Step]) -> (usize, End) {
    let (mut fails, mut vanished) = (0, 0);
    for (i, step) in schedule.iter().enumerate() {
        match step {
            Step::Fail => fails += 1,
            Step::Vanish => vanished += 1,
            Step::Drain => {}
        }
        if fails == DELIVERY_LIMIT {
            return (i, End::Failed(fails));
        }
        if vanished == LOST_LIMIT {
            return (i, End::Lost);
        }
    }
    panic!("schedule too short: {schedule:?}");
}

/// Runs `schedule` through the worker's settling against a queue counting by `rule`:
/// (steps taken, how it ended).
async fn run(rule: ReturnCounting, schedule: &[Step]) -> (usize, End) {
    let queue = MemoryQueue::counting(LOST_LIMIT, rule);
    queue.declare("w").await.unwrap();
    queue
        .publish("w", br#"{"v":1,"job_id":"j","segment":0}"#.to_vec())
        .await
        .unwrap();
    let mut consumer = queue.consume("w", 1).await.unwrap();
    let crashed = || FarmError::ChildCrashed {
        what: "encode".into(),
        detail: "signal 11".into(),
    };
    for (i, step) in schedule.iter().enumerate() {
        if queue.ready_len("w") == 0 {
            let dead = queue.drain(&dead_letter_queue("w"));
            assert_eq!(dead.len(), 1, "neither ready nor dead-lettered");
            return (i - 1, End::Lost);
        }
        let next = tokio::time::timeout(Duration::from_secs(5), consumer.next());
        let delivery = next.await.expect("a delivery").unwrap().unwrap();
        let attempts = Attempts::of(&delivery);
        // What run_task checks first (segment.rs).
        if attempts.lost >= LOST_LIMIT {
            delivery.acker.ack().await.unwrap();
            return (i - 1, End::Lost);
        }
        match step {
            Step::Vanish => drop(delivery),
            Step::Drain => republish(&queue, delivery, "w", attempts.bounced()).await,
            Step::Fail => match verdict(&crashed(), &attempts, DELIVERY_LIMIT) {
                Verdict::Retry => republish(&queue, delivery, "w", attempts.failed_once()).await,
                Verdict::Final { recorded } => {
                    assert!(!recorded, "a crashed child is not an input error");
                    delivery.acker.reject(false).await.unwrap();
                    let dead = queue.drain(&dead_letter_queue("w"));
                    assert_eq!(dead.len(), 1, "the last attempt is dead-lettered");
                    return (i, End::Failed(attempts.failed + 1));
                }
                Verdict::Bounce => panic!("a crashed child is the task's own fault"),
            },
        }
    }
    if queue.ready_len("w") == 0 && !queue.drain(&dead_letter_queue("w")).is_empty() {
        return (schedule.len() - 1, End::Lost);
    }
    panic!("schedule ran out with the task still going: {schedule:?}");
}

/// A schedule from `seed`: steps drawn until both limits could have been reached.
fn schedule(seed: u64) -> Vec<Step> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut steps = Vec::new();
    let mut drains = 0;
    while steps.len() < 40 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let step = match x % 5 {
            0 | 1 => Step::Fail,
            2 | 3 => Step::Vanish,
            _ if drains < 10 => Step::Drain,
            _ => Step::Vanish,
        };
        drains += u32::from(step == Step::Drain);
        steps.push(step);
    }
    steps
}

#[tokio::test]
async fn every_schedule_ends_at_the_first_limit_reached_whatever_the_broker_counts() {
    for seed in 0..300 {
        let steps = schedule(seed);
        let want = expected(&steps);
        for rule in [ReturnCounting::Every, ReturnCounting::VanishedOnly] {
            let got = run(rule, &steps).await;
            assert_eq!(got, want, "seed {seed}, {rule:?}: {steps:?}");
        }
    }
}

#[tokio::test]
async fn a_task_failing_every_time_fails_at_exactly_its_limit_under_both_rules() {
    let fails = vec![Step::Fail; 10];
    let drained_between: Vec<Step> = [Step::Drain, Step::Fail].repeat(5);
    for rule in [ReturnCounting::Every, ReturnCounting::VanishedOnly] {
        assert_eq!(run(rule, &fails).await, (2, End::Failed(DELIVERY_LIMIT)));
        // Drains spend nothing: the third failure is still the last.
        assert_eq!(
            run(rule, &drained_between).await,
            (5, End::Failed(DELIVERY_LIMIT))
        );
    }
}
