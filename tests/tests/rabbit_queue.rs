//! `RabbitQueue` against the real broker (Debian's RabbitMQ 3.10 at 127.0.0.1:5672, or 4.x:
//! tests/src/rabbit.rs): the semantics of the embedded queue (ack, redelivery count, delivery
//! limit, dead-lettering, prefetch, requeue of unsettled work) plus what only a broker has
//! (connections that close or break, confirms, authentication). Each test runs in a vhost of
//! its own. Declarations: rabbit_declare.rs.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tessera_farm::queue::{dead_letter_queue, Consumer, Queue, RabbitQueue};
use tessera_farm::FarmError;
use tessera_tests::rabbit::{connect, next, wait_ready_len, TestVhost, ARRIVE};

const QUEUE: &str = "tessera.test.work";
/// How long "nothing arrives" is watched for.
const QUIET: Duration = Duration::from_millis(1500);

/// A queue declared in a fresh vhost.
async fn setup(tag: &str, delivery_limit: u32) -> (TestVhost, RabbitQueue) {
    let vhost = TestVhost::new(tag);
    let q = connect(&vhost, delivery_limit).await;
    q.declare(QUEUE).await.expect("declare");
    (vhost, q)
}

/// Asserts that nothing is delivered within [`QUIET`].
async fn assert_quiet(c: &mut Box<dyn Consumer>, why: &str) {
    if let Ok(got) = tokio::time::timeout(QUIET, c.next()).await {
        panic!("{why}: got {got:?}");
    }
}

#[tokio::test]
async fn publish_consume_ack_removes_the_message() {
    let (_vhost, q) = setup("ack", 5).await;
    q.publish(QUEUE, br#"{"n":1}"#.to_vec()).await.unwrap();
    wait_ready_len(&q, QUEUE, 1).await;
    let mut c = q.consume(QUEUE, 1).await.unwrap();
    let d = next(&mut c).await;
    assert_eq!((d.body.as_slice(), d.redeliveries), (&br#"{"n":1}"#[..], 0));
    assert_eq!(q.ready_len(QUEUE).await.unwrap(), 0, "unacked is not ready");
    d.acker.ack().await.unwrap();
    d.acker.ack().await.expect("settling twice is a no-op");
    drop(d);
    drop(c);
    let mut again = q.consume(QUEUE, 1).await.unwrap();
    assert_quiet(&mut again, "an acked message must be gone").await;
    assert_eq!(q.ready_len(QUEUE).await.unwrap(), 0);
    q.close().await;
}

#[tokio::test]
async fn a_requeue_counts_redeliveries() {
    let (_vhost, q) = setup("redeliver", 5).await;
    q.publish(QUEUE, b"x".to_vec()).await.unwrap();
    let mut c = q.consume(QUEUE, 1).await.unwrap();
    for attempt in 0..3 {
        let d = next(&mut c).await;
        assert_eq!((d.body.as_slice(), d.redeliveries), (&b"x"[..], attempt));
        d.acker.reject(true).await.unwrap();
    }
    next(&mut c).await.acker.ack().await.unwrap();
    q.close().await;
}

/// Nacks (requeue) every delivery of one message on a queue with `limit`, checking that it
/// is delivered exactly `limit` times and then sits in the dead-letter queue.
async fn check_delivery_limit(vhost: &TestVhost, queue: &str, limit: u32) {
    let q = connect(vhost, limit).await;
    q.declare(queue).await.unwrap();
    q.publish(queue, b"poison".to_vec()).await.unwrap();
    let mut c = q.consume(queue, 1).await.unwrap();
    for attempt in 0..limit {
        let d = next(&mut c).await;
        assert_eq!(d.redeliveries, attempt, "limit {limit}");
        d.acker.reject(true).await.unwrap();
    }
    assert_quiet(&mut c, "past the delivery limit nothing is redelivered").await;
    wait_ready_len(&q, &dead_letter_queue(queue), 1).await;
    assert_eq!(q.ready_len(queue).await.unwrap(), 0);
    let mut dead = q.consume(&dead_letter_queue(queue), 1).await.unwrap();
    let d = next(&mut dead).await;
    assert_eq!(d.body, b"poison");
    d.acker.ack().await.unwrap();
    q.close().await;
}

#[tokio::test]
async fn delivery_limit_dead_letters() {
    let vhost = TestVhost::new("limit");
    check_delivery_limit(&vhost, "tessera.test.limit3", 3).await;
    check_delivery_limit(&vhost, "tessera.test.limit1", 1).await;
}

#[tokio::test]
async fn a_reject_without_requeue_dead_letters_at_once() {
    let (_vhost, q) = setup("reject", 5).await;
    q.publish(QUEUE, b"bad".to_vec()).await.unwrap();
    let mut c = q.consume(QUEUE, 1).await.unwrap();
    let d = next(&mut c).await;
    assert_eq!(d.redeliveries, 0);
    d.acker.reject(false).await.unwrap();
    let mut dead = q.consume(&dead_letter_queue(QUEUE), 1).await.unwrap();
    let d = next(&mut dead).await;
    assert_eq!(d.body, b"bad");
    d.acker.ack().await.unwrap();
    assert_quiet(&mut c, "a dead-lettered message is not redelivered").await;
    assert_eq!(q.ready_len(QUEUE).await.unwrap(), 0);
    q.close().await;
}

#[tokio::test]
async fn prefetch_holds_back_until_settled() {
    let (_vhost, q) = setup("prefetch", 5).await;
    for i in 0..3u8 {
        q.publish(QUEUE, vec![i]).await.unwrap();
    }
    let mut c = q.consume(QUEUE, 2).await.unwrap();
    let d0 = next(&mut c).await;
    let d1 = next(&mut c).await;
    assert_eq!((d0.body.clone(), d1.body.clone()), (vec![0], vec![1]));
    assert_quiet(&mut c, "prefetch 2 must hold the third message back").await;
    d0.acker.ack().await.unwrap();
    let d2 = next(&mut c).await;
    assert_eq!(d2.body, vec![2]);
    d1.acker.ack().await.unwrap();
    d2.acker.ack().await.unwrap();
    q.close().await;
}

#[tokio::test]
async fn dropped_delivery_comes_back() {
    let (_vhost, q) = setup("drop", 5).await;
    q.publish(QUEUE, b"job".to_vec()).await.unwrap();
    let mut c = q.consume(QUEUE, 1).await.unwrap();
    drop(next(&mut c).await); // its worker task died
    let d = next(&mut c).await;
    assert_eq!((d.body.as_slice(), d.redeliveries), (&b"job"[..], 1));
    d.acker.ack().await.unwrap();
    q.close().await;
}

#[tokio::test]
async fn dropped_consumer_lets_in_flight_work_finish() {
    // A worker told to stop (spot notice) drops its consumer and finishes what it holds.
    let (_vhost, q) = setup("stop", 5).await;
    for i in 0..2u8 {
        q.publish(QUEUE, vec![i]).await.unwrap();
    }
    let mut c = q.consume(QUEUE, 2).await.unwrap();
    let d0 = next(&mut c).await;
    tokio::time::sleep(Duration::from_millis(500)).await; // message 1 is prefetched by now
    drop(c);
    let mut c2 = q.consume(QUEUE, 1).await.unwrap();
    let d1 = next(&mut c2).await;
    assert_eq!(
        (d1.body.clone(), d1.redeliveries),
        (vec![1], 1),
        "prefetched one back"
    );
    d0.acker
        .ack()
        .await
        .expect("in-flight work acks after its consumer is gone");
    d1.acker.ack().await.unwrap();
    assert_quiet(&mut c2, "acked messages stay gone").await;
    q.close().await;
}

#[tokio::test]
async fn closed_connection_returns_unacked() {
    let (vhost, q) = setup("close", 5).await;
    q.publish(QUEUE, b"held".to_vec()).await.unwrap();
    let mut c = q.consume(QUEUE, 1).await.unwrap();
    let held = next(&mut c).await;
    q.close().await;
    let end = tokio::time::timeout(ARRIVE, c.next())
        .await
        .expect("consumer ends");
    assert!(
        matches!(end, Ok(None)),
        "a closed consumer ends cleanly: {end:?}"
    );
    assert!(held.acker.ack().await.is_err(), "ack after close must fail");
    assert!(q.publish(QUEUE, b"late".to_vec()).await.is_err());

    let other = connect(&vhost, 5).await;
    let mut c2 = other.consume(QUEUE, 1).await.unwrap();
    let d = next(&mut c2).await;
    assert_eq!((d.body.as_slice(), d.redeliveries), (&b"held"[..], 1));
    d.acker.ack().await.unwrap();
    other.close().await;
}

#[test]
fn dead_worker_returns_unacked() {
    // A worker process dies: its runtime (and so its socket) goes away with a delivery
    // unsettled, and the delivery is dropped where no runtime runs.
    let vhost = TestVhost::new("dead");
    let cfg = vhost.config(5);
    let worker = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (q, c, d) = worker.block_on(async {
        let q = RabbitQueue::connect(cfg.clone()).await.unwrap();
        q.declare(QUEUE).await.unwrap();
        q.publish(QUEUE, b"orphan".to_vec()).await.unwrap();
        let mut c = q.consume(QUEUE, 1).await.unwrap();
        let d = next(&mut c).await;
        (q, c, d)
    });
    drop(worker);
    drop((d, c, q));

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let q = RabbitQueue::connect(cfg).await.unwrap();
        let mut c = q.consume(QUEUE, 1).await.unwrap();
        let d = next(&mut c).await;
        assert_eq!((d.body.as_slice(), d.redeliveries), (&b"orphan"[..], 1));
        d.acker.ack().await.unwrap();
        q.close().await;
    });
}

#[tokio::test]
async fn lost_connection_fails_consumer_then_reconnects() {
    let (vhost, q) = setup("lost", 5).await;
    q.publish(QUEUE, b"inflight".to_vec()).await.unwrap();
    let mut c = q.consume(QUEUE, 1).await.unwrap();
    let held = next(&mut c).await;
    vhost.close_connections(); // the broker drops us, as a network failure would
    let end = tokio::time::timeout(ARRIVE, c.next())
        .await
        .expect("consumer ends");
    assert!(
        end.is_err(),
        "a consumer on a lost connection must fail: {end:?}"
    );
    assert!(c.next().await.is_err(), "and stay failed");
    assert!(
        held.acker.ack().await.is_err(),
        "ack on a lost channel must fail"
    );
    drop(held);

    // The same RabbitQueue reconnects on its next use.
    let mut c = q.consume(QUEUE, 1).await.expect("re-consume reconnects");
    let d = next(&mut c).await;
    assert_eq!((d.body.as_slice(), d.redeliveries), (&b"inflight"[..], 1));
    d.acker.ack().await.unwrap();
    q.publish(QUEUE, b"after".to_vec()).await.unwrap();
    next(&mut c).await.acker.ack().await.unwrap();
    q.close().await;
}

#[tokio::test]
async fn reconnects_with_backoff_while_broker_refuses() {
    let (vhost, q) = setup("backoff", 5).await;
    vhost.delete(); // connections dropped, and reconnecting is refused until it is back
    let start = Instant::now();
    while q.declare(QUEUE).await.is_ok() {
        assert!(
            start.elapsed() < ARRIVE,
            "the lost connection goes unnoticed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Each failed attempt doubles the wait before the next one: 1 s, 2 s, ...
    let mut waits = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let err = q.declare(QUEUE).await.expect_err("vhost is gone");
        assert!(matches!(err, FarmError::Queue { .. }));
        waits.push(t.elapsed());
    }
    let total: Duration = waits.iter().sum();
    assert!(
        total >= Duration::from_millis(2800),
        "no backoff: {waits:?}"
    );
    assert!(
        waits[2] >= Duration::from_millis(1800),
        "backoff must grow: {waits:?}"
    );
    assert!(
        waits[2] <= Duration::from_secs(6),
        "backoff too long: {waits:?}"
    );

    vhost.create();
    let deadline = Instant::now() + Duration::from_secs(40);
    while let Err(e) = q.declare(QUEUE).await {
        assert!(Instant::now() < deadline, "never reconnected: {e}");
    }
    q.publish(QUEUE, b"back".to_vec()).await.unwrap();
    let mut c = q.consume(QUEUE, 1).await.unwrap();
    next(&mut c).await.acker.ack().await.unwrap();
    q.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_publishes_arrive_exactly_once() {
    let (_vhost, q) = setup("concurrent", 5).await;
    let start = Instant::now();
    let tasks: Vec<_> = (0..50u32)
        .map(|i| {
            let q = q.clone();
            tokio::spawn(async move { q.publish(QUEUE, i.to_string().into_bytes()).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().expect("publish");
    }
    let took = start.elapsed();
    assert!(took < Duration::from_secs(5), "50 publishes took {took:?}");
    let mut c = q.consume(QUEUE, 64).await.unwrap();
    let mut seen = BTreeSet::new();
    for _ in 0..50 {
        let d = next(&mut c).await;
        let n: u32 = String::from_utf8(d.body.clone()).unwrap().parse().unwrap();
        assert!(seen.insert(n), "message {n} delivered twice");
        assert_eq!(d.redeliveries, 0);
        d.acker.ack().await.unwrap();
    }
    assert_eq!(seen, (0..50).collect::<BTreeSet<u32>>());
    assert_quiet(&mut c, "exactly 50 messages").await;
    q.close().await;
}

#[tokio::test]
async fn wrong_password_fails_clearly_and_in_time() {
    let vhost = TestVhost::new("auth");
    let secret = "not-the-password-42";
    let mut cfg = vhost.config(5);
    cfg.uri = vhost.uri_with_password(secret);
    cfg.connect_timeout = Duration::from_secs(5);
    let start = Instant::now();
    let res = tokio::time::timeout(Duration::from_secs(20), RabbitQueue::connect(cfg)).await;
    let err = match res.expect("connect must give up within its timeout") {
        Ok(_) => panic!("a wrong password must not connect"),
        Err(e) => e,
    };
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "took {:?}",
        start.elapsed()
    );
    let msg = err.to_string();
    assert!(matches!(err, FarmError::Queue { .. }), "{msg}");
    assert!(!msg.contains(secret), "the password leaked: {msg}");
    let shown = format!("{:?}", vhost.config(5));
    assert!(
        shown.contains("guest:***@") && !shown.contains("guest:guest"),
        "{shown}"
    );
    assert!(
        msg.contains("ACCESS_REFUSED") || msg.to_lowercase().contains("auth"),
        "the error must say the login was refused: {msg}"
    );
}
