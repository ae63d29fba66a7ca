//! `tessera_jobs_idle_seconds{state}`: for each unfinished state, how long its least recently
//! changed job has gone without a change of state or of segment progress.
//!
//! Why: a job stuck in one state (a stitch that hangs, a delivery waiting on a store, tasks
//! lost before their deadline catches them) shows in `tessera_jobs{state}` only as a count
//! that does not move, and a busy farm's counts never move either; the age of the oldest
//! unchanged job is what an alert can put a limit on (deploy/prometheus/tessera-rules.yaml).
//! Read from the database at each scrape, like the counts: every dispatcher sharing it tells
//! the same, and the figure survives restarts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::db::{Db, JobState};

/// The states a job can stay in while it is not finished, in lifecycle order.
const UNFINISHED: [JobState; 5] = [
    JobState::Queued,
    JobState::Splitting,
    JobState::Encoding,
    JobState::Stitching,
    JobState::Delivering,
];

/// For each unfinished state, the seconds from its least recently updated job's last update
/// to `now` (Unix seconds); 0 for a state no job is in, so every series always exists.
pub fn jobs_idle(db: &Db, now: i64) -> Result<Vec<(JobState, u64)>, tessera_farm::FarmError> {
    let oldest: BTreeMap<String, i64> = db.with(|c| {
        let mut stmt = c.prepare(
            "SELECT state, MIN(updated_at) FROM jobs
             WHERE state NOT IN ('done', 'failed', 'cancelled') GROUP BY state",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        rows.collect()
    })?;
    Ok(UNFINISHED
        .iter()
        .map(|s| {
            let since = oldest.get(s.as_str()).copied();
            (*s, since.map_or(0, |t| (now - t).max(0) as u64))
        })
        .collect())
}

/// The current Unix time in seconds, as the database writes `updated_at`.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Appends the family's text.
pub(super) fn render(out: &mut String, idle: &[(JobState, u64)]) {
    let name = "tessera_jobs_idle_seconds";
    let help = "Seconds the least recently changed unfinished job in each state has gone \
                without a change of state or segment progress (0: no job in the state).";
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for (state, seconds) in idle {
        let _ = writeln!(out, "{name}{{state=\"{}\"}} {seconds}", state.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_oldest_unchanged_job_of_each_unfinished_state_gives_its_age() {
        let db = Db::open(Path::new(":memory:")).unwrap();
        let request = serde_json::json!({});
        for id in ["a", "b", "c", "d"] {
            db.insert(id, "t", None, &request).unwrap();
        }
        db.set_state("b", JobState::Encoding).unwrap();
        db.set_state("c", JobState::Encoding).unwrap();
        db.fail("d", JobState::Failed, "input_invalid", "bad")
            .unwrap();
        let age = |id: &str, t: i64| {
            db.with(|c| c.execute("UPDATE jobs SET updated_at = ?2 WHERE id = ?1", (id, t)))
                .unwrap();
        };
        age("a", 1_000);
        age("b", 1_500);
        age("c", 1_900);
        age("d", 10); // finished: never idle, however old
        let idle = jobs_idle(&db, 2_000).unwrap();
        let get = |s: JobState| idle.iter().find(|(st, _)| *st == s).unwrap().1;
        assert_eq!(idle.len(), 5);
        assert_eq!(get(JobState::Queued), 1_000);
        assert_eq!(get(JobState::Encoding), 500, "the older of the two");
        assert_eq!(get(JobState::Stitching), 0);
        let mut text = String::new();
        render(&mut text, &idle);
        assert!(text.contains("tessera_jobs_idle_seconds{state=\"encoding\"} 500\n"));
        assert!(text.contains("# TYPE tessera_jobs_idle_seconds gauge\n"));
    }
}
