//! The consuming side of the RabbitMQ queue: deliveries, acks, requeue on drop.
//!
//! Why a file of its own: a consumer outlives the call that made it and settles deliveries on
//! its own channel; it needs only the shared connection (`connection.rs`), never the queue.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::{FutureExt, StreamExt};
use lapin::options::{BasicAckOptions, BasicQosOptions, BasicRejectOptions};
use lapin::types::AMQPValue;
use lapin::{BasicProperties, Channel};
use tokio::time::timeout;

use super::connection::{queue_err, timed, Inner};
use crate::queue::{Acker, Consumer, Delivery};
use crate::FarmError;

/// One consumer on its own channel.
pub(super) struct RabbitConsumer {
    pub(super) inner: Arc<Inner>,
    pub(super) channel: Channel,
    pub(super) consumer: lapin::Consumer,
    pub(super) queue: String,
    /// Set once the consumer failed: it stays failed.
    pub(super) failed: Option<String>,
}

impl RabbitConsumer {
    fn delivery(&self, d: lapin::message::Delivery) -> Delivery {
        let acker = RabbitAcker {
            acker: d.acker,
            channel: self.channel.clone(),
            queue: self.queue.clone(),
            op_timeout: self.inner.cfg.op_timeout,
            settled: AtomicBool::new(false),
        };
        Delivery {
            redeliveries: delivery_count(&d.properties),
            dead_reason: death_reason(&d.properties),
            body: d.data,
            acker: Box::new(acker),
        }
    }
}

/// The quorum queue's `x-delivery-count` header (earlier deliveries; absent = 0).
fn delivery_count(props: &BasicProperties) -> u32 {
    let headers = props.headers().as_ref();
    let n = match headers.and_then(|h| h.inner().get("x-delivery-count")) {
        Some(AMQPValue::LongLongInt(n)) => *n,
        Some(AMQPValue::LongInt(n)) => i64::from(*n),
        Some(AMQPValue::LongUInt(n)) => i64::from(*n),
        _ => 0,
    };
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// The broker's `x-first-death-reason` header: why a message reached a dead-letter queue.
fn death_reason(props: &BasicProperties) -> Option<String> {
    let headers = props.headers().as_ref()?;
    match headers.inner().get("x-first-death-reason")? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
        _ => None,
    }
}

#[async_trait]
impl Consumer for RabbitConsumer {
    async fn next(&mut self) -> Result<Option<Delivery>, FarmError> {
        if let Some(reason) = &self.failed {
            return Err(queue_err!(self.queue, "{reason}"));
        }
        let reason = match self.consumer.next().await {
            Some(Ok(d)) => return Ok(Some(self.delivery(d))),
            // Ended by our own `close`, or cancelled by the broker (queue deleted).
            _ if self.inner.closed.load(Ordering::SeqCst) => return Ok(None),
            None if self.channel.status().connected() => return Ok(None),
            Some(Err(e)) => format!("consumer failed: {e}"),
            None => "consumer channel closed (connection lost?)".to_string(),
        };
        tracing::warn!(queue = %self.queue, %reason, "RabbitMQ consumer ended");
        self.failed = Some(reason.clone());
        Err(queue_err!(self.queue, "{reason}"))
    }

    async fn set_prefetch(&mut self, prefetch: u16) -> Result<(), FarmError> {
        let qos = self
            .channel
            .basic_qos(prefetch.max(1), BasicQosOptions::default());
        timed(self.inner.cfg.op_timeout, &self.queue, "basic.qos", qos).await
    }
}

impl Drop for RabbitConsumer {
    /// Hands back deliveries already prefetched but never returned by `next` (each one's
    /// acker requeues it on drop); dropping the lapin consumer then cancels it.
    fn drop(&mut self) {
        while let Some(Some(Ok(d))) = self.consumer.next().now_or_never() {
            drop(self.delivery(d));
        }
    }
}

/// Settles one delivery; requeues it if dropped unsettled.
struct RabbitAcker {
    acker: lapin::Acker,
    /// Keeps the channel open while the delivery is outstanding.
    channel: Channel,
    queue: String,
    op_timeout: Duration,
    settled: AtomicBool,
}

impl RabbitAcker {
    /// Acks (`None`) or rejects (`Some(requeue)`) once; later calls do nothing.
    ///
    /// `basic.reject`, never `basic.nack`: from RabbitMQ 4.3 on a quorum queue counts a
    /// requeue against its delivery limit only when it comes by `basic.reject` (or with a
    /// channel that closed); a `basic.nack` returns the message uncounted, so a task given
    /// back that way would circle forever. Every earlier version counts both alike.
    async fn settle(&self, reject: Option<bool>) -> Result<(), FarmError> {
        if self.settled.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let sent = async {
            match reject {
                None => self.acker.ack(BasicAckOptions::default()).await,
                Some(requeue) => self.acker.reject(BasicRejectOptions { requeue }).await,
            }
        };
        let what = if reject.is_some() { "reject" } else { "ack" };
        // `false`: the channel is gone, and with it the delivery: the broker requeued it.
        if timed(self.op_timeout, &self.queue, what, sent).await? || reject == Some(true) {
            return Ok(());
        }
        Err(queue_err!(
            self.queue,
            "{what} impossible: channel closed, message requeued"
        ))
    }
}

#[async_trait]
impl Acker for RabbitAcker {
    async fn ack(&self) -> Result<(), FarmError> {
        self.settle(None).await
    }

    async fn reject(&self, requeue: bool) -> Result<(), FarmError> {
        self.settle(Some(requeue)).await
    }
}

impl Drop for RabbitAcker {
    fn drop(&mut self) {
        if self.settled.swap(true, Ordering::SeqCst) || !self.acker.usable() {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            let why = "dropped unsettled outside a runtime: back when its channel closes";
            tracing::warn!(queue = %self.queue, why);
            return;
        };
        let (acker, channel, limit) = (self.acker.clone(), self.channel.clone(), self.op_timeout);
        rt.spawn(async move {
            let _ = timeout(limit, acker.reject(BasicRejectOptions { requeue: true })).await;
            drop(channel);
        });
    }
}
