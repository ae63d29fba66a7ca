//! A job's work raced against its cancellation.
//!
//! Why a module of its own: every stage of `run_job` (prepare, collect, the finish step)
//! gives way to a cancel the same way, and none of them imports the orchestrator for it.

use std::future::Future;

use tessera_farm::FarmError;
use tokio_util::sync::CancellationToken;

/// `work`, or `Cancelled` as soon as `cancel` fires (dropping `work`).
pub(crate) async fn or_cancel<T>(
    cancel: &CancellationToken,
    job: &str,
    work: impl Future<Output = Result<T, FarmError>>,
) -> Result<T, FarmError> {
    tokio::select! {
        r = work => r,
        _ = cancel.cancelled() => Err(FarmError::Cancelled { job: job.to_string() }),
    }
}
