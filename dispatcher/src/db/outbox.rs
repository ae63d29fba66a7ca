//! The webhook outbox: one row per webhook call still to make, written in the transaction
//! that ends its job, deleted once the receiver answers 2xx, kept marked "given up" after the
//! sender's time limit.
//!
//! Why the statements that end a job (`finish`, `fail`, `cancel`) live here: a job's end and
//! its webhook must be stored together, or a crash between the two loses the call (N9). A
//! restarted dispatcher finds the rows and sends them (see `webhook.rs`).

use rusqlite::{params, Connection, OptionalExtension};
use tessera_farm::FarmError;

use super::{now, row, Db, JobState, WebhookOf, SELECT};

/// One webhook call waiting in the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    /// Row id; with the job id, the call's idempotency key.
    pub id: i64,
    /// The job the call reports.
    pub job_id: String,
    /// Where it goes (the job's `callback_url`).
    pub url: String,
    /// The body, fixed when the job ended: every attempt sends the same bytes.
    pub body: Vec<u8>,
    /// Attempts made so far (failed ones; a delivered row is deleted).
    pub attempts: u32,
    /// Unix milliseconds of the next attempt.
    pub next_attempt_ms: i64,
    /// Unix milliseconds when the job ended (the give-up age counts from here).
    pub created_ms: i64,
}

impl OutboxRow {
    /// The `X-Tessera-Delivery` value: `<job id>:<row id>`, the same on every attempt of this
    /// call, so a receiver can drop the repeats of a call it already handled.
    pub fn delivery_key(&self) -> String {
        format!("{}:{}", self.job_id, self.id)
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl Db {
    /// Makes every job end from now on queue a webhook when `of` gives one for the ended
    /// job's row: `(url, body)`. Set once, by the webhook sender at start, before any job can
    /// end; a database without it (the tests, a farm with no webhook secret) queues none.
    pub fn queue_webhooks(&self, of: Box<WebhookOf>) {
        if self.webhooks.set(of).is_err() {
            tracing::warn!("webhooks already queued by an earlier sender; second one ignored");
        }
    }

    /// Runs `update` (a statement that may end job `id`) and, when it changed the job, queues
    /// the job's webhook, all in one transaction; returns the rows `update` changed.
    fn end(
        &self,
        id: &str,
        update: impl FnOnce(&Connection) -> rusqlite::Result<usize>,
    ) -> Result<usize, FarmError> {
        self.with(|c| {
            let tx = c.unchecked_transaction()?;
            let moved = update(&tx)?;
            if let (1, Some(of)) = (moved, self.webhooks.get()) {
                let ended = tx
                    .query_row(&format!("{SELECT} WHERE id = ?1"), [id], row)
                    .optional()?;
                if let Some((url, body)) = ended.as_ref().and_then(of) {
                    let t = now_ms();
                    tx.execute(
                        "INSERT INTO webhook_outbox (job_id, url, body, next_attempt_ms, created_ms)
                         VALUES (?1, ?2, ?3, ?4, ?4)",
                        params![id, url, body, t],
                    )?;
                }
            }
            tx.commit()?;
            Ok(moved)
        })
    }

    /// Cancels a job unless it has ended or is delivering its outputs; whether it did.
    pub fn cancel(&self, id: &str, message: &str) -> Result<bool, FarmError> {
        let moved = self.end(id, |c| {
            c.execute(
                "UPDATE jobs SET state = 'cancelled', error_code = 'cancelled',
                 error_message = ?2, updated_at = ?3
                 WHERE id = ?1 AND state NOT IN ('done', 'failed', 'cancelled', 'delivering')",
                params![id, message, now()],
            )
        })?;
        Ok(moved == 1)
    }

    /// Marks a job done with its report (a job already ended stays as it is).
    pub fn finish(&self, id: &str, report: &serde_json::Value) -> Result<(), FarmError> {
        self.end(id, |c| {
            c.execute(
                "UPDATE jobs SET state = 'done', report = ?2, updated_at = ?3
                 WHERE id = ?1 AND state NOT IN ('done', 'failed', 'cancelled')",
                params![id, report.to_string(), now()],
            )
        })
        .map(|_| ())
    }

    /// Marks a job failed (or cancelled) with a code and message.
    pub fn fail(
        &self,
        id: &str,
        state: JobState,
        code: &str,
        message: &str,
    ) -> Result<(), FarmError> {
        self.end(id, |c| {
            c.execute(
                "UPDATE jobs SET state = ?2, error_code = ?3, error_message = ?4, updated_at = ?5
                 WHERE id = ?1 AND state NOT IN ('done', 'failed', 'cancelled')",
                params![id, state.as_str(), code, message, now()],
            )
        })
        .map(|_| ())
    }

    /// Up to `limit` calls due at `now_ms` and not given up, the longest-waiting first.
    pub fn due_webhooks(&self, now_ms: i64, limit: u32) -> Result<Vec<OutboxRow>, FarmError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT id, job_id, url, body, attempts, next_attempt_ms, created_ms
                 FROM webhook_outbox WHERE given_up_ms IS NULL AND next_attempt_ms <= ?1
                 ORDER BY next_attempt_ms, id LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![now_ms, limit], |r| {
                Ok(OutboxRow {
                    id: r.get(0)?,
                    job_id: r.get(1)?,
                    url: r.get(2)?,
                    body: r.get(3)?,
                    attempts: r.get(4)?,
                    next_attempt_ms: r.get(5)?,
                    created_ms: r.get(6)?,
                })
            })?;
            rows.collect()
        })
    }

    /// The receiver took call `id` (2xx): it leaves the outbox.
    pub fn webhook_delivered(&self, id: i64) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute("DELETE FROM webhook_outbox WHERE id = ?1", [id])
                .map(|_| ())
        })
    }

    /// An attempt of call `id` failed with `error`: counted, tried again at `next_attempt_ms`.
    pub fn webhook_failed(
        &self,
        id: i64,
        next_attempt_ms: i64,
        error: &str,
    ) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute(
                "UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_ms = ?2,
                 last_error = ?3 WHERE id = ?1",
                params![id, next_attempt_ms, error],
            )
            .map(|_| ())
        })
    }

    /// The last attempt of call `id` failed with `error` and its time is up: kept, marked
    /// given up at `now_ms`, never sent again.
    pub fn webhook_given_up(&self, id: i64, now_ms: i64, error: &str) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute(
                "UPDATE webhook_outbox SET attempts = attempts + 1, given_up_ms = ?2,
                 last_error = ?3 WHERE id = ?1",
                params![id, now_ms, error],
            )
            .map(|_| ())
        })
    }
}
