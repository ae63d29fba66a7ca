//! What a task's message says of its earlier attempts, and the copies that carry it on.
//!
//! Why the worker counts, not the broker: RabbitMQ 4.3 stopped counting a `basic.nack`
//! requeue against a quorum queue's delivery limit, and no broker can tell a task that failed
//! on its own from a worker that vanished under it. So a task's own failed attempt (its media
//! child crashed, ran out of memory or time, a retryable error) goes back as a fresh copy of
//! the message with `retries` counted up and the old delivery acked, on every broker version
//! alike, and fails its job at the worker's `delivery_limit`. What the broker still counts
//! (`x-delivery-count`) are deliveries that ended without a verdict: the worker killed from
//! outside, its node or connection lost, a requeue. Those spend the larger `lost_limit`
//! (the queue's `x-delivery-limit`), and a copy carries the count of earlier copies on in
//! `lost`, so churn alone does not fail a job and a poison input still fails in a few
//! attempts. `bounces` counts give-backs for faults that are nobody's (a drain, the store
//! down, no GPU session): they spend neither limit, up to [`MAX_BOUNCES`].

use tessera_farm::queue::Delivery;

/// How many times a task may go back as a fresh message for a fault not its own (store
/// down, no GPU session, an unfit worker, a drain) before it fails with that fault. Why a
/// cap: a need no worker can meet (a codec no worker has, more sessions than any card)
/// would otherwise circle forever and its job never end.
pub(crate) const MAX_BOUNCES: u64 = 20;

/// The counters of a task's earlier attempts: read from its message and its delivery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Attempts {
    /// Give-backs for faults not the task's (message field `bounces`).
    pub(crate) bounces: u64,
    /// The task's own failed attempts before this one (message field `retries`).
    pub(crate) failed: u32,
    /// Deliveries that ended without a verdict before this one: earlier copies' (message
    /// field `lost`) and this copy's (the broker's delivery count).
    pub(crate) lost: u32,
}

impl Attempts {
    /// The counters of `delivery`: its message's fields (absent: 0) and its redeliveries.
    pub(crate) fn of(delivery: &Delivery) -> Attempts {
        let mut attempts = Attempts::in_body(&delivery.body);
        attempts.lost = attempts.lost.saturating_add(delivery.redeliveries);
        attempts
    }

    /// The counters a message carries, without a delivery's own count.
    pub(crate) fn in_body(body: &[u8]) -> Attempts {
        let v = serde_json::from_slice::<serde_json::Value>(body).ok();
        let field = |name: &str| {
            v.as_ref()
                .and_then(|v| v.get(name))
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
        };
        let small = |name: &str| u32::try_from(field(name)).unwrap_or(u32::MAX);
        Attempts {
            bounces: field("bounces"),
            failed: small("retries"),
            lost: small("lost"),
        }
    }

    /// Which attempt this is (1: the first): every earlier one, failed or lost, counts.
    pub(crate) fn number(&self) -> u32 {
        self.failed.saturating_add(self.lost).saturating_add(1)
    }

    /// Whether the task has gone back for others' faults as often as it may.
    pub(crate) fn worn_out(&self) -> bool {
        self.bounces >= MAX_BOUNCES
    }

    /// The counters after one more give-back for a fault not the task's.
    pub(crate) fn bounced(self) -> Attempts {
        Attempts {
            bounces: self.bounces + 1,
            ..self
        }
    }

    /// The counters after this attempt failed on its own.
    pub(crate) fn failed_once(self) -> Attempts {
        Attempts {
            failed: self.failed.saturating_add(1),
            ..self
        }
    }

    /// The counters after this delivery ended without a verdict.
    pub(crate) fn lost_once(self) -> Attempts {
        Attempts {
            lost: self.lost.saturating_add(1),
            ..self
        }
    }

    /// `body` with these counters written in (a field at 0 is left out, so a task that
    /// never went back keeps the message the dispatcher sent); unchanged when the body is
    /// not a JSON object.
    pub(crate) fn written(&self, body: &[u8]) -> Vec<u8> {
        let Ok(serde_json::Value::Object(mut task)) = serde_json::from_slice(body) else {
            return body.to_vec();
        };
        let fields = [
            ("bounces", self.bounces),
            ("retries", u64::from(self.failed)),
            ("lost", u64::from(self.lost)),
        ];
        for (name, n) in fields {
            if n == 0 {
                task.remove(name);
            } else {
                task.insert(name.into(), n.into());
            }
        }
        serde_json::to_vec(&task).unwrap_or_else(|_| body.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(body: &[u8], redeliveries: u32) -> Delivery {
        struct Nothing;
        #[async_trait::async_trait]
        impl tessera_farm::queue::Acker for Nothing {
            async fn ack(&self) -> Result<(), tessera_farm::FarmError> {
                Ok(())
            }
            async fn reject(&self, _: bool) -> Result<(), tessera_farm::FarmError> {
                Ok(())
            }
        }
        Delivery {
            body: body.to_vec(),
            redeliveries,
            dead_reason: None,
            acker: Box::new(Nothing),
        }
    }

    #[test]
    fn a_copy_carries_every_counter_and_keeps_the_task() {
        let task = br#"{"v":1,"job_id":"j","segment":2,"renditions":[]}"#;
        let first = Attempts::of(&delivery(task, 0));
        assert_eq!(first, Attempts::default());
        assert_eq!(first.number(), 1);
        // Delivered three times before (its workers killed), then it failed on its own.
        let seen = Attempts::of(&delivery(task, 3));
        let copy = seen.failed_once().written(task);
        let again = Attempts::of(&delivery(&copy, 1));
        assert_eq!((again.failed, again.lost, again.bounces), (1, 4, 0));
        assert_eq!(again.number(), 6);
        let bounced = again.bounced().written(&copy);
        let v: serde_json::Value = serde_json::from_slice(&bounced).unwrap();
        assert_eq!(
            (v["job_id"].as_str(), v["segment"].as_u64()),
            (Some("j"), Some(2))
        );
        assert_eq!(
            (v["bounces"].as_u64(), v["retries"].as_u64()),
            (Some(1), Some(1))
        );
        assert_eq!(
            v["lost"].as_u64(),
            Some(4),
            "the copy's own count is carried on"
        );
        // Counters at zero stay out of the message.
        assert_eq!(
            Attempts::default().written(task),
            serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(task).unwrap())
                .unwrap()
        );
    }

    #[test]
    fn messages_of_earlier_releases_and_strange_ones_read_as_they_can() {
        // A stitch copy of the release before carried `retries` only.
        let old = Attempts::in_body(br#"{"job_id":"j","output":0,"retries":2}"#);
        assert_eq!((old.failed, old.lost, old.bounces), (2, 0, 0));
        let huge = Attempts::in_body(br#"{"retries":99999999999,"lost":-1}"#);
        assert_eq!((huge.failed, huge.lost), (u32::MAX, 0));
        assert_eq!(huge.number(), u32::MAX);
        assert_eq!(Attempts::in_body(b"not json"), Attempts::default());
        assert_eq!(
            Attempts::default().failed_once().written(b"[1]"),
            b"[1]".to_vec()
        );
        assert!(Attempts {
            bounces: MAX_BOUNCES,
            ..Attempts::default()
        }
        .worn_out());
        assert_eq!(Attempts::default().lost_once().lost, 1);
    }
}
