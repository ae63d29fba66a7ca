//! The RabbitMQ queue (lapin): durable quorum queues with an explicit delivery limit and
//! dead-lettering, persistent messages with publisher confirms, manual acks.
//!
//! Why: the distributed farm shares segment work between machines through the operators'
//! broker, with the same semantics as the embedded [`super::MemoryQueue`].
//!
//! Choices worth knowing:
//! - `RabbitConfig::delivery_limit` counts deliveries, like the memory queue: a message
//!   delivered that many times without an ack is dead-lettered. RabbitMQ's `x-delivery-limit`
//!   counts *returns* (it dead-letters on return number limit + 1), so the queue is declared
//!   with `x-delivery-limit = delivery_limit - 1`.
//! - A [`Delivery`] dropped unsettled is nacked with requeue by a task spawned on the current
//!   tokio runtime (closing the channel would also return the consumer's other deliveries).
//!   Without a runtime it returns when its channel closes. Each delivery keeps its channel
//!   open, so dropping the consumer (which cancels it) lets in-flight work still be acked.
//! - After the connection drops, the next operation reconnects, at most once per backoff step
//!   (1 s doubling to 30 s); a consumer on the dead connection returns `Err`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::{FutureExt, StreamExt};
use lapin::options::*;
use lapin::types::{AMQPValue, FieldTable};
use lapin::{uri::AMQPUri, BasicProperties, Channel, Confirmation, Connection};
use lapin::{ConnectionProperties, ExchangeKind};
use tokio::sync::Mutex;
use tokio::time::{timeout, Instant};

use super::{dead_letter_queue, Acker, Consumer, Delivery, Queue};
use crate::FarmError;

/// The durable direct exchange every tessera queue dead-letters through.
const DEAD_LETTER_EXCHANGE: &str = "tessera.dlx";
/// Heartbeat asked of the broker unless the URI sets one.
const HEARTBEAT_S: u16 = 30;
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// A [`FarmError::Queue`] for `queue` with a formatted reason.
macro_rules! queue_err {
    ($queue:expr, $($reason:tt)+) => {
        FarmError::Queue { queue: $queue.to_string(), reason: format!($($reason)+) }
    };
}

/// How to reach RabbitMQ and how its queues behave.
///
/// Why: the worker and dispatcher binaries build it from their settings; `Debug` hides the
/// password so the config can be logged.
#[derive(Clone)]
pub struct RabbitConfig {
    /// `amqp://user:pass@host:port/vhost` (vhost percent-encoded; `?heartbeat=N` allowed).
    pub uri: String,
    /// Deliveries of one message before it goes to the dead-letter queue (at least 1).
    pub delivery_limit: u32,
    /// Limit for opening the connection (TCP and AMQP handshake).
    pub connect_timeout: Duration,
    /// Limit for every other broker operation (declare, publish confirm, ack, ...).
    pub op_timeout: Duration,
}

impl RabbitConfig {
    /// A config with the defaults: delivery limit 5, connect timeout 10 s, op timeout 30 s.
    pub fn new(uri: impl Into<String>) -> Self {
        RabbitConfig {
            uri: uri.into(),
            delivery_limit: 5,
            connect_timeout: Duration::from_secs(10),
            op_timeout: Duration::from_secs(30),
        }
    }
}

impl std::fmt::Debug for RabbitConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitConfig")
            .field("uri", &redact(&self.uri))
            .field("delivery_limit", &self.delivery_limit)
            .field("connect_timeout", &self.connect_timeout)
            .field("op_timeout", &self.op_timeout)
            .finish()
    }
}

/// The URI with its password replaced by `***`, for logs and errors.
fn redact(uri: &str) -> String {
    let start = uri.find("://").map_or(0, |i| i + 3);
    let end = uri[start..]
        .find(['/', '?'])
        .map_or(uri.len(), |i| start + i);
    let Some(at) = uri[start..end].rfind('@') else {
        return uri.to_string();
    };
    match uri[start..start + at].find(':') {
        Some(colon) => format!("{}***{}", &uri[..start + colon + 1], &uri[start + at..]),
        None => uri.to_string(),
    }
}

/// The connection state shared by the clones of a [`RabbitQueue`].
#[derive(Default)]
struct State {
    conn: Option<Arc<Connection>>,
    publisher: Option<Channel>,
    /// No reconnect attempt before this instant.
    next_attempt: Option<Instant>,
    /// Wait after the next failed attempt (zero: the first step).
    backoff: Duration,
}

struct Inner {
    cfg: RabbitConfig,
    uri: AMQPUri,
    /// The redacted URI, for logs and errors.
    target: String,
    closed: AtomicBool,
    state: Mutex<State>,
}

/// A RabbitMQ connection implementing [`Queue`]; cheap to clone (clones share it).
///
/// Why: the worker and dispatcher of the distributed farm talk to the broker only through it.
#[derive(Clone)]
pub struct RabbitQueue {
    inner: Arc<Inner>,
}

/// Runs one broker operation under `limit`, naming `what` in the error.
async fn timed<T>(
    limit: Duration,
    queue: &str,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, lapin::Error>>,
) -> Result<T, FarmError> {
    match timeout(limit, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(queue_err!(queue, "{what} failed: {e}")),
        Err(_) => Err(queue_err!(queue, "{what}: no answer within {limit:?}")),
    }
}

/// An AMQP argument table.
fn table<const N: usize>(entries: [(&str, AMQPValue); N]) -> FieldTable {
    let mut t = FieldTable::default();
    for (k, v) in entries {
        t.insert(k.into(), v);
    }
    t
}

fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(s.into())
}

impl RabbitQueue {
    /// Connects to the broker (one attempt within `connect_timeout`); a wrong password, an
    /// unknown vhost or an unreachable host is an error naming the broker (never the password).
    pub async fn connect(cfg: RabbitConfig) -> Result<Self, FarmError> {
        let target = redact(&cfg.uri);
        let parsed = cfg.uri.parse::<AMQPUri>();
        let mut uri = parsed.map_err(|e| queue_err!(target, "invalid AMQP URI: {e}"))?;
        uri.query.heartbeat.get_or_insert(HEARTBEAT_S);
        let inner = Arc::new(Inner {
            cfg,
            uri,
            target,
            closed: AtomicBool::new(false),
            state: Mutex::default(),
        });
        inner.connection(&mut *inner.state.lock().await).await?;
        Ok(RabbitQueue { inner })
    }

    /// Messages ready in `queue` (not counting unacked deliveries), by a passive declare.
    /// An undeclared queue is an error.
    pub async fn ready_len(&self, queue: &str) -> Result<u32, FarmError> {
        let op = self.inner.cfg.op_timeout;
        let ch = self.inner.channel(queue, false).await?;
        let passive = QueueDeclareOptions::default().passive();
        let declare = ch.queue_declare(queue.into(), passive, table([]));
        let q = timed(op, queue, "passive declare", declare).await?;
        let _ = timeout(op, ch.close(200, "OK".into())).await;
        Ok(q.message_count())
    }

    /// Consumers of `queue`, by a passive declare (an undeclared queue has none).
    async fn consumer_count(&self, queue: &str) -> Result<u32, FarmError> {
        let op = self.inner.cfg.op_timeout;
        let ch = self.inner.channel(queue, false).await?;
        let passive = QueueDeclareOptions::default().passive();
        let declare = ch.queue_declare(queue.into(), passive, table([]));
        let count = match timed(op, queue, "passive declare", declare).await {
            Ok(q) => q.consumer_count(),
            Err(_) => 0,
        };
        let _ = timeout(op, ch.close(200, "OK".into())).await;
        Ok(count)
    }

    /// Closes the connection for good: unacked deliveries go back to their queues, consumers
    /// end with `None`, and later operations fail.
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let mut st = self.inner.state.lock().await;
        st.publisher = None;
        if let Some(conn) = st.conn.take().filter(|c| c.status().connected()) {
            let _ = timeout(self.inner.cfg.op_timeout, conn.close(200, "OK".into())).await;
        }
        tracing::info!(broker = %self.inner.target, "RabbitMQ connection closed");
    }
}

impl Inner {
    /// The live connection; after a drop, one reconnect attempt (within `connect_timeout`)
    /// once the backoff since the last failed attempt has passed.
    async fn connection(&self, st: &mut State) -> Result<Arc<Connection>, FarmError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(queue_err!(self.target, "connection was closed"));
        }
        if let Some(conn) = st.conn.as_ref().filter(|c| c.status().connected()) {
            return Ok(conn.clone());
        }
        if st.conn.take().is_some() {
            tracing::warn!(broker = %self.target, "RabbitMQ connection lost; reconnecting");
        }
        st.publisher = None;
        if let Some(at) = st.next_attempt {
            tokio::time::sleep_until(at).await;
        }
        let props = ConnectionProperties::default().with_connection_name("tessera".into());
        let limit = self.cfg.connect_timeout;
        let res = match timeout(limit, Connection::connect_uri(self.uri.clone(), props)).await {
            Ok(res) => res.map_err(|e| queue_err!(self.target, "cannot connect: {e}")),
            Err(_) => Err(queue_err!(self.target, "cannot connect within {limit:?}")),
        };
        match res {
            Ok(conn) => {
                tracing::info!(broker = %self.target, "connected to RabbitMQ");
                let conn = Arc::new(conn);
                st.conn = Some(conn.clone());
                (st.next_attempt, st.backoff) = (None, Duration::ZERO);
                Ok(conn)
            }
            Err(e) => {
                let retry_in = st.backoff.max(BACKOFF_FIRST);
                tracing::warn!(broker = %self.target, error = %e, ?retry_in, "connect failed");
                st.next_attempt = Some(Instant::now() + retry_in);
                st.backoff = (retry_in * 2).min(BACKOFF_MAX);
                Err(e)
            }
        }
    }

    /// The shared publisher channel (confirm mode, reopened if it closed), or a fresh channel
    /// (declares and consumers: a broker error there closes only that channel).
    async fn channel(&self, queue: &str, publisher: bool) -> Result<Channel, FarmError> {
        let op = self.cfg.op_timeout;
        let got = timeout(op, async {
            let mut st = self.state.lock().await;
            let conn = self.connection(&mut st).await?;
            let shared = st.publisher.as_ref().filter(|c| c.status().connected());
            if let Some(ch) = shared.filter(|_| publisher) {
                return Ok(ch.clone());
            }
            let ch = timed(op, queue, "open channel", conn.create_channel()).await?;
            if publisher {
                let confirm = ch.confirm_select(ConfirmSelectOptions::default());
                timed(op, queue, "confirm.select", confirm).await?;
                st.publisher = Some(ch.clone());
            }
            Ok(ch)
        });
        let too_slow = || Err(queue_err!(queue, "no channel within {op:?}"));
        got.await.unwrap_or_else(|_| too_slow())
    }
}

#[async_trait]
impl Queue for RabbitQueue {
    async fn declare(&self, queue: &str) -> Result<(), FarmError> {
        let ch = self.inner.channel(queue, false).await?;
        let (dead, dlx) = (dead_letter_queue(queue), DEAD_LETTER_EXCHANGE);
        let quorum = ("x-queue-type", text("quorum"));
        // x-delivery-limit counts returns, ours counts deliveries (module doc).
        let limit = i64::from(self.inner.cfg.delivery_limit.max(1) - 1);
        let args = table([
            quorum.clone(),
            ("x-delivery-limit", AMQPValue::LongLongInt(limit)),
            ("x-dead-letter-exchange", text(dlx)),
            ("x-dead-letter-routing-key", text(&dead)),
        ]);
        let durable = QueueDeclareOptions::durable();
        let exchange = ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        };
        let topology = async {
            ch.exchange_declare(dlx.into(), ExchangeKind::Direct, exchange, table([]))
                .await?;
            ch.queue_declare(dead.as_str().into(), durable, table([quorum]))
                .await?;
            let (key, bind) = (dead.as_str(), QueueBindOptions::default());
            ch.queue_bind(key.into(), dlx.into(), key.into(), bind, table([]))
                .await?;
            ch.queue_declare(queue.into(), durable, args).await?;
            ch.close(200, "OK".into()).await
        };
        timed(self.inner.cfg.op_timeout, queue, "declare", topology).await
    }

    async fn publish(&self, queue: &str, body: Vec<u8>) -> Result<(), FarmError> {
        let op = self.inner.cfg.op_timeout;
        let ch = self.inner.channel(queue, true).await?;
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_content_type("application/json".into());
        // Mandatory: a message for an undeclared queue comes back instead of vanishing.
        let options = BasicPublishOptions {
            mandatory: true,
            ..Default::default()
        };
        let sent = async {
            let confirm = ch.basic_publish("".into(), queue.into(), options, &body, props);
            confirm.await?.await
        };
        match timed(op, queue, "publish", sent).await? {
            Confirmation::Ack(None) => Ok(()),
            Confirmation::Ack(Some(back)) => {
                let why = back.reply_text;
                Err(queue_err!(
                    queue,
                    "message returned ({why}): queue not declared?"
                ))
            }
            Confirmation::Nack(_) => Err(queue_err!(queue, "broker refused the message (nack)")),
            Confirmation::NotRequested => Err(queue_err!(queue, "publisher confirms are off")),
        }
    }

    async fn consumers(&self, queue: &str) -> Result<u32, FarmError> {
        self.consumer_count(queue).await
    }

    /// An exclusive, auto-deleted queue named `name` is the lock: the broker lets one
    /// connection own it and deletes it when that connection closes (or its heartbeat
    /// times out), so a stopped holder frees the lock by itself.
    async fn hold_lock(&self, name: &str) -> Result<(), FarmError> {
        let op = self.inner.cfg.op_timeout;
        let ch = self.inner.channel(name, false).await?;
        let options = QueueDeclareOptions {
            exclusive: true,
            auto_delete: true,
            ..Default::default()
        };
        let declared = timed(
            op,
            name,
            "lock",
            ch.queue_declare(name.into(), options, table([])),
        )
        .await
        .map_err(|e| match e {
            // "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue ..."
            FarmError::Queue { queue, reason } if reason.contains("RESOURCE_LOCKED") => {
                FarmError::Queue {
                    queue,
                    reason: format!("{}: {reason}", super::HELD_ELSEWHERE),
                }
            }
            other => other,
        });
        if ch.status().connected() {
            let _ = timeout(op, ch.close(200, "OK".into())).await;
        }
        declared.map(|_| ())
    }

    async fn consume(&self, queue: &str, prefetch: u16) -> Result<Box<dyn Consumer>, FarmError> {
        let op = self.inner.cfg.op_timeout;
        let channel = self.inner.channel(queue, false).await?;
        let qos = channel.basic_qos(prefetch.max(1), BasicQosOptions::default());
        timed(op, queue, "basic.qos", qos).await?;
        let options = BasicConsumeOptions::default();
        let consume = channel.basic_consume(queue.into(), "".into(), options, table([]));
        let consumer = timed(op, queue, "basic.consume", consume).await?;
        tracing::debug!(queue, prefetch, "consuming");
        Ok(Box::new(RabbitConsumer {
            inner: self.inner.clone(),
            channel,
            consumer,
            queue: queue.to_string(),
            failed: None,
        }))
    }
}

mod consumer;
use consumer::RabbitConsumer;
