//! What a job's run has done so far, kept so a restarted dispatcher resumes it without
//! republishing its segments or waiting again for the ones already done.

use rusqlite::{params, OptionalExtension};
use tessera_engine::{DoneSegment, Resume};
use tessera_model::encode::TargetResult;

use crate::db::Db;
use tessera_farm::FarmError;

/// What recording a finished segment found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedSegment {
    /// The segment was not recorded before (count it in the metrics).
    pub new: bool,
    /// Segments of the run recorded now, this one included.
    pub done: u32,
}

impl Db {
    /// Records the plan of a run; a new plan (fingerprint) forgets the old run's progress.
    pub fn record_plan(&self, job: &str, fingerprint: u64) -> Result<(), FarmError> {
        let fp = fingerprint as i64;
        self.with(|c| {
            let old: Option<i64> = c
                .query_row("SELECT plan_fingerprint FROM job_progress WHERE job_id = ?1", [job], |r| r.get(0))
                .optional()?;
            if old != Some(fp) {
                c.execute("DELETE FROM job_segments WHERE job_id = ?1", [job])?;
                c.execute(
                    "INSERT OR REPLACE INTO job_progress (job_id, plan_fingerprint, published) VALUES (?1, ?2, 0)",
                    params![job, fp],
                )?;
            }
            Ok(())
        })
    }

    /// Records that every segment task of the job's run is on the queue.
    pub fn record_published(&self, job: &str) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute(
                "UPDATE job_progress SET published = 1 WHERE job_id = ?1",
                [job],
            )
            .map(|_| ())
        })
    }

    /// Records a finished segment; says whether it is new and how many the run has now.
    ///
    /// Why both: the caller retries a stage until every write of it stands, so the same
    /// segment may be recorded twice; counting from the records (not by adding one per call)
    /// keeps `segments_done` at most the total and the metrics counted once.
    /// `targets`: the target-quality searches the segment reported (kept as JSON; none
    /// without a target).
    pub fn record_segment(
        &self,
        job: &str,
        (segment, frames): (u32, u64),
        targets: &[Option<TargetResult>],
    ) -> Result<RecordedSegment, FarmError> {
        let targets =
            (!targets.is_empty()).then(|| serde_json::to_string(targets).unwrap_or_default());
        self.with(|c| {
            let known: bool = c.query_row(
                "SELECT EXISTS (SELECT 1 FROM job_segments WHERE job_id = ?1 AND idx = ?2)",
                params![job, segment],
                |r| r.get(0),
            )?;
            c.execute(
                "INSERT OR REPLACE INTO job_segments (job_id, idx, frames, targets)
                 VALUES (?1, ?2, ?3, ?4)",
                params![job, segment, frames as i64, targets],
            )?;
            let done: u32 = c.query_row(
                "SELECT COUNT(*) FROM job_segments WHERE job_id = ?1",
                [job],
                |r| r.get(0),
            )?;
            Ok(RecordedSegment { new: !known, done })
        })
    }

    /// Forgets a job's progress once its end is complete (marker written, work area gone).
    /// Why: a final job that still has progress rows is one whose end a restart must finish.
    pub fn forget_progress(&self, job: &str) -> Result<(), FarmError> {
        self.with(|c| {
            c.execute("DELETE FROM job_segments WHERE job_id = ?1", [job])?;
            c.execute("DELETE FROM job_progress WHERE job_id = ?1", [job])
                .map(|_| ())
        })
    }

    /// Final jobs whose end did not complete (the dispatcher stopped between recording the
    /// outcome and removing the work area): their end is run again at start.
    pub fn ended_uncleaned(&self) -> Result<Vec<String>, FarmError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT p.job_id FROM job_progress p JOIN jobs j ON j.id = p.job_id
                 WHERE j.state IN ('done', 'failed', 'cancelled') ORDER BY p.job_id",
            )?;
            let ids = stmt
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>();
            ids
        })
    }

    /// The progress of the job's earlier run, if it planned anything.
    pub fn resume_state(&self, job: &str) -> Result<Option<Resume>, FarmError> {
        self.with(|c| {
            let head: Option<(i64, bool)> = c
                .query_row(
                    "SELECT plan_fingerprint, published FROM job_progress WHERE job_id = ?1",
                    [job],
                    |r| Ok((r.get(0)?, r.get::<_, i64>(1)? != 0)),
                )
                .optional()?;
            let Some((fp, published)) = head else {
                return Ok(None);
            };
            let mut stmt = c.prepare(
                "SELECT idx, frames, targets FROM job_segments WHERE job_id = ?1 ORDER BY idx",
            )?;
            let rows = stmt
                .query_map([job], |r| {
                    let targets: Option<String> = r.get(2)?;
                    Ok((r.get::<_, u32>(0)?, r.get::<_, i64>(1)? as u64, targets))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            // A search that does not read back (a row from another version) is left out of
            // the report, not the job.
            let done = (rows.into_iter())
                .map(|(index, frames, t)| DoneSegment {
                    index,
                    frames,
                    targets: (t.as_deref())
                        .and_then(|t| serde_json::from_str(t).ok())
                        .unwrap_or_default(),
                })
                .collect();
            Ok(Some(Resume {
                plan_fingerprint: fp as u64,
                published,
                done,
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn progress_survives_and_a_new_plan_resets_it() {
        let db = Db::open(Path::new(":memory:")).unwrap();
        assert_eq!(db.resume_state("j").unwrap(), None);
        db.record_plan("j", 7).unwrap();
        let search = tessera_model::encode::TargetResult {
            target: 93.0,
            rate_factor: 27.5,
            vmaf: 93.4,
            probes: vec![tessera_model::target::Probe {
                rate_factor: 27.5,
                vmaf: 93.4,
            }],
        };
        db.record_segment("j", (0, 30), &[None, Some(search.clone())])
            .unwrap();
        db.record_segment("j", (2, 31), &[]).unwrap();
        db.record_published("j").unwrap();
        db.record_plan("j", 7).unwrap(); // same plan again: kept
        let r = db.resume_state("j").unwrap().unwrap();
        let done: Vec<(u32, u64)> = r.done.iter().map(|d| (d.index, d.frames)).collect();
        assert_eq!(
            (r.plan_fingerprint, r.published, done),
            (7, true, vec![(0, 30), (2, 31)])
        );
        // The search a segment reported comes back with it (for the resumed job's report).
        assert_eq!(r.done[0].targets, vec![None, Some(search)]);
        assert!(r.done[1].targets.is_empty());
        db.record_plan("j", 8).unwrap(); // another plan: forgotten
        let r = db.resume_state("j").unwrap().unwrap();
        assert_eq!(
            (r.plan_fingerprint, r.published, r.done.len()),
            (8, false, 0)
        );
    }

    #[test]
    fn a_segment_recorded_twice_counts_once() {
        // The class of L8: a stage retried after a later write failed records its segment
        // again; the count must not grow past the segments there are.
        let db = Db::open(Path::new(":memory:")).unwrap();
        db.record_plan("j", 7).unwrap();
        let first = db.record_segment("j", (3, 30), &[]).unwrap();
        assert_eq!(first, RecordedSegment { new: true, done: 1 });
        for _ in 0..3 {
            let again = db.record_segment("j", (3, 30), &[]).unwrap();
            assert_eq!(
                again,
                RecordedSegment {
                    new: false,
                    done: 1
                }
            );
        }
        assert_eq!(db.record_segment("j", (0, 30), &[]).unwrap().done, 2);
        db.record_plan("j", 8).unwrap(); // a new plan starts its count again
        assert_eq!(
            db.record_segment("j", (3, 30), &[]).unwrap(),
            RecordedSegment { new: true, done: 1 }
        );
    }

    #[test]
    fn a_final_job_with_progress_left_is_one_whose_end_did_not_complete() {
        use crate::db::JobState;
        let db = Db::open(Path::new(":memory:")).unwrap();
        for id in ["a", "b", "c"] {
            db.insert(id, "t", None, &serde_json::json!({})).unwrap();
            db.record_plan(id, 1).unwrap();
        }
        db.fail("a", JobState::Failed, "task_lost", "x").unwrap();
        db.finish("b", &serde_json::json!({})).unwrap();
        // "c" still runs: not ended. "a" and "b" ended, their end not yet complete.
        assert_eq!(db.ended_uncleaned().unwrap(), vec!["a", "b"]);
        db.forget_progress("a").unwrap();
        assert_eq!(db.ended_uncleaned().unwrap(), vec!["b"]);
        assert_eq!(db.resume_state("a").unwrap(), None);
    }
}
