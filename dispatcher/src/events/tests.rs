//! The router with an in-process fake delivery: what a job gets, in which order, how often.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tessera_farm::queue::{Acker, Consumer, Delivery};
use tessera_farm::FarmError;

use super::{EventRouter, JobEvents, Phase, Unrouted};
use crate::db::Db;

/// How each fake delivery was settled, by its body.
type Settled = Arc<Mutex<Vec<(String, &'static str)>>>;

struct FakeAcker {
    body: String,
    settled: Settled,
}

#[async_trait]
impl Acker for FakeAcker {
    async fn ack(&self) -> Result<(), FarmError> {
        self.settled
            .lock()
            .unwrap()
            .push((self.body.clone(), "ack"));
        Ok(())
    }
    async fn reject(&self, requeue: bool) -> Result<(), FarmError> {
        let how = if requeue { "requeue" } else { "dead" };
        self.settled.lock().unwrap().push((self.body.clone(), how));
        Ok(())
    }
}

/// An event of `job` numbered `n`, as the broker would deliver it.
fn event(job: &str, n: usize, settled: &Settled) -> Delivery {
    let body = serde_json::json!({ "job_id": job, "n": n }).to_string();
    Delivery {
        body: body.clone().into_bytes(),
        redeliveries: 0,
        dead_reason: None,
        acker: Box::new(FakeAcker {
            body,
            settled: settled.clone(),
        }),
    }
}

fn number(d: &Delivery) -> usize {
    let v: serde_json::Value = serde_json::from_slice(&d.body).unwrap();
    v["n"].as_u64().unwrap() as usize
}

/// Routes events `range` of `job`; each must be taken by the job.
async fn route_all(router: &EventRouter, job: &str, range: std::ops::Range<usize>, s: &Settled) {
    for n in range {
        assert!(
            router.route(event(job, n, s)).await.is_ok(),
            "event {n} not routed"
        );
    }
}

/// Reads `count` events, acking each; returns their numbers.
async fn read_acking(events: &mut JobEvents, count: usize) -> Vec<usize> {
    let mut got = Vec::new();
    for _ in 0..count {
        let d = events.next().await.unwrap().unwrap();
        got.push(number(&d));
        d.acker.ack().await.unwrap();
    }
    got
}

#[tokio::test]
async fn events_of_a_job_not_reading_are_acked_at_once_then_read_first_in_order_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&dir.path().join("jobs.db")).unwrap();
    let router = EventRouter::durable(db.clone());
    let settled = Settled::default();
    let mut events = router.register("j1");
    route_all(&router, "j1", 0..5, &settled).await;
    // Acked to the broker while the job has not read one: no consumer timeout can pass.
    let acked: Vec<_> = settled.lock().unwrap().iter().map(|s| s.1).collect();
    assert_eq!(acked, vec!["ack"; 5]);
    assert!(db.held_event_after("j1", 0).unwrap().is_some());
    // The job starts reading: the held ones first, then live ones, each once.
    assert_eq!(read_acking(&mut events, 3).await, vec![0, 1, 2]);
    route_all(&router, "j1", 5..7, &settled).await; // still held: not drained yet
    assert_eq!(read_acking(&mut events, 4).await, vec![3, 4, 5, 6]);
    // The job asks for more: nothing is held, it turns live and waits on its channel.
    let phase = router.routes.lock().unwrap()["j1"].phase.clone();
    let reading = tokio::spawn(async move { read_acking(&mut events, 2).await });
    while *phase.lock().await != Phase::Live {
        tokio::task::yield_now().await;
    }
    route_all(&router, "j1", 7..9, &settled).await;
    assert_eq!(
        settled.lock().unwrap().len(),
        7,
        "live events acked by the router"
    );
    assert_eq!(reading.await.unwrap(), vec![7, 8]);
    assert_eq!(settled.lock().unwrap().len(), 9);
    assert!(
        db.held_event_after("j1", 0).unwrap().is_none(),
        "acked rows stay"
    );
    // Other jobs' and unreadable events are as before: orphans and poison.
    let orphan = router.route(event("other", 0, &settled)).await;
    assert!(matches!(orphan, Err(Unrouted::Orphan(_))));
    let mut bad = event("j1", 0, &settled);
    bad.body = b"not json".to_vec();
    assert!(matches!(router.route(bad).await, Err(Unrouted::Poison(_))));
}

#[tokio::test]
async fn held_events_not_acked_come_back_after_a_crash_and_go_when_the_job_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let settled = Settled::default();
    {
        let router = EventRouter::durable(Db::open(&path).unwrap());
        let mut events = router.register("j1");
        route_all(&router, "j1", 0..4, &settled).await;
        assert_eq!(read_acking(&mut events, 1).await, vec![0]);
        // Read, then given back (requeued) and left unsettled: both stay held.
        let d = events.next().await.unwrap().unwrap();
        d.acker.reject(true).await.unwrap();
        let _unsettled = events.next().await.unwrap().unwrap();
        // The dispatcher dies here.
    }
    let db = Db::open(&path).unwrap();
    let router = EventRouter::durable(db.clone());
    let mut events = router.register("j1");
    assert_eq!(read_acking(&mut events, 1).await, vec![1]);
    // An unreadable one dropped by the job goes for good, like a dead-lettered delivery.
    let d = events.next().await.unwrap().unwrap();
    assert_eq!(number(&d), 2);
    d.acker.reject(false).await.unwrap();
    assert!(
        db.held_event_after("j1", 0).unwrap().is_some(),
        "event 3 held"
    );
    // The job ends before reading the last one: its rows go, later events are orphans.
    router.unregister("j1").await;
    assert!(db.held_event_after("j1", 0).unwrap().is_none());
    let late = router.route(event("j1", 9, &settled)).await;
    assert!(matches!(late, Err(Unrouted::Orphan(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_routed_while_the_job_turns_live_are_all_read_once_in_order() {
    let db = Db::open(Path::new(":memory:")).unwrap();
    let router = EventRouter::durable(db.clone());
    let settled = Settled::default();
    const EVENTS: usize = 40;
    for round in 0..50 {
        let job = format!("j{round}");
        let mut events = router.register(&job);
        route_all(&router, &job, 0..round % 5, &settled).await;
        // The router keeps routing while the job drains what is held and turns live.
        let routing = {
            let (router, job, settled) = (router.clone(), job.clone(), settled.clone());
            tokio::spawn(async move { route_all(&router, &job, round % 5..EVENTS, &settled).await })
        };
        // Read up to the last event: one stored after the job turned live would be missed
        // (it stays in the table), and the last one, live, would come without it.
        let mut got = Vec::new();
        while got.last() != Some(&(EVENTS - 1)) {
            got.extend(read_acking(&mut events, 1).await);
        }
        routing.await.unwrap();
        assert_eq!(got, (0..EVENTS).collect::<Vec<_>>(), "round {round}");
        router.unregister(&job).await;
    }
    // Every event was settled exactly once: by the router (held) or by the job (live).
    let settled = settled.lock().unwrap();
    assert_eq!(settled.len(), 50 * EVENTS);
    assert!(settled.iter().all(|s| s.1 == "ack"));
    assert!(db.held_event_after("j0", 0).unwrap().is_none());
}

#[tokio::test]
async fn without_a_database_events_wait_in_memory_as_before() {
    let router = EventRouter::default();
    let settled = Settled::default();
    let mut events = router.register("j1");
    route_all(&router, "j1", 0..3, &settled).await;
    assert!(settled.lock().unwrap().is_empty(), "acked by the router");
    assert_eq!(read_acking(&mut events, 3).await, vec![0, 1, 2]);
}
