//! What a job has delivered, durably: each object copied to a destination is recorded right
//! after its copy (runner.rs `S3Sink`), and forgotten when a rollback removes it or the job
//! ends.
//!
//! Why: delivery is a one-way door. A dispatcher killed inside it resumes the job still
//! `delivering`; if the resumed run then fails (its input gone, a stitch lost), the objects
//! the killed run copied are known only from these rows, and are taken back from them.

use rusqlite::params;
use tessera_farm::FarmError;

use super::Db;

/// The table, created with the others at open.
pub(super) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS job_deliveries (
    job_id TEXT NOT NULL,
    bucket TEXT NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (job_id, bucket, key)
);";

/// Forgets the deliveries of ended jobs (a restart kept them from being forgotten at the
/// end); run with the pruning.
pub(super) const PRUNE: &str = "DELETE FROM job_deliveries WHERE job_id IN
    (SELECT id FROM jobs WHERE state IN ('done', 'failed', 'cancelled'))";

impl Db {
    /// Records that job `job` copied an object to `bucket`/`key` (once, however often).
    pub fn record_delivery(&self, job: &str, bucket: &str, key: &str) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute(
                "INSERT OR IGNORE INTO job_deliveries (job_id, bucket, key) VALUES (?1, ?2, ?3)",
                params![job, bucket, key],
            )
            .map(|_| ())
        })
    }

    /// Whether `job` recorded a copy to `bucket`/`key` that no rollback has removed.
    pub fn delivered(&self, job: &str, bucket: &str, key: &str) -> Result<bool, FarmError> {
        self.with(|c| {
            c.query_row(
                "SELECT EXISTS (SELECT 1 FROM job_deliveries
                 WHERE job_id = ?1 AND bucket = ?2 AND key = ?3)",
                params![job, bucket, key],
                |r| r.get(0),
            )
        })
    }

    /// Forgets one delivered object of `job` (a rollback removed it).
    pub fn forget_delivery(&self, job: &str, bucket: &str, key: &str) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute(
                "DELETE FROM job_deliveries WHERE job_id = ?1 AND bucket = ?2 AND key = ?3",
                params![job, bucket, key],
            )
            .map(|_| ())
        })
    }

    /// The objects `job` delivered and no rollback removed, as `(bucket, key)`, in order.
    pub fn deliveries(&self, job: &str) -> Result<Vec<(String, String)>, FarmError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT bucket, key FROM job_deliveries WHERE job_id = ?1 ORDER BY bucket, key",
            )?;
            let rows = stmt.query_map([job], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
    }

    /// Forgets every delivery of `job` (it has ended: what it delivered is its output, or was
    /// taken back and any leftovers named in its error).
    pub fn forget_deliveries(&self, job: &str) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute("DELETE FROM job_deliveries WHERE job_id = ?1", [job])
                .map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::db::{Db, JobState};
    use std::path::Path;
    use tessera_farm::FarmError;

    fn delivering(db: &Db, id: &str) {
        db.insert(id, "t", None, &serde_json::json!({})).unwrap();
        db.set_state(id, JobState::Stitching).unwrap();
        db.begin_delivery(id).unwrap();
    }

    #[test]
    fn a_delivering_job_is_never_moved_back_and_cannot_be_cancelled() {
        let db = Db::open(Path::new(":memory:")).unwrap();
        delivering(&db, "j");
        // What a resumed run does: its stages run again, the job stays delivering.
        for earlier in [
            JobState::Splitting,
            JobState::Encoding,
            JobState::Stitching,
            JobState::Queued,
        ] {
            db.set_state("j", earlier).unwrap();
            assert_eq!(db.get("j").unwrap().unwrap().state, JobState::Delivering);
            assert!(!db.cancel("j", "cancelled by request").unwrap());
        }
        // The resumed run reaches delivery again.
        db.begin_delivery("j").unwrap();
        assert_eq!(db.get("j").unwrap().unwrap().state, JobState::Delivering);
        assert!(!db.cancel("j", "cancelled by request").unwrap());
        // A final state is where it goes.
        db.fail("j", JobState::Failed, "input_unreadable", "gone")
            .unwrap();
        assert_eq!(db.get("j").unwrap().unwrap().state, JobState::Failed);
        assert!(matches!(
            db.begin_delivery("j"),
            Err(FarmError::Cancelled { .. })
        ));
        // Before delivery a job still moves freely and can be cancelled.
        db.insert("k", "t", None, &serde_json::json!({})).unwrap();
        db.set_state("k", JobState::Stitching).unwrap();
        db.set_state("k", JobState::Splitting).unwrap();
        assert_eq!(db.get("k").unwrap().unwrap().state, JobState::Splitting);
        assert!(db.cancel("k", "cancelled by request").unwrap());
    }

    #[test]
    fn deliveries_survive_a_reopen_until_removed_or_the_job_ends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.db");
        let db = Db::open(&path).unwrap();
        delivering(&db, "j");
        db.record_delivery("j", "out", "a.mp4").unwrap();
        db.record_delivery("j", "out", "a.mp4").unwrap(); // a copy retried
        db.record_delivery("j", "out", "b.mp4").unwrap();
        db.record_delivery("other", "out", "c.mp4").unwrap();
        drop(db);
        // The dispatcher restarted: what the job delivered is known.
        let db = Db::open(&path).unwrap();
        let both = vec![
            ("out".to_string(), "a.mp4".to_string()),
            ("out".to_string(), "b.mp4".to_string()),
        ];
        assert_eq!(db.deliveries("j").unwrap(), both);
        db.forget_delivery("j", "out", "a.mp4").unwrap();
        assert_eq!(db.deliveries("j").unwrap(), both[1..].to_vec());
        db.forget_deliveries("j").unwrap();
        assert!(db.deliveries("j").unwrap().is_empty());
        assert_eq!(db.deliveries("other").unwrap().len(), 1);
    }
}
