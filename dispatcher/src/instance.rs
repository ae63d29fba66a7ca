//! One dispatcher per farm, enforced: a lock on the job database, and a lock on the broker
//! taken before the events queue is consumed.
//!
//! Why: a second dispatcher is neither useful nor safe. On the same database both would
//! resume, split and deliver the same jobs; on one broker each would take about half of the
//! other's events and drop them, so both sets of jobs would hang. A rolling update that starts
//! the new dispatcher before the old one stops, or an operator starting a second one, is
//! refused with a reason instead.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tessera_farm::queue::{Consumer, Queue, HELD_ELSEWHERE};
use tessera_farm::FarmError;
use tessera_model::wire::QUEUE_EVENTS;

/// How long a starting dispatcher waits for the events queue to be free: the consumer of a
/// dispatcher that just stopped can take the broker a moment to drop.
const HELD_PATIENCE: Duration = Duration::from_secs(10);

/// Events the dispatcher may hold unacknowledged (its running jobs' events in flight).
pub(super) const EVENTS_PREFETCH: u16 = 256;

/// The lock file of a job database; held for as long as the returned file lives.
pub(super) fn lock_database(db: &Path) -> Result<Option<File>, FarmError> {
    if db.as_os_str() == ":memory:" {
        return Ok(None);
    }
    let path = PathBuf::from(format!("{}.lock", db.display()));
    match tessera_farm::disk::try_lock_file(&path) {
        Ok(Some(file)) => Ok(Some(file)),
        Ok(None) => Err(FarmError::Io {
            path: db.display().to_string(),
            reason: "another dispatcher uses this job database (its lock file is held): one \
                     dispatcher per database"
                .into(),
        }),
        Err(e) => Err(FarmError::io(&path, e)),
    }
}

/// The broker-wide lock a dispatcher holds while it runs.
pub(super) const DISPATCHER_LOCK: &str = "tessera.dispatcher.lock";

/// Takes the farm's dispatcher lock, waiting up to [`HELD_PATIENCE`] for a stopped
/// dispatcher's connection to go, then consumes the events queue; refuses to start beside a
/// running dispatcher.
pub(super) async fn claim_events(queue: &dyn Queue) -> Result<Box<dyn Consumer>, FarmError> {
    let deadline = tokio::time::Instant::now() + HELD_PATIENCE;
    loop {
        match queue.hold_lock(DISPATCHER_LOCK).await {
            Ok(()) => return queue.consume(QUEUE_EVENTS, EVENTS_PREFETCH).await,
            Err(FarmError::Queue { reason, .. })
                if reason.contains(HELD_ELSEWHERE) && tokio::time::Instant::now() < deadline =>
            {
                tracing::warn!("another dispatcher holds the farm; waiting for it to go");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(FarmError::Queue { queue, reason }) if reason.contains(HELD_ELSEWHERE) => {
                return Err(FarmError::Queue {
                    queue,
                    reason: format!(
                        "another dispatcher runs on this broker ({reason}): one dispatcher per \
                         farm; stop it first"
                    ),
                })
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_locked_by_one_dispatcher_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("jobs.db");
        let first = lock_database(&db).unwrap();
        assert!(first.is_some());
        let err = lock_database(&db).unwrap_err().to_string();
        assert!(
            err.contains("another dispatcher") && err.contains("jobs.db"),
            "{err}"
        );
        drop(first);
        assert!(lock_database(&db).unwrap().is_some());
        assert!(lock_database(Path::new(":memory:")).unwrap().is_none());
    }
}
