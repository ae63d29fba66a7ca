//! How the RabbitMQ queue is reached and behaves: [`RabbitConfig`], and the redaction of its
//! URI for logs.
//!
//! Why a file of its own: the connection and the queue both read it; kept at the bottom, it
//! imports nothing from them.

use std::time::Duration;

/// How to reach RabbitMQ and how its queues behave.
///
/// Why: the worker and dispatcher binaries build it from their settings; `Debug` hides the
/// password so the config can be logged.
#[derive(Clone)]
pub struct RabbitConfig {
    /// `amqp://user:pass@host:port/vhost` (vhost percent-encoded; `?heartbeat=N` allowed).
    pub uri: String,
    /// Attempts of one task that may fail on their own (the media child crashed, ran out of
    /// memory or time, a retryable error) before the task fails; counted by the worker in the
    /// message (worker `attempts.rs`), the same on every broker version (at least 1).
    pub delivery_limit: u32,
    /// Deliveries of one message that may end without a verdict (the worker killed from
    /// outside, its node or connection lost) before the broker dead-letters it: the queue's
    /// `x-delivery-limit` is this minus one. Larger than `delivery_limit`, so a churning spot
    /// fleet does not fail a job while a poison input still fails in a few attempts.
    pub lost_limit: u32,
    /// Limit for opening the connection (TCP and AMQP handshake).
    pub connect_timeout: Duration,
    /// Limit for every other broker operation (declare, publish confirm, ack, ...).
    pub op_timeout: Duration,
}

impl RabbitConfig {
    /// A config with the defaults: delivery limit 5, lost limit 20, connect timeout 10 s, op
    /// timeout 30 s.
    pub fn new(uri: impl Into<String>) -> Self {
        RabbitConfig {
            uri: uri.into(),
            delivery_limit: 5,
            lost_limit: 20,
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
            .field("lost_limit", &self.lost_limit)
            .field("connect_timeout", &self.connect_timeout)
            .field("op_timeout", &self.op_timeout)
            .finish()
    }
}

/// The URI with its password replaced by `***`, for logs and errors.
pub(super) fn redact(uri: &str) -> String {
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
