//! The watch's record of uploads it has seen, in the job database.

use rusqlite::{params, OptionalExtension};
use tessera_farm::FarmError;

use crate::db::{now, Db};

/// Uploads seen in watched buckets: one row per object version (bucket, key, ETag).
///
/// Why: an upload must start exactly one job, whether it is seen by the poller, by an S3
/// event, by both, or again after a restart.
impl Db {
    /// Claims the object version `(bucket, key, etag)` for the job `job_id`, atomically;
    /// `true` when this call claimed it, `false` when it was claimed before.
    pub fn claim_object(
        &self,
        bucket: &str,
        key: &str,
        etag: &str,
        job_id: &str,
    ) -> Result<bool, FarmError> {
        self.with(|c| {
            c.execute(
                "INSERT OR IGNORE INTO seen_objects (bucket, key, etag, job_id, seen_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![bucket, key, etag, job_id, now()],
            )
            .map(|n| n == 1)
        })
    }

    /// The job id of a claimed object version whose job row was never written (the process
    /// stopped between the claim and the insert), so that the job can still be started.
    pub fn unstarted_claim(
        &self,
        bucket: &str,
        key: &str,
        etag: &str,
    ) -> Result<Option<String>, FarmError> {
        self.with(|c| {
            c.query_row(
                "SELECT s.job_id FROM seen_objects s
                 WHERE s.bucket = ?1 AND s.key = ?2 AND s.etag = ?3
                   AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = s.job_id)",
                params![bucket, key, etag],
                |r| r.get(0),
            )
            .optional()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn an_object_version_is_claimed_once_and_unstarted_claims_are_found() {
        let db = Db::open(Path::new(":memory:")).unwrap();
        assert!(db.claim_object("in", "a.mp4", "e1", "j1").unwrap());
        assert!(!db.claim_object("in", "a.mp4", "e1", "j2").unwrap());
        assert!(db.claim_object("in", "a.mp4", "e2", "j3").unwrap()); // a new version
        assert!(db.claim_object("other", "a.mp4", "e1", "j4").unwrap());
        assert_eq!(
            db.unstarted_claim("in", "a.mp4", "e1").unwrap().as_deref(),
            Some("j1")
        );
        db.insert(
            "j1",
            "watch",
            Some("watch:in/a.mp4@e1"),
            &serde_json::json!({}),
        )
        .unwrap();
        assert_eq!(db.unstarted_claim("in", "a.mp4", "e1").unwrap(), None);
        assert_eq!(db.unstarted_claim("in", "nope.mp4", "e1").unwrap(), None);
    }
}
