//! What a caller may do to a job besides creating it: cancel it, or run a failed or cancelled
//! one again.
//!
//! Why apart from the handlers: the API (`DELETE /v1/jobs/{id}`) and the dashboard's forms
//! (ui/) take the same decisions; each answers them in its own shape (JSON or a page). The
//! dashboard reaches them through its `Control` trait, implemented here over `AppState`.

use std::sync::Arc;

use axum::extract::FromRef;

use tessera_model::error_code::ErrorCode;

use crate::api::AppState;
use crate::auth::Principal;
use crate::db::{Admitted, JobState};
use crate::error::Refusal;
use crate::jobview::visible;
use crate::ui::{Control, UiState};

/// Cancels job `id` for `who`: its state moves first (a job that reached delivery keeps
/// going, its outputs arrive whole, and the cancel is refused), then its run is stopped.
pub fn cancel(state: &AppState, who: &Principal, id: &str) -> Result<(), Refusal> {
    let row = match state.db.get(id).map(|r| visible(r, who)) {
        Ok(Some(r)) => r,
        Ok(None) => return Err((ErrorCode::NotFound, format!("no job {id}"))),
        Err(e) => return Err((ErrorCode::DbUnavailable, e.to_string())),
    };
    if row.state.is_final() {
        let why = format!("job {id} is already {}", row.state.as_str());
        return Err((ErrorCode::JobFinished, why));
    }
    match state.db.cancel(id, "cancelled by request") {
        Ok(true) => {}
        Ok(false) => {
            let now = state.db.get(id).ok().flatten().map(|r| r.state);
            let why = match now {
                Some(JobState::Delivering) => {
                    format!("job {id} is delivering its outputs and can no longer be cancelled")
                }
                Some(s) => format!("job {id} is already {}", s.as_str()),
                None => format!("job {id} has ended"),
            };
            return Err((ErrorCode::JobFinished, why));
        }
        Err(e) => return Err((ErrorCode::DbUnavailable, e.to_string())),
    }
    if let Some(token) = state
        .running
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(id)
    {
        token.cancel();
    }
    Ok(())
}

/// Runs a failed or cancelled job `id` again as a new job of the same tenant with the same
/// stored request, within the tenant's quota; returns the new job's id. Why a new job: an
/// ended job's record (its error, its webhook) stays as it was, and the request was checked
/// against the tenant's scopes when it was first accepted.
pub fn retry(state: &Arc<AppState>, who: &Principal, id: &str) -> Result<String, Refusal> {
    let row = match state.db.get(id).map(|r| visible(r, who)) {
        Ok(Some(r)) => r,
        Ok(None) => return Err((ErrorCode::NotFound, format!("no job {id}"))),
        Err(e) => return Err((ErrorCode::DbUnavailable, e.to_string())),
    };
    if !matches!(row.state, JobState::Failed | JobState::Cancelled) {
        let why = format!(
            "job {id} is {}: only a failed or cancelled job is run again",
            row.state.as_str()
        );
        return Err((ErrorCode::BadRequest, why));
    }
    let plan: crate::job_plan::JobPlan =
        serde_json::from_value(row.request.clone()).map_err(|e| {
            (
                ErrorCode::BadRequest,
                format!("stored request unreadable: {e}"),
            )
        })?;
    let new = uuid::Uuid::new_v4().simple().to_string();
    let quota = state.max_jobs_per_tenant;
    match state
        .db
        .insert_within_quota(&new, &row.owner, None, &row.request, quota)
    {
        Ok(Admitted::Created(new)) => {
            state.spawn(new.clone(), plan);
            tracing::info!(job = %new, retry_of = %id, "job run again");
            Ok(new)
        }
        Ok(Admitted::Existing(_)) => Err((ErrorCode::Internal, "job id collision".into())),
        Ok(Admitted::OverQuota(n)) => Err((
            ErrorCode::TooManyJobs,
            format!(
                "tenant {} has {n} unfinished jobs, the most this farm allows",
                row.owner
            ),
        )),
        Err(e) => Err((ErrorCode::DbUnavailable, e.to_string())),
    }
}

/// The API's actions over its state, for the dashboard's forms.
struct ApiControl(Arc<AppState>);

impl Control for ApiControl {
    fn cancel(&self, who: &Principal, id: &str) -> Result<(), Refusal> {
        cancel(&self.0, who, id)
    }

    fn retry(&self, who: &Principal, id: &str) -> Result<String, Refusal> {
        retry(&self.0, who, id)
    }
}

impl FromRef<Arc<AppState>> for UiState {
    fn from_ref(state: &Arc<AppState>) -> Self {
        UiState {
            db: state.db.clone(),
            queue: state.runner.queue.clone(),
            gate: state.runner.gate.clone(),
            control: Arc::new(ApiControl(state.clone())),
            fleet: state.fleet.clone(),
            scaling: state.runner.scaling.clone(),
        }
    }
}
