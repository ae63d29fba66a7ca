//! Job webhooks: the final job state POSTed to the job's `callback_url`, HMAC-signed, at least
//! once.
//!
//! Why signed: the receiver must be able to tell the call came from this farm; the header
//! `X-Tessera-Signature: sha256=<hex HMAC-SHA256(secret, body)>` proves it.
//!
//! Why an outbox: a call made only from memory is lost when the receiver is down longer than
//! the retries last, or when the dispatcher restarts after the job ended (N9). The call is
//! stored in the transaction that ends the job (db/outbox.rs); the sender here makes it until
//! the receiver answers 2xx, backing off up to 5 minutes between tries for [`GIVE_UP_AFTER`],
//! across restarts. Every try carries the same `X-Tessera-Delivery: <job id>:<n>` key, so a
//! receiver can drop a repeat (a 2xx lost on the way back, a crash after the call).

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use tessera_farm::backoff::Backoff;
use tokio_util::sync::CancellationToken;

use crate::db::{now_ms, Db, OutboxRow};
use crate::metrics::Metrics;
use crate::runner::Runner;

/// How long a call is tried, from the job's end: then it is marked given up (kept in the
/// outbox until the job retention prunes it, logged, counted as `failed`).
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The first wait after a failed try; it doubles up to [`LONGEST_WAIT`].
const FIRST_WAIT: Duration = Duration::from_secs(1);
/// The longest wait between two tries.
const LONGEST_WAIT: Duration = Duration::from_secs(300);
/// How often the outbox is looked at for due calls.
const POLL: Duration = Duration::from_secs(1);
/// Calls made at once.
const BATCH: u32 = 16;

/// The signature header value of `body` under `secret`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Starts the webhook sender of `runner`'s farm over `db` until `shutdown`: from now on an
/// ending job queues its webhook (the job view, to its `callback_url`), and queued calls,
/// those a previous run left included, are made. Without a webhook secret nothing is queued
/// or sent (the API refuses callbacks then).
pub fn start(db: &Db, runner: &Runner, shutdown: CancellationToken) {
    let Some(secret) = runner.webhook_secret.clone() else {
        return;
    };
    db.queue_webhooks(Box::new(|row| {
        let url = row.request.get("callback_url")?.as_str()?.to_string();
        Some((url, crate::jobview::view(row).to_string().into_bytes()))
    }));
    let sender = Sender {
        db: db.clone(),
        agent: runner.webhook_guard.agent(),
        secret,
        metrics: runner.metrics.clone(),
    };
    tokio::spawn(sender.run(shutdown));
}

/// What makes the calls.
struct Sender {
    db: Db,
    /// See `WebhookGuard::agent`: checked addresses, no redirects, 10 s per call.
    agent: ureq::Agent,
    secret: String,
    metrics: Arc<Metrics>,
}

/// What happens to a call after a failed try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterFailure {
    /// Tried again at this Unix millisecond.
    Retry(i64),
    /// Its time is up.
    GiveUp,
}

impl Sender {
    /// Makes the due calls, a batch at a time, until `shutdown`.
    async fn run(self, shutdown: CancellationToken) {
        loop {
            let due = self.db.due_webhooks(now_ms(), BATCH);
            let full = due.as_ref().is_ok_and(|d| d.len() == BATCH as usize);
            match due {
                Ok(due) => {
                    let calls = due.into_iter().map(|row| self.send(row));
                    futures_util::future::join_all(calls).await;
                }
                Err(e) => tracing::warn!(error = %e, "webhook outbox not readable"),
            }
            if full {
                continue;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// One try of one call, and its record: delivered (deleted), retried later, or given up.
    async fn send(&self, row: OutboxRow) {
        let key = row.delivery_key();
        let sig = signature(self.secret.as_bytes(), &row.body);
        let (agent, url, body, k) = (
            self.agent.clone(),
            row.url.clone(),
            row.body.clone(),
            key.clone(),
        );
        let result = tokio::task::spawn_blocking(move || post(&agent, &url, &body, &sig, &k))
            .await
            .unwrap_or_else(|e| Err(format!("call task failed: {e}")));
        let attempt = row.attempts + 1;
        let recorded = match result {
            Ok(()) => {
                tracing::info!(job = %row.job_id, delivery = %key, attempt, "webhook delivered");
                self.metrics.webhook(true);
                self.db.webhook_delivered(row.id)
            }
            Err(error) => match after_failure(&row, now_ms(), GIVE_UP_AFTER) {
                AfterFailure::Retry(at) => {
                    tracing::warn!(job = %row.job_id, delivery = %key, attempt, %error,
                        retry_in_ms = at - now_ms(), "webhook attempt failed");
                    self.db.webhook_failed(row.id, at, &error)
                }
                AfterFailure::GiveUp => {
                    tracing::error!(job = %row.job_id, delivery = %key, attempt, %error,
                        "webhook given up after {GIVE_UP_AFTER:?}");
                    self.metrics.webhook(false);
                    self.db.webhook_given_up(row.id, now_ms(), &error)
                }
            },
        };
        if let Err(e) = recorded {
            // The row stays as it was: the call is made again (at least once, not at most).
            tracing::warn!(delivery = %key, error = %e, "webhook outcome not recorded");
        }
    }
}

/// After the failed try number `row.attempts + 1` at `now_ms`: the next try, or give up when
/// the call has waited `give_up_after` since its job ended.
fn after_failure(row: &OutboxRow, now_ms: i64, give_up_after: Duration) -> AfterFailure {
    let limit = i64::try_from(give_up_after.as_millis()).unwrap_or(i64::MAX);
    if now_ms.saturating_sub(row.created_ms) >= limit {
        AfterFailure::GiveUp
    } else {
        let wait = retry_wait(row.attempts + 1);
        AfterFailure::Retry(now_ms + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX / 2))
    }
}

/// The wait after failed try number `attempt` (1 first): 1 s doubling to 5 minutes, jittered
/// by up to half either way so that calls failed together are not retried in step.
fn retry_wait(attempt: u32) -> Duration {
    let mut backoff = Backoff::new(FIRST_WAIT, LONGEST_WAIT).jittered();
    // Past 10 doublings the wait is at its cap.
    for _ in 1..attempt.min(12) {
        backoff.next_delay();
    }
    backoff.next_delay()
}

fn post(agent: &ureq::Agent, url: &str, body: &[u8], sig: &str, key: &str) -> Result<(), String> {
    let resp = agent
        .post(url)
        .header("content-type", "application/json")
        .header("x-tessera-signature", sig)
        .header("x-tessera-delivery", key)
        .send(body)
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("HTTP {status}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_a_known_hmac_sha256() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn waits_double_from_a_second_to_five_minutes_jittered() {
        for (attempt, nominal) in [(1, 1), (2, 2), (3, 4), (9, 256), (10, 300), (40, 300)] {
            for _ in 0..20 {
                let wait = retry_wait(attempt).as_secs_f64();
                let nominal = f64::from(nominal);
                assert!(
                    wait >= nominal / 2.0 && wait <= nominal * 1.5,
                    "attempt {attempt}: {wait} s, nominal {nominal} s"
                );
            }
        }
    }

    #[test]
    fn a_call_is_retried_for_a_day_then_given_up() {
        assert!(GIVE_UP_AFTER >= Duration::from_secs(3600));
        let row = OutboxRow {
            id: 7,
            job_id: "j".into(),
            url: "http://hooks.example.com/".into(),
            body: b"{}".to_vec(),
            attempts: 30,
            next_attempt_ms: 0,
            created_ms: 1_000_000,
        };
        assert_eq!(row.delivery_key(), "j:7");
        let day = 24 * 3600 * 1000;
        match after_failure(&row, 1_000_000 + day - 1, GIVE_UP_AFTER) {
            AfterFailure::Retry(at) => {
                let wait = at - (1_000_000 + day - 1);
                assert!((150_000..=450_000).contains(&wait), "{wait} ms");
            }
            AfterFailure::GiveUp => panic!("given up before its day"),
        }
        assert_eq!(
            after_failure(&row, 1_000_000 + day, GIVE_UP_AFTER),
            AfterFailure::GiveUp
        );
    }
}
