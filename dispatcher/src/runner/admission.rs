//! Admission of a job's input to the dispatcher's staging: the HEAD must answer, the input
//! must not be larger than the farm accepts, and the staging disk must hold it beside what
//! the running jobs were promised.
//!
//! Why a module of its own: these are decisions, testable without a store or a disk, and the
//! staging ledger is shared by every job of the dispatcher (see [`StagingLedger`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use tessera_farm::store::ObjectInfo;
use tessera_farm::FarmError;
use tessera_model::error_code::{ErrorClass, ErrorCode};

/// Staging one input needs: the input and its chunks (about twice its size) and 1 GiB more.
pub(super) fn staging_need(size: u64) -> u64 {
    size.saturating_mul(2).saturating_add(1 << 30)
}

/// The input's size and version from its HEAD, or why the job is refused: the HEAD failed
/// (the store's error, after `patiently` waited out an unavailable store), the object does
/// not exist, or it is larger than `max_bytes`. Why a failed HEAD refuses: without its size
/// neither the input cap nor the staging reservation can hold.
pub(super) fn checked_head(
    head: Result<Option<ObjectInfo>, FarmError>,
    input: &str,
    max_bytes: u64,
) -> Result<ObjectInfo, FarmError> {
    let refuse = |code: ErrorCode, message: String| FarmError::Media {
        code,
        class: ErrorClass::Abort,
        message,
    };
    let info = match head {
        Ok(Some(info)) => info,
        Ok(None) => {
            return Err(refuse(
                ErrorCode::InputUnreadable,
                format!("{input}: no such object"),
            ))
        }
        Err(e) => {
            let why = format!("{input}: cannot look at the input: {e}");
            return Err(match e {
                FarmError::StoreUnavailable { key, .. } => {
                    FarmError::StoreUnavailable { key, reason: why }
                }
                _ => refuse(ErrorCode::InputUnreadable, why),
            });
        }
    };
    if info.size > max_bytes {
        let why = format!(
            "{input}: {} bytes, more than the {max_bytes} this farm accepts",
            info.size
        );
        return Err(refuse(ErrorCode::InputTooLarge, why));
    }
    Ok(info)
}

/// Why a resumed run refuses its input: the object was replaced since the job's first run
/// saw version `first`. The job fails rather than encode, or deliver, other bytes than the
/// ones it was given.
pub(super) fn replaced(input: &str, first: &str, now: &str) -> FarmError {
    FarmError::Media {
        code: ErrorCode::InputUnreadable,
        class: ErrorClass::Abort,
        message: format!(
            "{input}: the input was replaced while the job ran (ETag {first} when it started, \
             {now} now); a job delivers only outputs of the version it was given"
        ),
    }
}

/// Bytes of staging promised to the jobs admitted and not yet cleaned up, per job.
///
/// Why: the disk's free space is read per job, and jobs admitted together all see the same
/// free space before any of them has downloaded anything; each admission therefore counts
/// the others' promises as used. A promise lasts until the job's staging is removed
/// ([`StagingLedger::release`]). It is conservative: a job's downloaded input counts both on
/// the disk and in its promise.
#[derive(Default)]
pub(super) struct StagingLedger {
    promised: Mutex<HashMap<String, u64>>,
}

/// One ledger per staging directory, for the dispatcher's life. Why a process-wide map: every
/// job staging there shares the disk, whichever runner admits it.
static LEDGERS: LazyLock<Mutex<HashMap<PathBuf, Arc<StagingLedger>>>> =
    LazyLock::new(Mutex::default);

impl StagingLedger {
    /// The ledger of the staging directory `dir`.
    pub(super) fn of(dir: &Path) -> Arc<StagingLedger> {
        let mut all = LEDGERS.lock().unwrap_or_else(|p| p.into_inner());
        all.entry(dir.to_path_buf()).or_default().clone()
    }

    /// Promises `need` bytes to `job` when `free` (the disk's free bytes now) less what the
    /// other jobs were promised holds them; else refuses with an I/O error on `staging`
    /// naming `input`, the free space and the promises (the error the API documents for a
    /// staging disk that cannot hold an input: `io_error`). A job admitted again (resumed)
    /// replaces its own promise.
    pub(super) fn reserve(
        &self,
        job: &str,
        need: u64,
        free: u64,
        staging: &Path,
        input: &str,
    ) -> Result<(), FarmError> {
        let mut promised = self.promised.lock().unwrap_or_else(|p| p.into_inner());
        let others: u64 = promised
            .iter()
            .filter(|(j, _)| j.as_str() != job)
            .map(|(_, n)| *n)
            .sum();
        let room = free.saturating_sub(others);
        if room < need {
            return Err(FarmError::Io {
                path: staging.display().to_string(),
                reason: format!(
                    "{input}: the dispatcher's staging has {free} bytes free, {others} of them \
                     promised to running jobs; the input needs about {need} (input and chunks)"
                ),
            });
        }
        promised.insert(job.to_string(), need);
        Ok(())
    }

    /// Ends `job`'s promise (its staging was removed, or it never staged).
    pub(super) fn release(&self, job: &str) {
        let mut promised = self.promised.lock().unwrap_or_else(|p| p.into_inner());
        promised.remove(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn info(size: u64) -> ObjectInfo {
        ObjectInfo {
            key: "in/a.mp4".into(),
            etag: "e1".into(),
            size,
        }
    }

    #[test]
    fn a_failed_head_refuses_the_job_with_the_stores_error() {
        let failed = Err(FarmError::Store {
            key: "in/a.mp4".into(),
            reason: "head: AccessDenied (HTTP 403)".into(),
        });
        let err = checked_head(failed, "s3://in/in/a.mp4", 10 * GIB).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("s3://in/in/a.mp4"), "{text}");
        assert!(text.contains("AccessDenied"), "{text}");
        assert_eq!(err.code(), ErrorCode::InputUnreadable);
        let down = Err(FarmError::StoreUnavailable {
            key: "in/a.mp4".into(),
            reason: "head: timed out".into(),
        });
        let err = checked_head(down, "s3://in/in/a.mp4", 10 * GIB).unwrap_err();
        assert!(matches!(err, FarmError::StoreUnavailable { .. }), "{err}");
        assert!(err.to_string().contains("timed out"), "{err}");
    }

    #[test]
    fn the_head_gives_the_version_and_caps_the_size() {
        let ok = checked_head(Ok(Some(info(5))), "s3://in/a", 5).unwrap();
        assert_eq!((ok.size, ok.etag.as_str()), (5, "e1"));
        let big = checked_head(Ok(Some(info(6))), "s3://in/a", 5).unwrap_err();
        assert_eq!(big.code(), ErrorCode::InputTooLarge);
        let gone = checked_head(Ok(None), "s3://in/a", 5).unwrap_err();
        assert_eq!(gone.code(), ErrorCode::InputUnreadable);
    }

    #[test]
    fn a_second_job_sees_the_first_ones_promise() {
        let ledger = StagingLedger::default();
        let need = staging_need(10 * GIB);
        // The disk holds 1.5 inputs' staging; neither job has downloaded anything yet.
        let free = need + need / 2;
        let staging = Path::new("/staging");
        ledger
            .reserve("j1", need, free, staging, "s3://in/a")
            .unwrap();
        let err = ledger
            .reserve("j2", need, free, staging, "s3://in/b")
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::IoError);
        assert!(err.to_string().contains("s3://in/b"), "{err}");
        assert!(err.to_string().contains("promised"), "{err}");
        // A job resumed after a restart replaces its own promise.
        ledger
            .reserve("j1", need, free, staging, "s3://in/a")
            .unwrap();
        ledger.release("j1");
        ledger
            .reserve("j2", need, free, staging, "s3://in/b")
            .unwrap();
    }

    #[test]
    fn ledgers_are_per_staging_directory() {
        let a = StagingLedger::of(Path::new("/tmp/ledger-test-a"));
        let b = StagingLedger::of(Path::new("/tmp/ledger-test-b"));
        assert!(Arc::ptr_eq(
            &a,
            &StagingLedger::of(Path::new("/tmp/ledger-test-a"))
        ));
        assert!(!Arc::ptr_eq(&a, &b));
    }
}
