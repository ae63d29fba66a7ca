//! Each segment's run as the dashboard's timeline shows it: the worker and card that encoded
//! it, when it started and ended, which try it was, and its frames (the worker's frame check,
//! the segment's QC gate, passed, or there would be no row). Kept with the job, after it ends.
//!
//! Why apart from `job_segments`: those rows are a resumed run's progress and go when the
//! job ends; an operator asks "where was this upload slow?" mostly after it ended.

use rusqlite::params;
use tessera_engine::JobStage;
use tessera_farm::FarmError;

use super::Db;

/// The table, created with the others at open.
pub(super) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS segment_runs (
    job_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    worker TEXT NOT NULL,
    card INTEGER,
    attempt INTEGER NOT NULL,
    started_ms INTEGER NOT NULL,
    ended_ms INTEGER NOT NULL,
    media_s REAL NOT NULL,
    frames INTEGER NOT NULL,
    PRIMARY KEY (job_id, idx)
);
CREATE INDEX IF NOT EXISTS segment_runs_ended ON segment_runs(ended_ms);";

/// Forgets the runs of pruned jobs; run after the jobs are pruned.
pub(super) const PRUNE: &str = "DELETE FROM segment_runs WHERE job_id NOT IN (SELECT id FROM jobs)";

/// One segment's run.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentRun {
    /// The segment's index in the plan.
    pub segment: u32,
    /// The worker's id.
    pub worker: String,
    /// The GPU card that encoded it; `None`: software.
    pub card: Option<u32>,
    /// Which delivery of the task it was (1: its first; 0: not reported).
    pub attempt: u32,
    /// When it started, Unix milliseconds: when it ended less the seconds the worker
    /// reported (the dispatcher's clock only, so no skew between machines).
    pub started_ms: i64,
    /// When the dispatcher heard it was done, Unix milliseconds.
    pub ended_ms: i64,
    /// Seconds of it that were decode and encode (the rest: fetch, store, waits).
    pub media_s: f64,
    /// Frames encoded and checked.
    pub frames: u64,
}

/// What one worker did in a window, from its recorded segment runs (the workers page).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRuns {
    /// The worker's id.
    pub worker: String,
    /// Segments it finished.
    pub segments: u64,
    /// Of those, the ones that were not their task's first try.
    pub retried: u64,
    /// Seconds from start to end, summed.
    pub busy_s: f64,
    /// Seconds of decode and encode, summed.
    pub media_s: f64,
    /// The cards it encoded on (NVML indices), e.g. `0,1`; empty: software only.
    pub cards: String,
    /// When it last finished one, Unix milliseconds.
    pub last_ms: i64,
}

impl SegmentRun {
    /// The run a [`JobStage::SegmentDone`] reports, ended now; `None` for other stages.
    pub fn heard_now(stage: &JobStage) -> Option<SegmentRun> {
        let JobStage::SegmentDone {
            segment,
            frames,
            media_seconds,
            overhead_seconds,
            worker,
            attempt,
            card,
            ..
        } = stage
        else {
            return None;
        };
        let ended_ms = super::now_ms();
        let took_ms = ((media_seconds + overhead_seconds) * 1e3) as i64;
        Some(SegmentRun {
            segment: *segment,
            worker: worker.clone(),
            card: *card,
            attempt: *attempt,
            started_ms: ended_ms - took_ms,
            ended_ms,
            media_s: *media_seconds,
            frames: *frames,
        })
    }
}

impl Db {
    /// Records segment `run` of `job` (a later run of the same segment, after a restart or
    /// a retry, replaces it).
    pub fn record_segment_run(&self, job: &str, run: &SegmentRun) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute(
                "INSERT OR REPLACE INTO segment_runs (job_id, idx, worker, card, attempt,
                    started_ms, ended_ms, media_s, frames)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    job,
                    run.segment,
                    run.worker,
                    run.card,
                    run.attempt,
                    run.started_ms,
                    run.ended_ms,
                    run.media_s,
                    run.frames as i64
                ],
            )
            .map(drop)
        })
    }

    /// Each worker's runs that ended at or after `since_ms`, by worker id; only of jobs of
    /// tenant `owner` when given (a tenant sees what the fleet did for it).
    pub fn worker_runs(
        &self,
        since_ms: i64,
        owner: Option<&str>,
    ) -> Result<Vec<WorkerRuns>, FarmError> {
        self.with(|c| {
            // The fleet's view reads the runs alone; a tenant's looks up each run's job.
            let runs = match owner {
                None => "segment_runs r WHERE r.ended_ms >= ?1 AND ?2 IS NULL",
                Some(_) => {
                    "segment_runs r JOIN jobs j ON j.id = r.job_id
                     WHERE r.ended_ms >= ?1 AND j.owner = ?2"
                }
            };
            let mut stmt = c.prepare(&format!(
                "SELECT r.worker, COUNT(*), SUM(r.attempt > 1), SUM(r.ended_ms - r.started_ms),
                    SUM(r.media_s), COALESCE(GROUP_CONCAT(DISTINCT r.card), ''), MAX(r.ended_ms)
                 FROM {runs} GROUP BY r.worker ORDER BY r.worker"
            ))?;
            let rows = stmt.query_map(params![since_ms, owner], |r| {
                Ok(WorkerRuns {
                    worker: r.get(0)?,
                    segments: r.get::<_, i64>(1)? as u64,
                    retried: r.get::<_, i64>(2)? as u64,
                    busy_s: r.get::<_, i64>(3)? as f64 / 1e3,
                    media_s: r.get(4)?,
                    cards: r.get(5)?,
                    last_ms: r.get(6)?,
                })
            })?;
            rows.collect()
        })
    }

    /// The recorded runs of `job`'s segments, by segment.
    pub fn segment_runs(&self, job: &str) -> Result<Vec<SegmentRun>, FarmError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT idx, worker, card, attempt, started_ms, ended_ms, media_s, frames
                 FROM segment_runs WHERE job_id = ?1 ORDER BY idx",
            )?;
            let rows = stmt.query_map([job], |r| {
                Ok(SegmentRun {
                    segment: r.get(0)?,
                    worker: r.get(1)?,
                    card: r.get(2)?,
                    attempt: r.get(3)?,
                    started_ms: r.get(4)?,
                    ended_ms: r.get(5)?,
                    media_s: r.get(6)?,
                    frames: r.get::<_, i64>(7)? as u64,
                })
            })?;
            rows.collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(segment: u32, worker: &str, attempt: u32) -> SegmentRun {
        SegmentRun {
            segment,
            worker: worker.into(),
            card: (segment == 1).then_some(0),
            attempt,
            started_ms: 1_000 * i64::from(segment),
            ended_ms: 1_000 * i64::from(segment) + 800,
            media_s: 0.5,
            frames: 25,
        }
    }

    #[test]
    fn each_workers_runs_in_the_window_are_summed_and_a_tenant_sees_only_its_jobs() {
        let db = Db::open(std::path::Path::new(":memory:")).unwrap();
        let body = serde_json::json!({});
        db.insert("a1", "acme", None, &body).unwrap();
        db.insert("b1", "beta", None, &body).unwrap();
        db.record_segment_run("a1", &run(0, "w0", 1)).unwrap(); // 0-800 ms, too early
        db.record_segment_run("a1", &run(1, "w0", 2)).unwrap(); // card 0, a retry
        db.record_segment_run("a1", &run(2, "w1", 1)).unwrap();
        db.record_segment_run("b1", &run(3, "w1", 1)).unwrap();
        let all = db.worker_runs(1_000, None).unwrap();
        let names: Vec<_> = all.iter().map(|w| w.worker.as_str()).collect();
        assert_eq!(names, ["w0", "w1"]);
        let w0 = &all[0];
        assert_eq!((w0.segments, w0.retried, w0.cards.as_str()), (1, 1, "0"));
        assert_eq!((w0.busy_s, w0.media_s, w0.last_ms), (0.8, 0.5, 1_800));
        assert_eq!((all[1].segments, all[1].cards.as_str()), (2, ""));
        let acme = db.worker_runs(1_000, Some("acme")).unwrap();
        assert_eq!(acme.iter().map(|w| w.segments).sum::<u64>(), 2);
        assert!(db.worker_runs(1_000, Some("nobody")).unwrap().is_empty());
    }

    #[test]
    fn runs_are_kept_after_the_job_ends_replaced_by_a_later_try_and_pruned_with_it() {
        let db = Db::open(std::path::Path::new(":memory:")).unwrap();
        let body = serde_json::json!({});
        db.insert("j1", "default", None, &body).unwrap();
        db.record_segment_run("j1", &run(1, "w1", 1)).unwrap();
        db.record_segment_run("j1", &run(0, "w0", 1)).unwrap();
        db.record_segment_run("j2", &run(0, "w0", 1)).unwrap();
        // The same segment again (a resumed run): the later run stands.
        db.record_segment_run("j1", &run(1, "w2", 3)).unwrap();
        assert_eq!(
            db.segment_runs("j1").unwrap(),
            [run(0, "w0", 1), run(1, "w2", 3)]
        );
        // Ended: the progress goes, the runs stay.
        db.set_state("j1", crate::db::JobState::Done).unwrap();
        db.forget_progress("j1").unwrap();
        assert_eq!(db.segment_runs("j1").unwrap().len(), 2);
        // Pruned with their job; j2 has no job row, so its runs go too.
        assert_eq!(db.prune(i64::MAX).unwrap(), 1);
        assert!(db.segment_runs("j1").unwrap().is_empty());
        assert!(db.segment_runs("j2").unwrap().is_empty());
    }
}
