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
);";

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
