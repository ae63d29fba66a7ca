//! The version of its input a job was given: the ETag its first run saw, kept until the job
//! ends.
//!
//! Why: a dispatcher restart re-reads the input. If the object was replaced meanwhile, the
//! resumed run would plan and encode other bytes than the ones the job was given (and a run
//! resumed inside delivery would deliver outputs of two different files). Pinned, a resumed
//! run sees the change and fails with it instead.

use rusqlite::{params, OptionalExtension};
use tessera_farm::FarmError;

use super::Db;

/// The table, created with the others at open.
pub(super) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS job_inputs (
    job_id TEXT PRIMARY KEY,
    etag TEXT NOT NULL
);";

/// Forgets the pins of ended jobs; run with the pruning.
pub(super) const PRUNE: &str = "DELETE FROM job_inputs WHERE job_id IN
    (SELECT id FROM jobs WHERE state IN ('done', 'failed', 'cancelled'))";

impl Db {
    /// Pins `job`'s input to `etag` if nothing is pinned yet (its first run, or a database
    /// from before pins), and returns the ETag pinned earlier when it differs from `etag`.
    pub fn pin_input(&self, job: &str, etag: &str) -> Result<Option<String>, FarmError> {
        self.with(|c| {
            c.execute(
                "INSERT OR IGNORE INTO job_inputs (job_id, etag) VALUES (?1, ?2)",
                params![job, etag],
            )?;
            c.query_row(
                "SELECT etag FROM job_inputs WHERE job_id = ?1 AND etag <> ?2",
                params![job, etag],
                |r| r.get(0),
            )
            .optional()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_etag_a_job_sees_is_kept_and_another_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("jobs.db")).unwrap();
        assert_eq!(db.pin_input("j1", "\"a\"").unwrap(), None);
        assert_eq!(
            db.pin_input("j1", "\"a\"").unwrap(),
            None,
            "the same version"
        );
        assert_eq!(db.pin_input("j2", "\"b\"").unwrap(), None, "another job");
        assert_eq!(db.pin_input("j1", "\"c\"").unwrap(), Some("\"a\"".into()));
        // Reopened (a restart): the pin holds.
        drop(db);
        let db = Db::open(&dir.path().join("jobs.db")).unwrap();
        assert_eq!(db.pin_input("j1", "\"c\"").unwrap(), Some("\"a\"".into()));
    }
}
