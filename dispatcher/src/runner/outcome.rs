//! A job's outcome, written to the database once it ended: done with its report, cancelled,
//! or failed with its code, retried until it is stored. Why apart: the runner's run reads as
//! the job's life; how its end is made durable is a step of its own.

use tessera_farm::FarmError;
use tessera_model::error_code::ErrorCode;

use super::Runner;
use crate::db::JobState;
use tessera_engine::JobReport;

impl Runner {
    /// Writes the job's final state, retrying (1 s doubling to 30 s) until it is stored.
    pub(super) async fn record_outcome(
        &self,
        id: &str,
        result: Result<JobReport, FarmError>,
        cancelled: bool,
    ) {
        self.scaling.ended(id);
        let mut counted = false;
        let mut backoff = tessera_farm::backoff::Backoff::new(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(30),
        );
        loop {
            let written = match &result {
                Ok(report) => {
                    if !counted {
                        self.metrics.job_done(report);
                    }
                    serde_json::to_value(report)
                        .map_err(|e| FarmError::BadMessage(e.to_string()))
                        .and_then(|report| self.db.finish(id, &report))
                }
                Err(e) if cancelled => {
                    if !counted {
                        self.metrics.job_cancelled();
                    }
                    let code = ErrorCode::Cancelled;
                    self.db
                        .fail(id, JobState::Cancelled, code.as_str(), &e.to_string())
                }
                Err(e) => {
                    let code = e.code();
                    if !counted {
                        tracing::warn!(job = %id, %code, error = %e, "job failed");
                        self.metrics.job_failed(code.as_str());
                    }
                    self.db
                        .fail(id, JobState::Failed, code.as_str(), &e.to_string())
                }
            };
            counted = true;
            match written {
                Ok(()) => return,
                Err(e) => {
                    let retry_in = backoff.next_delay();
                    tracing::error!(job = %id, error = %e, ?retry_in, "job outcome not recorded; retrying");
                    tokio::time::sleep(retry_in).await;
                }
            }
        }
    }
}
