//! Events held for jobs that have not started reading them: stored by the event router and
//! acked to the broker at once, read back (oldest first) when the job starts, each row
//! deleted when the job acks it, and every row of a job deleted when the job ends.
//!
//! Why: a job resumed after a restart may wait long for admission and re-prepare before it
//! reads its events; held unacked, they would pass RabbitMQ's consumer timeout (30 min,
//! global, not settable on a managed broker), which closes the dispatcher's events channel
//! and redelivers them all, spending their deliveries (issue 29, M1).

use rusqlite::{params, OptionalExtension};
use tessera_farm::FarmError;

use super::Db;

/// The table, created with the others at open. The triggers forget a job's held events when
/// it ends or is pruned, in the statement that ends or prunes it: no crash leaves rows behind.
pub(super) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS held_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    body BLOB NOT NULL,
    redeliveries INTEGER NOT NULL,
    dead_reason TEXT
);
CREATE INDEX IF NOT EXISTS held_events_job ON held_events(job_id, seq);
CREATE TRIGGER IF NOT EXISTS held_events_job_ended
    AFTER UPDATE OF state ON jobs
    WHEN NEW.state IN ('done', 'failed', 'cancelled')
    BEGIN DELETE FROM held_events WHERE job_id = NEW.id; END;
CREATE TRIGGER IF NOT EXISTS held_events_job_pruned
    AFTER DELETE ON jobs
    BEGIN DELETE FROM held_events WHERE job_id = OLD.id; END;";

/// One held event, as the broker delivered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldEvent {
    /// Row id: events of a job are read back in this order (the order they arrived).
    pub seq: i64,
    /// The message body.
    pub body: Vec<u8>,
    /// Deliveries before the one that was stored.
    pub redeliveries: u32,
    /// Why the broker dead-lettered it, if it did.
    pub dead_reason: Option<String>,
}

impl Db {
    /// Stores an event of `job` delivered by the broker; returns its row id.
    pub fn hold_event(
        &self,
        job: &str,
        body: &[u8],
        redeliveries: u32,
        dead_reason: Option<&str>,
    ) -> Result<i64, FarmError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO held_events (job_id, body, redeliveries, dead_reason)
                 VALUES (?1, ?2, ?3, ?4)",
                params![job, body, redeliveries, dead_reason],
            )?;
            Ok(c.last_insert_rowid())
        })
    }

    /// The oldest held event of `job` after row `after` (0: the oldest of all).
    pub fn held_event_after(&self, job: &str, after: i64) -> Result<Option<HeldEvent>, FarmError> {
        self.with(|c| {
            c.query_row(
                "SELECT seq, body, redeliveries, dead_reason FROM held_events
                 WHERE job_id = ?1 AND seq > ?2 ORDER BY seq LIMIT 1",
                params![job, after],
                |r| {
                    Ok(HeldEvent {
                        seq: r.get(0)?,
                        body: r.get(1)?,
                        redeliveries: r.get(2)?,
                        dead_reason: r.get(3)?,
                    })
                },
            )
            .optional()
        })
    }

    /// Deletes one held event (its job acked it, or dropped it as unreadable).
    pub fn drop_held_event(&self, seq: i64) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute("DELETE FROM held_events WHERE seq = ?1", [seq])
                .map(|_| ())
        })
    }

    /// Deletes every held event of `job` (it has ended).
    pub fn forget_held_events(&self, job: &str) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute("DELETE FROM held_events WHERE job_id = ?1", [job])
                .map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::db::{Db, JobState};
    use std::path::Path;

    fn held(db: &Db, job: &str) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut after = 0;
        while let Some(e) = db.held_event_after(job, after).unwrap() {
            after = e.seq;
            out.push(e.body);
        }
        out
    }

    #[test]
    fn held_events_come_back_in_order_after_a_reopen_until_acked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.db");
        let db = Db::open(&path).unwrap();
        let first = db.hold_event("j", b"1", 0, None).unwrap();
        db.hold_event("j", b"2", 3, Some("rejected")).unwrap();
        db.hold_event("k", b"x", 0, None).unwrap();
        drop(db);
        let db = Db::open(&path).unwrap();
        assert_eq!(held(&db, "j"), vec![b"1".to_vec(), b"2".to_vec()]);
        let second = db.held_event_after("j", first).unwrap().unwrap();
        assert_eq!(
            (second.redeliveries, second.dead_reason.as_deref()),
            (3, Some("rejected"))
        );
        db.drop_held_event(first).unwrap();
        assert_eq!(held(&db, "j"), vec![b"2".to_vec()]);
        db.forget_held_events("j").unwrap();
        assert!(held(&db, "j").is_empty());
        assert_eq!(held(&db, "k"), vec![b"x".to_vec()]);
    }

    #[test]
    fn a_job_that_ends_or_is_pruned_leaves_no_held_events() {
        let db = Db::open(Path::new(":memory:")).unwrap();
        for job in ["done", "failed", "running"] {
            db.insert(job, "t", None, &serde_json::json!({})).unwrap();
            db.hold_event(job, b"e", 0, None).unwrap();
        }
        db.set_state("running", JobState::Encoding).unwrap();
        db.fail("failed", JobState::Failed, "internal", "x")
            .unwrap();
        db.finish("done", &serde_json::json!({})).unwrap();
        assert!(held(&db, "failed").is_empty());
        assert!(held(&db, "done").is_empty());
        assert_eq!(held(&db, "running").len(), 1);
        // A job deleted by the pruning (or any other way) takes its rows with it.
        db.with(|c| c.execute("DELETE FROM jobs WHERE id = 'running'", []))
            .unwrap();
        assert!(held(&db, "running").is_empty());
    }
}
