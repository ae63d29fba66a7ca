//! The dashboard's reads of the job table: jobs by state, tenant and error code, paged, and
//! the error codes there are to filter by.
//!
//! Why beside the API's `list`: the dashboard filters by more than the API does (error code),
//! and asks one row past the page to know whether a next page exists without counting the
//! whole table on every view.

use rusqlite::params;
use tessera_farm::FarmError;

use super::{row, Db, JobRow, JobState, SELECT};

/// Which jobs a dashboard page lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only this tenant's jobs (always set for a tenant that is not an admin).
    pub owner: Option<String>,
    /// Only jobs that ended with this error code.
    pub error_code: Option<String>,
    /// Only jobs created at or after this (Unix seconds).
    pub since: Option<i64>,
}

impl Db {
    /// Jobs matching `filter`, newest first, `limit` from `offset`.
    pub fn list_filtered(
        &self,
        filter: &JobFilter,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<JobRow>, FarmError> {
        self.with(|c| {
            let mut stmt = c.prepare_cached(&format!(
                "{SELECT} WHERE (?1 IS NULL OR state = ?1) AND (?2 IS NULL OR owner = ?2)
                 AND (?3 IS NULL OR error_code = ?3) AND (?6 IS NULL OR created_at >= ?6)
                 ORDER BY created_at DESC, id LIMIT ?4 OFFSET ?5"
            ))?;
            let args = params![
                filter.state.map(|s| s.as_str()),
                filter.owner,
                filter.error_code,
                limit,
                offset,
                filter.since
            ];
            let rows = stmt.query_map(args, row)?;
            rows.collect()
        })
    }

    /// Which of `ids` are `owner`'s jobs, in one query. Why: the workers page names a
    /// tenant's own jobs among the fleet's tasks in hand, a few thousand ids at most.
    pub fn owned_among(
        &self,
        owner: &str,
        ids: &[String],
    ) -> Result<std::collections::HashSet<String>, FarmError> {
        let list = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
        self.with(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT id FROM jobs WHERE owner = ?1 AND id IN (SELECT value FROM json_each(?2))",
            )?;
            let rows = stmt.query_map(params![owner, list], |r| r.get::<_, String>(0))?;
            rows.collect()
        })
    }

    /// The error codes of `owner`'s jobs (every tenant's when None), for the filter's menu.
    pub fn error_codes(&self, owner: Option<&str>) -> Result<Vec<String>, FarmError> {
        self.with(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT DISTINCT error_code FROM jobs WHERE error_code IS NOT NULL
                 AND (?1 IS NULL OR owner = ?1) ORDER BY error_code",
            )?;
            let codes = stmt.query_map([owner], |r| r.get::<_, String>(0))?;
            codes.collect()
        })
    }
}

/// Jobs that ended in one hour: `hour` (Unix seconds / 3600), `state` (done or failed), the
/// failure's code, how many, and the seconds of video their outputs hold.
#[derive(Debug, Clone, PartialEq)]
pub struct HourCount {
    /// Unix hour (seconds / 3600) the jobs last changed in.
    pub hour: i64,
    /// `done` or `failed`.
    pub state: String,
    /// The error code of failed jobs.
    pub code: Option<String>,
    /// Jobs.
    pub jobs: u64,
    /// Seconds of video in their outputs (from their reports; 0 for failed jobs).
    pub video_s: f64,
}

impl Db {
    /// Jobs done or failed since `since` (Unix seconds), by hour, state and error code; of
    /// `owner` only when given. For the dashboard's throughput chart.
    pub fn ended_by_hour(
        &self,
        since: i64,
        owner: Option<&str>,
    ) -> Result<Vec<HourCount>, FarmError> {
        self.with(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT updated_at / 3600, state, error_code, COUNT(*),
                    SUM(COALESCE(json_extract(report, '$.video_s'), 0.0)) FROM jobs
                 WHERE state IN ('done', 'failed') AND updated_at >= ?1
                 AND (?2 IS NULL OR owner = ?2)
                 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
            )?;
            let rows = stmt.query_map(params![since, owner], |r| {
                Ok(HourCount {
                    hour: r.get(0)?,
                    state: r.get(1)?,
                    code: r.get(2)?,
                    jobs: r.get::<_, i64>(3)?.max(0) as u64,
                    video_s: r.get(4)?,
                })
            })?;
            rows.collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_combine_and_pages_follow_each_other() {
        let db = Db::open(std::path::Path::new(":memory:")).unwrap();
        for i in 0..6 {
            let owner = if i % 2 == 0 { "acme" } else { "beta" };
            db.insert(&format!("j{i}"), owner, None, &serde_json::json!({}))
                .unwrap();
        }
        db.fail("j0", JobState::Failed, "qc_failed", "bad").unwrap();
        db.fail("j2", JobState::Failed, "source_corrupt", "worse")
            .unwrap();
        db.fail("j3", JobState::Failed, "qc_failed", "bad").unwrap();
        let ids = |f: &JobFilter, limit, offset| -> Vec<String> {
            let rows = db.list_filtered(f, limit, offset).unwrap();
            rows.into_iter().map(|r| r.id).collect()
        };
        let acme = JobFilter {
            owner: Some("acme".into()),
            ..Default::default()
        };
        assert_eq!(ids(&acme, 10, 0).len(), 3);
        let failed_acme = JobFilter {
            state: Some(JobState::Failed),
            error_code: Some("qc_failed".into()),
            ..acme.clone()
        };
        assert_eq!(ids(&failed_acme, 10, 0), ["j0"]);
        let all = JobFilter::default();
        let (first, second) = (ids(&all, 4, 0), ids(&all, 4, 4));
        assert_eq!((first.len(), second.len()), (4, 2));
        assert!(first.iter().all(|id| !second.contains(id)));
        assert_eq!(
            db.error_codes(None).unwrap(),
            ["qc_failed", "source_corrupt"]
        );
        assert_eq!(db.error_codes(Some("beta")).unwrap(), ["qc_failed"]);
    }
}
