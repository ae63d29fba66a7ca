//! The queue abstraction: what the farm needs from RabbitMQ, with an embedded implementation.
//!
//! Why a trait: the one-process farm and the distributed farm run the same dispatcher and
//! worker code; only the queue (in-memory vs RabbitMQ) and the store (directory vs S3) differ.

mod memory;
mod rabbit;

pub use memory::{MemoryQueue, ReturnCounting};
pub use rabbit::{RabbitConfig, RabbitQueue};

use async_trait::async_trait;

use crate::FarmError;

/// A message broker with work-queue semantics: at-least-once delivery, manual acks, a
/// redelivery count, and a dead-letter queue after a delivery limit.
#[async_trait]
pub trait Queue: Send + Sync + 'static {
    /// Makes sure `queue` (and its dead-letter queue) exist.
    async fn declare(&self, queue: &str) -> Result<(), FarmError>;
    /// Makes sure `queue` exists as a queue of reports of which only recent ones matter: at
    /// most `max_len` messages (the oldest dropped first) of bounded size, each dropped after
    /// `ttl` unread, no dead-letter queue. Why: workers report their state every few seconds
    /// (wire `status.rs`); while no dispatcher reads the reports they must neither pile up
    /// nor outlive their use.
    async fn declare_reports(
        &self,
        queue: &str,
        max_len: u32,
        ttl: std::time::Duration,
    ) -> Result<(), FarmError>;
    /// Publishes a persistent message; returns once the broker has it (confirm).
    async fn publish(&self, queue: &str, body: Vec<u8>) -> Result<(), FarmError>;
    /// Starts consuming with at most `prefetch` unacknowledged deliveries outstanding.
    async fn consume(&self, queue: &str, prefetch: u16) -> Result<Box<dyn Consumer>, FarmError>;
    /// Takes the broker-wide lock `name` for as long as this connection lives (after a
    /// reconnect it must be taken again): refused with an error that says
    /// [`HELD_ELSEWHERE`] while another connection holds it. Why: the dispatcher must be the
    /// farm's one reader of the events queue; a second one would take, and drop, the events
    /// of the first one's jobs. Queues without other clients (the in-process one) grant it.
    async fn hold_lock(&self, _name: &str) -> Result<(), FarmError> {
        Ok(())
    }
    /// Consumers attached to `queue` now (0 for a queue nobody consumes). Why: a job that
    /// may run on either hardware goes to the GPU queue only while GPU workers listen.
    async fn consumers(&self, queue: &str) -> Result<u32, FarmError>;
    /// Messages on `queue` waiting for a consumer (not delivered yet). Why: while a queue
    /// holds work no consumer could take yet, the fleet is busy, and a short input goes as
    /// one whole-input task instead of being split (engine whole.rs). A queue that cannot
    /// tell says 0: the job splits, as it always did.
    async fn waiting(&self, _queue: &str) -> Result<u32, FarmError> {
        Ok(0)
    }
}

/// A stream of deliveries from one queue.
#[async_trait]
pub trait Consumer: Send {
    /// The next delivery; `None` when the queue is closed.
    async fn next(&mut self) -> Result<Option<Delivery>, FarmError>;
    /// Changes how many unacknowledged deliveries may be outstanding. Why: a GPU worker's
    /// prefetch follows its encoder-session budget, so it never holds work it cannot start.
    /// Consumers without a broker-side limit (channel-backed ones) ignore it.
    async fn set_prefetch(&mut self, _prefetch: u16) -> Result<(), FarmError> {
        Ok(())
    }
}

/// How a delivery is settled with the broker.
#[async_trait]
pub trait Acker: Send + Sync {
    /// Done: the broker forgets the message.
    async fn ack(&self) -> Result<(), FarmError>;
    /// Give the message back (`requeue`), or drop it to the dead-letter queue. A requeue is
    /// counted against the queue's delivery limit on every broker version (RabbitMQ's
    /// `basic.reject`); a task's own failed attempts are not returned this way but counted
    /// in the message by the worker, so that no broker's counting rule decides them.
    async fn reject(&self, requeue: bool) -> Result<(), FarmError>;
}

/// One delivered message.
pub struct Delivery {
    /// The message body.
    pub body: Vec<u8>,
    /// How many times it was delivered before this one (0 on first delivery).
    pub redeliveries: u32,
    /// Why the broker moved this message to a dead-letter queue (`delivery_limit`,
    /// `rejected`, ...): read by the dispatcher to tell the user why a task was lost.
    /// `None` for messages that were never dead-lettered.
    pub dead_reason: Option<String>,
    /// Settles the delivery.
    pub acker: Box<dyn Acker>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("bytes", &self.body.len())
            .field("redeliveries", &self.redeliveries)
            .field("dead_reason", &self.dead_reason)
            .finish()
    }
}

/// Part of the error of [`Queue::hold_lock`] when another connection holds the lock.
pub const HELD_ELSEWHERE: &str = "held by another connection";

/// `d` moved by up to half of itself either way. Why: after a broker restart every client
/// reconnects; without jitter a fleet of workers retries in lockstep.
///
/// The share comes from std's randomly keyed SipHash (`RandomState`: keys random per process
/// and moved on for every state made), not from the clock alone: a clock that ticks in
/// microseconds would give every machine the same share, back in step.
pub fn jittered(d: std::time::Duration) -> std::time::Duration {
    use std::hash::{BuildHasher, Hasher};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos() as u64);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(nanos);
    let bits = h.finish() >> 11; // 53 bits: exact in an f64
    d.mul_f64(0.5 + bits as f64 / (1u64 << 53) as f64)
}

/// The farm's work queues, each with a dead-letter queue: encodes on CPU and GPU, cut
/// segments, stitches, whole inputs, events. Why one list: they are declared together, and
/// every one of them dead-letters into a queue the dispatcher reads (engine `dead_letters`).
pub const FARM_QUEUES: [&str; 6] = {
    use tessera_model::wire::{
        QUEUE_CUT_CPU, QUEUE_ENCODE_CPU, QUEUE_ENCODE_GPU, QUEUE_EVENTS, QUEUE_STITCH,
        QUEUE_WHOLE_CPU,
    };
    [
        QUEUE_ENCODE_CPU,
        QUEUE_CUT_CPU,
        QUEUE_ENCODE_GPU,
        QUEUE_STITCH,
        QUEUE_WHOLE_CPU,
        QUEUE_EVENTS,
    ]
};

/// Declares every queue of the farm ([`FARM_QUEUES`] and the workers' status reports). Why
/// one place: the dispatcher, the worker and the one-process farm need the same topology
/// before they publish or consume anything.
pub async fn declare_farm_queues(queue: &dyn Queue) -> Result<(), FarmError> {
    for q in FARM_QUEUES {
        queue.declare(q).await?;
    }
    declare_status_queue(queue).await
}

/// Declares the workers' status queue (wire `status.rs`). Why apart from
/// [`declare_farm_queues`]: the queue may be gone (an operator deleted it, or a release
/// before this one declared it transient and the broker restarted); the worker's reporter
/// declares it again when a report comes back, and the dispatcher before it consumes again.
pub async fn declare_status_queue(queue: &dyn Queue) -> Result<(), FarmError> {
    use tessera_model::wire::{QUEUE_STATUS, STATUS_QUEUE_MAX, STATUS_TTL_SECONDS};
    let ttl = std::time::Duration::from_secs(STATUS_TTL_SECONDS);
    queue
        .declare_reports(QUEUE_STATUS, STATUS_QUEUE_MAX, ttl)
        .await
}

/// The dead-letter queue of a queue.
pub fn dead_letter_queue(queue: &str) -> String {
    format!("{queue}.dead")
}

#[cfg(test)]
mod tests {
    use super::jittered;
    use std::time::Duration;

    #[test]
    fn jitter_spreads_waits_within_half_either_way() {
        let d = Duration::from_secs(1);
        let waits: Vec<f64> = (0..400).map(|_| jittered(d).as_secs_f64()).collect();
        assert!(waits.iter().all(|w| (0.5..1.5).contains(w)), "{waits:?}");
        // Drawn back to back (the same clock microsecond), the shares still differ and
        // cover the range: every tenth of it is hit.
        let mut tenths = [0usize; 10];
        for w in &waits {
            tenths[((w - 0.5) * 10.0) as usize] += 1;
        }
        assert!(tenths.iter().all(|&n| n > 0), "{tenths:?}");
    }
}
