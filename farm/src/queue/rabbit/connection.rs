//! The RabbitMQ connection shared by a queue's clones and its consumers: reconnecting with
//! backoff, channels, and the helpers every broker operation uses (timeouts, argument
//! tables, the error macro).
//!
//! Why a file of its own: both the queue (`rabbit.rs`) and its consumers (`consumer.rs`) need
//! the connection state and these helpers; living below both, they import neither.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lapin::options::ConfirmSelectOptions;
use lapin::types::{AMQPValue, FieldTable};
use lapin::{uri::AMQPUri, Channel, Connection, ConnectionProperties};
use tokio::sync::Mutex;
use tokio::time::{timeout, Instant};

use super::config::{redact, RabbitConfig};
use crate::backoff::Backoff;
use crate::FarmError;

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
pub(super) use queue_err;

/// The connection state shared by the clones of a `RabbitQueue`.
pub(super) struct State {
    pub(super) conn: Option<Arc<Connection>>,
    pub(super) publisher: Option<Channel>,
    /// No reconnect attempt before this instant.
    next_attempt: Option<Instant>,
    /// Waits after failed attempts: 1 s doubling to 30 s, from the first again once connected.
    backoff: Backoff,
}

impl Default for State {
    fn default() -> Self {
        State {
            conn: None,
            publisher: None,
            next_attempt: None,
            backoff: Backoff::new(BACKOFF_FIRST, BACKOFF_MAX),
        }
    }
}

/// What the clones of a `RabbitQueue` and its consumers share: the config, the parsed URI
/// and the connection state.
pub(super) struct Inner {
    pub(super) cfg: RabbitConfig,
    uri: AMQPUri,
    /// The redacted URI, for logs and errors.
    pub(super) target: String,
    pub(super) closed: AtomicBool,
    pub(super) state: Mutex<State>,
}

/// Runs one broker operation under `limit`, naming `what` in the error.
pub(super) async fn timed<T>(
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

/// Runs one declaration under `limit`: like [`timed`], but a refusal by the broker (a
/// channel or connection closed with an AMQP error other than a forced close, which is the
/// broker stopping) is a [`FarmError::QueueRefused`] with the broker's text, for the caller
/// to tell from an outage.
pub(super) async fn declared<T>(
    limit: Duration,
    queue: &str,
    fut: impl std::future::Future<Output = Result<T, lapin::Error>>,
) -> Result<T, FarmError> {
    match timeout(limit, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(match refusal(&e) {
            Some(reason) => FarmError::QueueRefused {
                queue: queue.to_string(),
                reason,
            },
            None => queue_err!(queue, "declare failed: {e}"),
        }),
        Err(_) => Err(queue_err!(queue, "declare: no answer within {limit:?}")),
    }
}

/// The broker's reply when `e` is its refusal of a command (`PRECONDITION_FAILED -
/// inequivalent arg ...`, `INTERNAL_ERROR - Feature transient_nonexcl_queues is deprecated`,
/// `ACCESS_REFUSED ...`); `None` for an outage (I/O, a missed heartbeat, a forced close).
fn refusal(e: &lapin::Error) -> Option<String> {
    use lapin::protocol::{AMQPErrorKind, AMQPHardError};
    let lapin::ErrorKind::ProtocolError(amqp) = e.kind() else {
        return None;
    };
    if *amqp.kind() == AMQPErrorKind::Hard(AMQPHardError::CONNECTIONFORCED) {
        return None;
    }
    Some(format!("{} ({})", amqp.get_message(), amqp.get_id()))
}

/// An AMQP argument table.
pub(super) fn table<const N: usize>(entries: [(&str, AMQPValue); N]) -> FieldTable {
    let mut t = FieldTable::default();
    for (k, v) in entries {
        t.insert(k.into(), v);
    }
    t
}

/// An AMQP string argument.
pub(super) fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(s.into())
}

impl Inner {
    /// The shared state for `cfg`, not yet connected; an unparsable URI is an error naming
    /// the broker (never the password). The URI gets a heartbeat unless it sets one.
    pub(super) fn new(cfg: RabbitConfig) -> Result<Self, FarmError> {
        let target = redact(&cfg.uri);
        let parsed = cfg.uri.parse::<AMQPUri>();
        let mut uri = parsed.map_err(|e| queue_err!(target, "invalid AMQP URI: {e}"))?;
        uri.query.heartbeat.get_or_insert(HEARTBEAT_S);
        Ok(Inner {
            cfg,
            uri,
            target,
            closed: AtomicBool::new(false),
            state: Mutex::default(),
        })
    }

    /// The live connection; after a drop, one reconnect attempt (within `connect_timeout`)
    /// once the backoff since the last failed attempt has passed.
    pub(super) async fn connection(&self, st: &mut State) -> Result<Arc<Connection>, FarmError> {
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
                st.next_attempt = None;
                st.backoff.reset();
                Ok(conn)
            }
            Err(e) => {
                let retry_in = st.backoff.next_delay();
                tracing::warn!(broker = %self.target, error = %e, ?retry_in, "connect failed");
                st.next_attempt = Some(Instant::now() + retry_in);
                Err(e)
            }
        }
    }

    /// The shared publisher channel (confirm mode, reopened if it closed), or a fresh channel
    /// (declares and consumers: a broker error there closes only that channel).
    pub(super) async fn channel(&self, queue: &str, publisher: bool) -> Result<Channel, FarmError> {
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
