//! Job state in SQLite: what the API reports and what a restarted dispatcher resumes.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use tessera_farm::FarmError;
use tokio_util::sync::CancellationToken;

/// A job's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Accepted, not started.
    Queued,
    /// Staging, probing, splitting.
    Splitting,
    /// Segments on the queue.
    Encoding,
    /// Stitching and checking the outputs.
    Stitching,
    /// Copying the outputs to their destinations: too late to cancel.
    Delivering,
    /// Output written.
    Done,
    /// Failed with a reason.
    Failed,
    /// Cancelled by a user.
    Cancelled,
}

impl JobState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Splitting => "splitting",
            JobState::Encoding => "encoding",
            JobState::Stitching => "stitching",
            JobState::Delivering => "delivering",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => JobState::Queued,
            "splitting" => JobState::Splitting,
            "encoding" => JobState::Encoding,
            "stitching" => JobState::Stitching,
            "delivering" => JobState::Delivering,
            "done" => JobState::Done,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            _ => return None,
        })
    }

    /// Whether the job has ended.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Done | JobState::Failed | JobState::Cancelled
        )
    }
}

/// One job row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    /// Job id.
    pub id: String,
    /// State.
    pub state: JobState,
    /// The submitted request (JSON).
    pub request: serde_json::Value,
    /// Segments planned.
    pub segments_total: u32,
    /// Segments finished.
    pub segments_done: u32,
    /// Stable error code when failed.
    pub error_code: Option<String>,
    /// Error message when failed.
    pub error_message: Option<String>,
    /// The job report when done (JSON).
    pub report: Option<serde_json::Value>,
    /// Unix seconds of creation.
    pub created_at: i64,
    /// Unix seconds of the last change.
    pub updated_at: i64,
    /// The tenant the job belongs to.
    pub owner: String,
}

mod deliveries;
mod held;
mod inputs;
mod listing;
mod outbox;
mod quota;
mod segment_runs;
pub use listing::{HourCount, JobFilter};
pub use outbox::{now_ms, OutboxRow};
pub use quota::Admitted;
pub use segment_runs::SegmentRun;

/// Which ended job gets a webhook, and its `(url, body)`; see [`Db::queue_webhooks`].
pub type WebhookOf = dyn Fn(&JobRow) -> Option<(String, Vec<u8>)> + Send + Sync;

/// The job database (one SQLite file, serialised access).
#[derive(Clone)]
pub struct Db {
    conn: Arc<Mutex<Connection>>,
    /// Set by the webhook sender: the statements that end a job queue its webhook with it.
    webhooks: Arc<OnceLock<Box<WebhookOf>>>,
}

fn db_err(e: impl std::fmt::Display) -> FarmError {
    FarmError::Io {
        path: "job database".into(),
        reason: e.to_string(),
    }
}

/// [`Db::insert`] on the connection `c` (inside the caller's transaction, if any).
fn insert_in(
    c: &Connection,
    id: &str,
    owner: &str,
    idempotency_key: Option<&str>,
    request: &serde_json::Value,
) -> rusqlite::Result<(String, bool)> {
    if let Some(id) = quota::keyed(c, idempotency_key)? {
        return Ok((id, false));
    }
    c.execute(
        "INSERT INTO jobs (id, owner, idempotency_key, state, request, created_at, updated_at)
         VALUES (?1, ?2, ?3, 'queued', ?4, ?5, ?5)",
        params![id, owner, idempotency_key, request.to_string(), now()],
    )?;
    Ok((id.to_string(), true))
}

pub(super) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Db {
    /// Opens (creating if needed) the database at `path`; ":memory:" for tests.
    pub fn open(path: &Path) -> Result<Self, FarmError> {
        let conn = Connection::open(path).map_err(db_err)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA busy_timeout = 5000;
             CREATE TABLE IF NOT EXISTS jobs (
                id TEXT PRIMARY KEY,
                idempotency_key TEXT UNIQUE,
                state TEXT NOT NULL,
                request TEXT NOT NULL,
                segments_total INTEGER NOT NULL DEFAULT 0,
                segments_done INTEGER NOT NULL DEFAULT 0,
                error_code TEXT,
                error_message TEXT,
                report TEXT,
                created_at INTEGER NOT NULL,
                updated_at INTEGER NOT NULL
             );
             CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
             CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created_at);
             CREATE TABLE IF NOT EXISTS seen_objects (
                bucket TEXT NOT NULL,
                key TEXT NOT NULL,
                etag TEXT NOT NULL,
                job_id TEXT NOT NULL,
                seen_at INTEGER NOT NULL,
                UNIQUE (bucket, key, etag)
             );
             CREATE TABLE IF NOT EXISTS job_progress (
                job_id TEXT PRIMARY KEY,
                plan_fingerprint INTEGER NOT NULL,
                published INTEGER NOT NULL DEFAULT 0
             );
             CREATE TABLE IF NOT EXISTS job_segments (
                job_id TEXT NOT NULL,
                idx INTEGER NOT NULL,
                frames INTEGER NOT NULL,
                targets TEXT,
                PRIMARY KEY (job_id, idx)
             );
             CREATE TABLE IF NOT EXISTS webhook_outbox (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                job_id TEXT NOT NULL,
                url TEXT NOT NULL,
                body BLOB NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                next_attempt_ms INTEGER NOT NULL,
                created_ms INTEGER NOT NULL,
                given_up_ms INTEGER,
                last_error TEXT
             );
             CREATE INDEX IF NOT EXISTS webhook_outbox_due
                ON webhook_outbox(given_up_ms, next_attempt_ms);",
        )
        .map_err(db_err)?;
        let tables = [
            deliveries::SCHEMA,
            held::SCHEMA,
            inputs::SCHEMA,
            segment_runs::SCHEMA,
        ];
        conn.execute_batch(&tables.concat()).map_err(db_err)?;
        // Databases from before tenants: every job belonged to the one client there was.
        let has_owner: bool = conn
            .prepare("SELECT 1 FROM pragma_table_info('jobs') WHERE name = 'owner'")
            .and_then(|mut s| s.exists([]))
            .map_err(db_err)?;
        if !has_owner {
            conn.execute_batch(
                "ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
                 CREATE INDEX IF NOT EXISTS jobs_owner ON jobs(owner, created_at);",
            )
            .map_err(db_err)?;
        }
        // Databases from before target quality: no segment reported a search.
        let has_targets: bool = conn
            .prepare("SELECT 1 FROM pragma_table_info('job_segments') WHERE name = 'targets'")
            .and_then(|mut s| s.exists([]))
            .map_err(db_err)?;
        if !has_targets {
            conn.execute_batch("ALTER TABLE job_segments ADD COLUMN targets TEXT;")
                .map_err(db_err)?;
        }
        conn.execute_batch(quota::UNFINISHED_INDEX)
            .map_err(db_err)?;
        Ok(Db {
            conn: Arc::new(Mutex::new(conn)),
            webhooks: Arc::default(),
        })
    }

    pub(super) fn with<R>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<R>,
    ) -> Result<R, FarmError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&conn).map_err(db_err)
    }

    /// Inserts a job of tenant `owner` unless one with the same idempotency key exists
    /// (keys are global: callers put the tenant in them); returns the job's id and whether it
    /// was created now.
    pub fn insert(
        &self,
        id: &str,
        owner: &str,
        idempotency_key: Option<&str>,
        request: &serde_json::Value,
    ) -> Result<(String, bool), FarmError> {
        self.with(|c| insert_in(c, id, owner, idempotency_key, request))
    }

    /// Moves a job to `state`; final states are never left, `delivering` only for one (N3).
    pub fn set_state(&self, id: &str, state: JobState) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute(
                "UPDATE jobs SET state = ?2, updated_at = ?3
                 WHERE id = ?1 AND state NOT IN ('done', 'failed', 'cancelled')
                 AND (state <> 'delivering' OR ?2 IN ('done', 'failed', 'cancelled'))",
                params![id, state.as_str(), now()],
            )
            .map(|_| ())
        })
    }

    /// Records segment progress.
    pub fn set_segments(&self, id: &str, total: u32, done: u32) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute(
                "UPDATE jobs SET segments_total = ?2, segments_done = ?3, updated_at = ?4 WHERE id = ?1",
                params![id, total, done, now()],
            )
            .map(|_| ())
        })
    }

    /// Moves a job to `delivering` unless it ended first (a cancel won the race): then
    /// `Cancelled`. Why one statement: the cancel request makes the opposite move
    /// ([`Db::cancel`]), and SQLite serialises the two, so exactly one of them wins.
    pub fn begin_delivery(&self, id: &str) -> Result<(), FarmError> {
        let moved = self.with(|c| {
            c.execute(
                "UPDATE jobs SET state = 'delivering', updated_at = ?2
                 WHERE id = ?1 AND state NOT IN ('done', 'failed', 'cancelled')",
                params![id, now()],
            )
        })?;
        if moved == 1 {
            Ok(())
        } else {
            Err(FarmError::Cancelled { job: id.into() })
        }
    }

    /// One job.
    pub fn get(&self, id: &str) -> Result<Option<JobRow>, FarmError> {
        self.with(|c| {
            c.query_row(&format!("{SELECT} WHERE id = ?1"), [id], row)
                .optional()
        })
    }

    /// Jobs newest first, optionally in one state and of one tenant, paged.
    pub fn list(
        &self,
        state: Option<JobState>,
        owner: Option<&str>,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<JobRow>, FarmError> {
        self.with(|c| {
            let mut stmt = c.prepare(&format!(
                "{SELECT} WHERE (?1 IS NULL OR state = ?1) AND (?4 IS NULL OR owner = ?4)
                 ORDER BY created_at DESC, id LIMIT ?2 OFFSET ?3"
            ))?;
            let args = params![state.map(|s| s.as_str()), limit, offset, owner];
            let rows = stmt.query_map(args, row)?;
            rows.collect()
        })
    }

    /// Unfinished jobs of tenant `owner` (its quota).
    pub fn unfinished_of(&self, owner: &str) -> Result<u64, FarmError> {
        self.with(|c| {
            c.query_row(quota::UNFINISHED_OF, [owner], |r| r.get::<_, i64>(0))
                .map(|n| n.max(0) as u64)
        })
    }

    /// Deletes final jobs last changed before `cutoff` (Unix seconds); returns how many went.
    /// Jobs whose end is not complete (progress kept) stay. Webhooks given up before then go
    /// too (kept until now for the operator to see).
    pub fn prune(&self, cutoff: i64) -> Result<usize, FarmError> {
        self.with(|c| {
            c.execute(
                "DELETE FROM webhook_outbox WHERE given_up_ms < ?1",
                [cutoff.saturating_mul(1000)],
            )?;
            c.execute(deliveries::PRUNE, [])?;
            c.execute(inputs::PRUNE, [])?;
            let pruned = c.execute(
                "DELETE FROM jobs WHERE state IN ('done', 'failed', 'cancelled')
                 AND updated_at < ?1
                 AND id NOT IN (SELECT job_id FROM job_progress)",
                [cutoff],
            )?;
            c.execute(segment_runs::PRUNE, [])?;
            Ok(pruned)
        })
    }

    /// Jobs that have not ended (resumed after a restart).
    pub fn unfinished(&self) -> Result<Vec<JobRow>, FarmError> {
        self.with(|c| {
            let mut stmt = c.prepare(&format!(
                "{SELECT} WHERE state NOT IN ('done', 'failed', 'cancelled') ORDER BY created_at"
            ))?;
            let rows = stmt.query_map([], row)?;
            rows.collect()
        })
    }
}

const SELECT: &str = "SELECT id, state, request, segments_total, segments_done, error_code,
    error_message, report, created_at, updated_at, owner FROM jobs";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<JobRow> {
    let state: String = r.get(1)?;
    let request: String = r.get(2)?;
    let report: Option<String> = r.get(7)?;
    Ok(JobRow {
        id: r.get(0)?,
        state: JobState::parse(&state).unwrap_or(JobState::Failed),
        request: serde_json::from_str(&request).unwrap_or(serde_json::Value::Null),
        segments_total: r.get(3)?,
        segments_done: r.get(4)?,
        error_code: r.get(5)?,
        error_message: r.get(6)?,
        report: report.and_then(|s| serde_json::from_str(&s).ok()),
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
        owner: r.get(10)?,
    })
}

/// Prunes finished jobs older than `retention` now and then every hour, until `shutdown`.
/// Why: the job table would otherwise grow forever (every job ever run, with its report).
pub async fn prune_every_hour(db: Db, retention: Duration, shutdown: CancellationToken) {
    loop {
        let cutoff = now() - i64::try_from(retention.as_secs()).unwrap_or(i64::MAX);
        let pruning = db.clone();
        match tokio::task::spawn_blocking(move || pruning.prune(cutoff)).await {
            Ok(Ok(n)) if n > 0 => tracing::info!(jobs = n, "finished jobs pruned"),
            Ok(Err(e)) => tracing::warn!(error = %e, "job pruning failed"),
            _ => {}
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(3600)) => {}
        }
    }
}

#[cfg(test)]
mod tests;
