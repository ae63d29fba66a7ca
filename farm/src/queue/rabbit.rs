//! The RabbitMQ queue (lapin): durable quorum queues with an explicit delivery limit and
//! dead-lettering, persistent messages with publisher confirms, manual acks.
//!
//! Why: the distributed farm shares segment work between machines through the operators'
//! broker, with the same semantics as the embedded [`super::MemoryQueue`].
//!
//! Choices worth knowing:
//! - `RabbitConfig::lost_limit` counts deliveries, like the memory queue: a message
//!   delivered that many times without a verdict is dead-lettered. RabbitMQ's
//!   `x-delivery-limit` counts *returns* (it dead-letters on return number limit + 1), so the
//!   queue is declared with `x-delivery-limit = lost_limit - 1`. A task's own failed attempts
//!   never reach it: the worker counts them in the message (worker `attempts.rs`).
//! - Returns are `basic.reject`, which every version counts (consumer.rs).
//! - A [`super::Delivery`] dropped unsettled is rejected with requeue by a task spawned on the
//!   current tokio runtime (closing the channel would also return the consumer's other deliveries).
//!   Without a runtime it returns when its channel closes. Each delivery keeps its channel
//!   open, so dropping the consumer (which cancels it) lets in-flight work still be acked.
//! - After the connection drops, the next operation reconnects, at most once per backoff step
//!   (1 s doubling to 30 s); a consumer on the dead connection returns `Err`.
//!
//! Layout: `config` ([`RabbitConfig`]) at the bottom, `connection` (the shared connection
//! state and helpers) above it, `consumer` (deliveries and acks) above that; this file, the
//! [`Queue`] itself, uses all three and none of them uses it.

mod config;
mod connection;
mod consumer;

pub use config::RabbitConfig;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_trait::async_trait;
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, BasicQosOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::AMQPValue;
use lapin::{BasicProperties, Confirmation, ExchangeKind};
use tokio::time::timeout;

use super::{dead_letter_queue, Consumer, Queue};
use crate::FarmError;
use connection::{declared, queue_err, table, text, timed, Inner};
use consumer::RabbitConsumer;

/// The bytes a reports queue allows per report it keeps: a worker's report is well under
/// 1 KiB; 4 KiB each leaves room and still bounds the queue whatever a client sends.
const REPORT_BYTES: i64 = 4096;

/// The durable direct exchange every tessera queue dead-letters through.
const DEAD_LETTER_EXCHANGE: &str = "tessera.dlx";

/// A RabbitMQ connection implementing [`Queue`]; cheap to clone (clones share it).
///
/// Why: the worker and dispatcher of the distributed farm talk to the broker only through it.
#[derive(Clone)]
pub struct RabbitQueue {
    inner: Arc<Inner>,
}

impl RabbitQueue {
    /// Connects to the broker (one attempt within `connect_timeout`); a wrong password, an
    /// unknown vhost or an unreachable host is an error naming the broker (never the password).
    pub async fn connect(cfg: RabbitConfig) -> Result<Self, FarmError> {
        let inner = Arc::new(Inner::new(cfg)?);
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
    /// The queue's (ready messages, consumers), by a passive declare; (0, 0) for a queue
    /// that does not exist.
    async fn counts(&self, queue: &str) -> Result<(u32, u32), FarmError> {
        let op = self.inner.cfg.op_timeout;
        let ch = self.inner.channel(queue, false).await?;
        let passive = QueueDeclareOptions::default().passive();
        let declare = ch.queue_declare(queue.into(), passive, table([]));
        let counts = match timed(op, queue, "passive declare", declare).await {
            Ok(q) => (q.message_count(), q.consumer_count()),
            Err(_) => (0, 0),
        };
        let _ = timeout(op, ch.close(200, "OK".into())).await;
        Ok(counts)
    }

    /// Uses `queue` as the broker has it after a declaration was refused for an inequivalent
    /// argument (`reason`): what an earlier release or setting declared keeps working, and
    /// the warning says how to move it to this release's arguments.
    async fn keep_existing(&self, queue: &str, reason: &str) -> Result<(), FarmError> {
        let op = self.inner.cfg.op_timeout;
        let ch = self.inner.channel(queue, false).await?;
        let passive = QueueDeclareOptions::default().passive();
        declared(
            op,
            queue,
            ch.queue_declare(queue.into(), passive, table([])),
        )
        .await?;
        let _ = timeout(op, ch.close(200, "OK".into())).await;
        tracing::warn!(
            queue,
            broker = %reason,
            "queue kept as declared before: its arguments differ from this release's (delete \
             it while it is empty to have it declared anew; docs/deploy.md, RabbitMQ)"
        );
        Ok(())
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

#[async_trait]
impl Queue for RabbitQueue {
    async fn declare(&self, queue: &str) -> Result<(), FarmError> {
        let ch = self.inner.channel(queue, false).await?;
        let (dead, dlx) = (dead_letter_queue(queue), DEAD_LETTER_EXCHANGE);
        let quorum = ("x-queue-type", text("quorum"));
        // x-delivery-limit counts returns, the lost limit counts deliveries (module doc).
        let limit = i64::from(self.inner.cfg.lost_limit.max(1) - 1);
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
        match declared(self.inner.cfg.op_timeout, queue, topology).await {
            // Declared by an earlier release (limit 4) or another lost_limit: kept.
            Err(FarmError::QueueRefused { reason, .. })
                if reason.contains("inequivalent arg 'x-delivery-limit'") =>
            {
                self.keep_existing(queue, &reason).await
            }
            other => other,
        }
    }

    /// A classic queue, durable (RabbitMQ 4.3 refuses transient non-exclusive queues):
    /// `x-max-length` with `drop-head` overflow keeps the newest reports, `x-max-length-bytes`
    /// bounds their size whatever a report holds, `x-message-ttl` drops unread ones. Declared
    /// alike by every side; a queue of the same name declared otherwise (transient, by a
    /// release before this one) is used as it is until the broker drops it.
    async fn declare_reports(
        &self,
        queue: &str,
        max_len: u32,
        ttl: std::time::Duration,
    ) -> Result<(), FarmError> {
        let ch = self.inner.channel(queue, false).await?;
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let max_len = i64::from(max_len.max(1));
        let args = table([
            ("x-queue-type", text("classic")),
            ("x-max-length", AMQPValue::LongLongInt(max_len)),
            (
                "x-max-length-bytes",
                AMQPValue::LongLongInt(max_len * REPORT_BYTES),
            ),
            ("x-overflow", text("drop-head")),
            ("x-message-ttl", AMQPValue::LongLongInt(ttl_ms)),
        ]);
        let declare = async {
            ch.queue_declare(queue.into(), QueueDeclareOptions::durable(), args)
                .await?;
            ch.close(200, "OK".into()).await
        };
        match declared(self.inner.cfg.op_timeout, queue, declare).await {
            Err(FarmError::QueueRefused { reason, .. }) if reason.contains("inequivalent arg") => {
                self.keep_existing(queue, &reason).await
            }
            other => other,
        }
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
        Ok(self.counts(queue).await?.1)
    }

    async fn waiting(&self, queue: &str) -> Result<u32, FarmError> {
        Ok(self.counts(queue).await?.0)
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
