//! The embedded in-process queue: the same semantics as the RabbitMQ queues, for one machine.
//!
//! Why: `tessera transcode` must run the very code paths of the distributed farm (redelivery,
//! delivery limit, dead-lettering) without a broker.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::{dead_letter_queue, Acker, Consumer, Delivery, Queue};
use crate::FarmError;

#[derive(Default)]
struct QueueState {
    ready: VecDeque<Message>,
    closed: bool,
    consumers: u32,
    /// The most messages kept (a reports queue): a publish beyond it drops the oldest.
    bound: Option<usize>,
}

struct Message {
    body: Vec<u8>,
    deliveries: u32,
    /// Set when the message is moved to a dead-letter queue, as RabbitMQ names the reason.
    dead_reason: Option<&'static str>,
}

struct Inner {
    queues: Mutex<HashMap<String, QueueState>>,
    notify: Notify,
    delivery_limit: u32,
    counting: ReturnCounting,
}

/// Which returns raise a message's delivery count. Why a choice: brokers differ, and the
/// farm must not depend on it. RabbitMQ up to 4.2 counts every requeue; 4.3 counts a
/// `basic.reject` and a closed channel but not a `basic.nack`. Tests run the worker against
/// both ends of that range to show that a task's own failures are counted by the task, not
/// by the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReturnCounting {
    /// Every return counts: an explicit requeue and a delivery dropped unsettled alike
    /// (RabbitMQ 3.x to 4.2, and the one-process farm).
    #[default]
    Every,
    /// Only a delivery dropped unsettled counts (its consumer vanished); an explicit
    /// requeue does not. Stricter than any RabbitMQ: the test double of a broker whose
    /// explicit returns never reach the delivery limit.
    VanishedOnly,
}

impl Inner {
    fn with<R>(&self, queue: &str, f: impl FnOnce(&mut QueueState) -> R) -> R {
        let mut map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        f(map.entry(queue.to_string()).or_default())
    }

    /// Returns a message after a failed attempt: requeued, or dead-lettered past the limit;
    /// `vanished` when its delivery was dropped unsettled rather than rejected.
    fn give_back(&self, queue: &str, mut msg: Message, requeue: bool, vanished: bool) {
        if vanished || self.counting == ReturnCounting::Every {
            msg.deliveries += 1;
        }
        if requeue && msg.deliveries < self.delivery_limit {
            self.with(queue, |q| q.ready.push_back(msg));
        } else {
            tracing::warn!(queue, deliveries = msg.deliveries, "message dead-lettered");
            msg.dead_reason = Some(if requeue {
                "delivery_limit"
            } else {
                "rejected"
            });
            self.with(&dead_letter_queue(queue), |q| q.ready.push_back(msg));
        }
        self.notify.notify_waiters();
    }
}

/// An in-memory queue set with at-least-once delivery, a delivery limit and dead-lettering.
#[derive(Clone)]
pub struct MemoryQueue {
    inner: Arc<Inner>,
}

impl MemoryQueue {
    /// Creates an empty queue set; a message delivered `delivery_limit` times without an ack
    /// goes to its queue's dead-letter queue.
    pub fn new(delivery_limit: u32) -> Self {
        Self::counting(delivery_limit, ReturnCounting::Every)
    }

    /// Like [`MemoryQueue::new`], with the broker's rule for which returns count.
    pub fn counting(delivery_limit: u32, counting: ReturnCounting) -> Self {
        MemoryQueue {
            inner: Arc::new(Inner {
                queues: Mutex::new(HashMap::new()),
                notify: Notify::new(),
                delivery_limit: delivery_limit.max(1),
                counting,
            }),
        }
    }

    /// Closes a queue: its consumers' `next` returns `None` from now on.
    pub fn close(&self, queue: &str) {
        self.inner.with(queue, |q| q.closed = true);
        self.inner.notify.notify_waiters();
    }

    /// Messages waiting in a queue (not counting unacked deliveries).
    pub fn ready_len(&self, queue: &str) -> usize {
        self.inner.with(queue, |q| q.ready.len())
    }

    /// Takes every message out of a queue (used to read dead letters).
    pub fn drain(&self, queue: &str) -> Vec<Vec<u8>> {
        self.inner
            .with(queue, |q| q.ready.drain(..).map(|m| m.body).collect())
    }
}

#[async_trait]
impl Queue for MemoryQueue {
    async fn declare(&self, queue: &str) -> Result<(), FarmError> {
        self.inner.with(queue, |_| ());
        self.inner.with(&dead_letter_queue(queue), |_| ());
        Ok(())
    }

    /// Bounded by length only: a report here is read by the same process that sends it, so
    /// none waits long enough for an age limit to matter.
    async fn declare_reports(
        &self,
        queue: &str,
        max_len: u32,
        _ttl: std::time::Duration,
    ) -> Result<(), FarmError> {
        let bound = usize::try_from(max_len.max(1)).unwrap_or(usize::MAX);
        self.inner.with(queue, |q| q.bound = Some(bound));
        Ok(())
    }

    async fn publish(&self, queue: &str, body: Vec<u8>) -> Result<(), FarmError> {
        let closed = self.inner.with(queue, |q| {
            if !q.closed {
                q.ready.push_back(Message {
                    body,
                    deliveries: 0,
                    dead_reason: None,
                });
                while q.bound.is_some_and(|b| q.ready.len() > b) {
                    q.ready.pop_front();
                }
            }
            q.closed
        });
        if closed {
            return Err(FarmError::Queue {
                queue: queue.to_string(),
                reason: "queue is closed".into(),
            });
        }
        self.inner.notify.notify_waiters();
        Ok(())
    }

    async fn consume(&self, queue: &str, prefetch: u16) -> Result<Box<dyn Consumer>, FarmError> {
        self.inner.with(queue, |q| q.consumers += 1);
        Ok(Box::new(MemoryConsumer {
            inner: self.inner.clone(),
            queue: queue.to_string(),
            permits: Arc::new(Semaphore::new(usize::from(prefetch.max(1)))),
            prefetch: prefetch.max(1),
        }))
    }

    async fn consumers(&self, queue: &str) -> Result<u32, FarmError> {
        Ok(self.inner.with(queue, |q| q.consumers))
    }

    async fn waiting(&self, queue: &str) -> Result<u32, FarmError> {
        Ok(self
            .inner
            .with(queue, |q| u32::try_from(q.ready.len()).unwrap_or(u32::MAX)))
    }
}

struct MemoryConsumer {
    inner: Arc<Inner>,
    queue: String,
    permits: Arc<Semaphore>,
    prefetch: u16,
}

impl Drop for MemoryConsumer {
    fn drop(&mut self) {
        self.inner
            .with(&self.queue, |q| q.consumers = q.consumers.saturating_sub(1));
    }
}

#[async_trait]
impl Consumer for MemoryConsumer {
    async fn next(&mut self) -> Result<Option<Delivery>, FarmError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| FarmError::Queue {
                queue: self.queue.clone(),
                reason: e.to_string(),
            })?;
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let got = self.inner.with(&self.queue, |q| {
                if q.closed {
                    Err(())
                } else {
                    Ok(q.ready.pop_front())
                }
            });
            match got {
                Err(()) => return Ok(None),
                Ok(Some(msg)) => {
                    let redeliveries = msg.deliveries;
                    let body = msg.body.clone();
                    return Ok(Some(Delivery {
                        body,
                        redeliveries,
                        dead_reason: msg.dead_reason.map(str::to_string),
                        acker: Box::new(MemoryAcker {
                            inner: self.inner.clone(),
                            queue: self.queue.clone(),
                            state: Mutex::new(Some((msg, permit))),
                        }),
                    }));
                }
                Ok(None) => notified.await,
            }
        }
    }

    async fn set_prefetch(&mut self, prefetch: u16) -> Result<(), FarmError> {
        let prefetch = prefetch.max(1);
        if prefetch > self.prefetch {
            self.permits
                .add_permits(usize::from(prefetch - self.prefetch));
        } else if prefetch < self.prefetch {
            // Fewer places: take the difference out as deliveries are settled.
            let permits = self.permits.clone();
            let fewer = u32::from(self.prefetch - prefetch);
            tokio::spawn(async move {
                if let Ok(p) = permits.acquire_many_owned(fewer).await {
                    p.forget();
                }
            });
        }
        self.prefetch = prefetch;
        Ok(())
    }
}

struct MemoryAcker {
    inner: Arc<Inner>,
    queue: String,
    state: Mutex<Option<(Message, OwnedSemaphorePermit)>>,
}

impl MemoryAcker {
    fn take(&self) -> Option<(Message, OwnedSemaphorePermit)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

#[async_trait]
impl Acker for MemoryAcker {
    async fn ack(&self) -> Result<(), FarmError> {
        drop(self.take());
        Ok(())
    }

    async fn reject(&self, requeue: bool) -> Result<(), FarmError> {
        if let Some((msg, permit)) = self.take() {
            drop(permit);
            self.inner.give_back(&self.queue, msg, requeue, false);
        }
        Ok(())
    }
}

impl Drop for MemoryAcker {
    /// A delivery dropped unsettled (its worker task died) is redelivered, as RabbitMQ does
    /// when a consumer's channel closes.
    fn drop(&mut self) {
        if let Some((msg, permit)) = self.take() {
            drop(permit);
            self.inner.give_back(&self.queue, msg, true, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn ack_reject_redelivery_and_dead_letter() {
        let q = MemoryQueue::new(3);
        q.declare("work").await.unwrap();
        q.publish("work", b"a".to_vec()).await.unwrap();
        let mut c = q.consume("work", 1).await.unwrap();
        for attempt in 0..3 {
            let d = c.next().await.unwrap().unwrap();
            assert_eq!(d.body, b"a");
            assert_eq!(d.redeliveries, attempt);
            d.acker.reject(true).await.unwrap();
        }
        assert_eq!(q.ready_len("work"), 0);
        assert_eq!(q.drain(&dead_letter_queue("work")), vec![b"a".to_vec()]);

        q.publish("work", b"b".to_vec()).await.unwrap();
        let d = c.next().await.unwrap().unwrap();
        d.acker.ack().await.unwrap();
        assert_eq!(q.ready_len("work"), 0);
    }

    #[tokio::test]
    async fn a_reports_queue_keeps_only_the_newest() {
        let q = MemoryQueue::new(3);
        q.declare_reports("reports", 3, std::time::Duration::from_secs(1))
            .await
            .unwrap();
        for i in 0..5u8 {
            q.publish("reports", vec![i]).await.unwrap();
        }
        assert_eq!(q.drain("reports"), vec![vec![2], vec![3], vec![4]]);
    }

    #[tokio::test]
    async fn prefetch_limits_outstanding_and_drop_requeues() {
        let q = MemoryQueue::new(5);
        for i in 0..3u8 {
            q.publish("w", vec![i]).await.unwrap();
        }
        let mut c = q.consume("w", 2).await.unwrap();
        let d1 = c.next().await.unwrap().unwrap();
        let _d2 = c.next().await.unwrap().unwrap();
        // A third delivery waits until one of the two is settled.
        let third = tokio::time::timeout(Duration::from_millis(50), c.next()).await;
        assert!(
            third.is_err(),
            "prefetch of 2 must hold the third message back"
        );
        drop(d1); // worker died: message 0 goes back with a redelivery count
        let d3 = c.next().await.unwrap().unwrap();
        assert_eq!(d3.body, vec![2]);
        d3.acker.ack().await.unwrap();
        let again = c.next().await.unwrap().unwrap();
        assert_eq!((again.body.clone(), again.redeliveries), (vec![0], 1));
    }

    #[tokio::test]
    async fn close_ends_consumers() {
        let q = MemoryQueue::new(5);
        let mut c = q.consume("w", 1).await.unwrap();
        let q2 = q.clone();
        let h = tokio::spawn(async move { c.next().await.unwrap().is_none() });
        tokio::time::sleep(Duration::from_millis(20)).await;
        q2.close("w");
        assert!(h.await.unwrap());
        assert!(q.publish("w", vec![1]).await.is_err());
    }
}
