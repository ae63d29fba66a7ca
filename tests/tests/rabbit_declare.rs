//! What tessera declares on the broker, on every version it supports (Debian 12's RabbitMQ
//! 3.10 by default, RabbitMQ 4.x with 4.3's defaults through `scripts/rabbit4.sh`:
//! tests/src/rabbit.rs): the farm's queues are all durable and accepted where transient
//! non-exclusive queues are refused; a refusal names the queue and the broker's reply; what
//! an earlier release declared otherwise keeps working.

use std::time::Duration;

use tessera_farm::queue::{
    dead_letter_queue, declare_farm_queues, Queue, RabbitQueue, FARM_QUEUES,
};
use tessera_farm::FarmError;
use tessera_model::wire::{QUEUE_ENCODE_CPU, QUEUE_STATUS};
use tessera_tests::rabbit::{connect, next, rabbit_addr, wait_ready_len, TestVhost};

const QUEUE: &str = "tessera.test.work";

/// A queue declared in a fresh vhost.
async fn setup(tag: &str, delivery_limit: u32) -> (TestVhost, RabbitQueue) {
    let vhost = TestVhost::new(tag);
    let q = connect(&vhost, delivery_limit).await;
    q.declare(QUEUE).await.expect("declare");
    (vhost, q)
}

#[tokio::test]
async fn declare_is_idempotent_and_undeclared_is_an_error() {
    let (vhost, q) = setup("declare", 5).await;
    q.declare(QUEUE).await.expect("declare twice");
    connect(&vhost, 5)
        .await
        .declare(QUEUE)
        .await
        .expect("declare from another connection");
    assert_eq!(q.ready_len(&dead_letter_queue(QUEUE)).await.unwrap(), 0);
    let queues = vhost.list_queues();
    for name in [QUEUE.to_string(), dead_letter_queue(QUEUE)] {
        let line = queues
            .lines()
            .find(|l| l.split('\t').next() == Some(name.as_str()));
        let line = line.unwrap_or_else(|| panic!("{name} missing from\n{queues}"));
        assert!(
            line.contains("quorum"),
            "{name} must be a quorum queue: {line}"
        );
    }
    let work = queues
        .lines()
        .find(|l| l.starts_with(&format!("{QUEUE}\t")));
    let work = work.unwrap();
    // 5 deliveries = the first one and 4 returns (RabbitMQ counts returns).
    for arg in [
        r#"{"x-delivery-limit",4}"#,
        r#"{"x-dead-letter-exchange","tessera.dlx"}"#,
        r#"{"x-dead-letter-routing-key","tessera.test.work.dead"}"#,
    ] {
        assert!(work.contains(arg), "{QUEUE} lacks {arg}: {work}");
    }
    let heartbeats = vhost.list_connections(&["timeout"]);
    assert!(
        !heartbeats.trim().is_empty() && heartbeats.lines().all(|l| l.trim() == "30"),
        "heartbeat must be 30 s: {heartbeats:?}"
    );
    let err = q.publish("tessera.test.nowhere", b"x".to_vec()).await;
    assert!(
        err.is_err(),
        "publishing to an undeclared queue must not vanish"
    );
    assert!(q.ready_len("tessera.test.nowhere").await.is_err());
    // The client still works after those broker-side errors.
    q.publish(QUEUE, b"ok".to_vec()).await.unwrap();
    wait_ready_len(&q, QUEUE, 1).await;
    q.close().await;
}

/// A reports queue on the broker keeps the newest `max_len` messages, drops unread ones after
/// their time to live, has no dead-letter queue, and is declared alike from any connection
/// (the workers and the dispatcher both declare it).
#[tokio::test]
async fn a_reports_queue_keeps_the_newest_and_lets_old_ones_expire() {
    const REPORTS: &str = "tessera.test.reports";
    let vhost = TestVhost::new("reports");
    let q = connect(&vhost, 5).await;
    let ttl = Duration::from_millis(1500);
    q.declare_reports(REPORTS, 3, ttl).await.expect("declare");
    connect(&vhost, 5)
        .await
        .declare_reports(REPORTS, 3, ttl)
        .await
        .expect("declared alike from another connection");
    for i in 0..5u8 {
        q.publish(REPORTS, vec![b'0' + i]).await.expect("publish");
    }
    assert_eq!(q.ready_len(REPORTS).await.unwrap(), 3, "the oldest dropped");
    let mut c = q.consume(REPORTS, 10).await.expect("consume");
    let mut got = Vec::new();
    for _ in 0..3 {
        let d = next(&mut c).await;
        got.push(d.body.clone());
        d.acker.ack().await.expect("ack");
    }
    assert_eq!(got, [b"2".to_vec(), b"3".to_vec(), b"4".to_vec()]);
    drop(c);
    q.publish(REPORTS, b"stale".to_vec())
        .await
        .expect("publish");
    wait_ready_len(&q, REPORTS, 0).await;
    let queues = vhost.list_queues();
    assert!(
        !queues.contains(&dead_letter_queue(REPORTS)),
        "no dead-letter queue: {queues}"
    );
    let line = queues
        .lines()
        .find(|l| l.starts_with(&format!("{REPORTS}\t")))
        .unwrap_or_else(|| panic!("{REPORTS} missing from\n{queues}"));
    assert!(line.contains("classic"), "{line}");
}

#[tokio::test]
async fn every_queue_of_the_farm_is_durable_and_accepted() {
    let vhost = TestVhost::new("farmq");
    let q = connect(&vhost, 5).await;
    declare_farm_queues(&q)
        .await
        .expect("the farm's queues declared");
    // Declared again from another connection, as every worker and the dispatcher do.
    declare_farm_queues(&connect(&vhost, 5).await)
        .await
        .expect("declared alike again");
    let work = FARM_QUEUES;
    let dead = work.map(dead_letter_queue);
    let all = work.iter().copied().chain(dead.iter().map(String::as_str));
    for name in all.chain([QUEUE_STATUS]) {
        assert_eq!(
            vhost.queue_info(name, "durable").as_deref(),
            Some("true"),
            "{name} must be durable: {}",
            vhost.list_queues()
        );
    }
    let status = vhost
        .queue_info(QUEUE_STATUS, "arguments")
        .unwrap_or_default();
    for arg in [
        "x-max-length",
        "x-max-length-bytes",
        "x-message-ttl",
        "drop-head",
    ] {
        assert!(status.contains(arg), "{QUEUE_STATUS} lacks {arg}: {status}");
    }
    // Consumers take per-consumer prefetch (never global QoS, refused by RabbitMQ 4.3).
    let mut c = q.consume(QUEUE_ENCODE_CPU, 2).await.expect("consume");
    q.publish(QUEUE_ENCODE_CPU, b"t".to_vec())
        .await
        .expect("publish");
    next(&mut c).await.acker.ack().await.expect("ack");
    q.close().await;
}

#[tokio::test]
async fn a_refused_declaration_names_the_queue_and_the_broker_reply() {
    let vhost = TestVhost::new("refused");
    let q = connect(&vhost, 5).await;
    const CLASH: &str = "tessera.test.clash";
    q.declare_reports(CLASH, 10, Duration::from_secs(30))
        .await
        .expect("a classic queue");
    let err = q
        .declare(CLASH)
        .await
        .expect_err("a quorum queue of the same name");
    let shown = err.to_string();
    match &err {
        FarmError::QueueRefused { queue, reason } => {
            assert_eq!(queue, CLASH);
            assert!(reason.contains("PRECONDITION_FAILED"), "{reason}");
            assert!(reason.contains("inequivalent arg"), "{reason}");
        }
        other => panic!("not a refusal: {other:?}"),
    }
    assert!(
        shown.contains(CLASH) && shown.contains("refused"),
        "{shown}"
    );
    assert_eq!(err.code().as_str(), "queue_refused");
    // The connection still works after the refusal (only a channel was closed).
    q.declare(QUEUE).await.expect("another queue");
    q.close().await;
}

#[tokio::test]
async fn a_queue_declared_with_an_earlier_delivery_limit_is_kept() {
    // A release before issue 45 declared x-delivery-limit = delivery_limit - 1 (4).
    let (vhost, old) = setup("kept", 5).await;
    old.publish(QUEUE, b"queued before the upgrade".to_vec())
        .await
        .expect("publish");
    let mut cfg = vhost.config(5);
    cfg.lost_limit = 20;
    let new = RabbitQueue::connect(cfg).await.expect("connect");
    new.declare(QUEUE).await.expect("kept as declared");
    let args = vhost.queue_info(QUEUE, "arguments").unwrap_or_default();
    assert!(args.contains("x-delivery-limit"), "{args}");
    assert!(
        !args.contains(",19}") && !args.contains("19"),
        "redeclared: {args}"
    );
    wait_ready_len(&new, QUEUE, 1).await;
    let mut c = new.consume(QUEUE, 1).await.expect("consume");
    assert_eq!(next(&mut c).await.body, b"queued before the upgrade");
    new.close().await;
    old.close().await;
}

/// A status queue as the releases before issue 45 declared it: transient, not exclusive.
/// `Err` with the broker's reply where the broker refuses such queues (RabbitMQ 4.3's default).
async fn declare_transient(vhost: &TestVhost, name: &str) -> Result<(), String> {
    use lapin::options::QueueDeclareOptions;
    use lapin::{Connection, ConnectionProperties};
    let uri = vhost.uri();
    let conn = Connection::connect(&uri, ConnectionProperties::default())
        .await
        .expect("connect");
    let ch = conn.create_channel().await.expect("channel");
    let declared = ch
        .queue_declare(
            name.into(),
            QueueDeclareOptions::default(),
            Default::default(),
        )
        .await;
    let _ = conn.close(200, "OK".into()).await;
    declared.map(|_| ()).map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_transient_status_queue_is_kept_where_the_broker_still_allows_one() {
    let vhost = TestVhost::new("transient");
    match declare_transient(&vhost, QUEUE_STATUS).await {
        // RabbitMQ before 4.3 (and 4.x permitting the feature): the old queue is used.
        Ok(()) => {
            let q = connect(&vhost, 5).await;
            tessera_farm::queue::declare_status_queue(&q)
                .await
                .expect("kept as declared");
            assert_eq!(
                vhost.queue_info(QUEUE_STATUS, "durable").as_deref(),
                Some("false")
            );
            q.publish(QUEUE_STATUS, b"{}".to_vec())
                .await
                .expect("a report");
            q.close().await;
        }
        // RabbitMQ 4.3's default: no such queue can exist, and ours is accepted.
        Err(reply) => {
            assert!(reply.contains("transient_nonexcl_queues"), "{reply}");
            let q = connect(&vhost, 5).await;
            tessera_farm::queue::declare_status_queue(&q)
                .await
                .unwrap_or_else(|e| panic!("refused on {}: {e}", rabbit_addr()));
            q.close().await;
        }
    }
}
