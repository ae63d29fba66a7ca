//! Executing one stitch task: fetch the output's encoded segments and the audio, concatenate
//! them in a child (stream copy), check the frame count, store the result in the work area.
//!
//! Why on workers: a stitch reads and writes a whole output; run on the workers it scales
//! with them and keeps the dispatcher a thin coordinator.
//!
//! Its delivery is acked when it begins and the dispatcher hears it by heartbeats (taken.rs):
//! a long stitch outlasts the broker's consumer timeout.

mod taken;

use std::path::Path;

use tessera_farm::queue::Delivery;
use tessera_farm::sandbox::{ChildStats, MediaOp};
use tessera_farm::FarmError;
use tessera_model::stitch::{StitchRequest, StitchResult};
use tessera_model::wire::{decode_message, StitchTask, TaskRef};

use crate::segment::{Done, SegmentRunner};

/// Segment downloads in flight per stitch.
const FETCHES_IN_FLIGHT: usize = 4;

/// Where this attempt stores `task`'s output: tagged with a fresh random id, or at its
/// `result_key` for a dispatcher that reads nothing else (`StitchTask::attempt_keys`).
pub(crate) fn attempt_key(task: &StitchTask) -> String {
    if !task.attempt_keys {
        return task.result_key.clone();
    }
    let tag = uuid::Uuid::new_v4().simple().to_string();
    tessera_model::wire::keys::attempt(&task.result_key, &tag)
}

impl SegmentRunner {
    /// Handles one stitch delivery to the end: acked when it begins (see taken.rs), then
    /// reported done or failed, requeued as a copy, or republished by the dispatcher when its
    /// heartbeats stop; never lost.
    pub async fn handle_stitch(&self, delivery: Delivery) {
        let task: StitchTask = match decode_message(&delivery.body).map_err(FarmError::from) {
            Ok(t) => t,
            Err(e) => {
                crate::segment::refuse_unreadable(&delivery, "stitch", &e).await;
                return;
            }
        };
        let job = task.job_id.clone();
        let staging = self.config.staging_dir.join(format!(
            "{}-out{:02}-{}",
            task.job_id,
            task.output,
            uuid::Uuid::new_v4().simple()
        ));
        let origin = self
            .config
            .stitch_queue
            .clone()
            .unwrap_or_else(|| tessera_model::wire::QUEUE_STITCH.to_string());
        let ticket = crate::segment::Ticket {
            job: &job,
            plan: task.plan,
            task: TaskRef::Stitch(task.output),
        };
        if !task.heartbeats {
            // A dispatcher that cannot read `running` events: held to the end, as before.
            let work = self.stitch(&task, &staging);
            self.run_task(ticket, &origin, delivery, &staging, work)
                .await;
            return;
        }
        let Some(delivery) = self.take(delivery, &origin).await else {
            return;
        };
        let work = async {
            tokio::select! {
                done = self.stitch(&task, &staging) => done,
                never = self.heartbeats(ticket) => match never {},
            }
        };
        self.run_task(ticket, &origin, delivery, &staging, work)
            .await;
    }

    async fn stitch(&self, task: &StitchTask, staging: &Path) -> Result<Done, FarmError> {
        self.check_free_space()?;
        let seg_dir = staging.join("segments");
        tokio::fs::create_dir_all(&seg_dir)
            .await
            .map_err(|e| FarmError::io(&seg_dir, e))?;
        let segments: Vec<_> = task
            .segment_keys
            .iter()
            .enumerate()
            .map(|(i, key)| (key.clone(), seg_dir.join(format!("{i:06}.nut"))))
            .collect();
        for batch in segments.chunks(FETCHES_IN_FLIGHT) {
            let mut fetches = Vec::with_capacity(batch.len());
            for (key, path) in batch {
                fetches.push(self.store.get_file(key, path));
            }
            futures_util::future::try_join_all(fetches).await?;
        }
        let audio = match &task.audio_key {
            Some(key) => {
                let path = staging.join("audio.nut");
                self.store.get_file(key, &path).await?;
                Some(path)
            }
            None => None,
        };
        let ext = Path::new(&task.result_key)
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("out");
        let output = staging.join(format!("output.{ext}"));
        let paths = segments.into_iter().map(|(_, p)| p).collect();
        let (stitched, stats, media_seconds) =
            self.stitch_files(task, paths, audio, &output).await?;
        // A key of this attempt's own: a copy of the task never replaces what another
        // checked and reported (keys::attempt).
        let key = attempt_key(task);
        let stored = self.store.put_file_tagged(&key, &output).await?;
        // As for segments: an end marker seen after the upload means this object may have
        // missed the work area's emptying, so it is removed here.
        if self.job_ended(&task.job_id).await {
            let _ = self.store.delete(&key).await;
            return Err(FarmError::Cancelled {
                job: task.job_id.clone(),
            });
        }
        Ok(Done {
            frames: stitched.frames,
            bytes: stored.size,
            media_seconds,
            peak_rss_bytes: stats.peak_rss_bytes,
            decode_errors: 0,
            check_seconds: stitched.check.as_ref().map_or(0.0, |c| c.seconds),
            etags: vec![stored.etag],
            keys: vec![Some(key)],
            card: None,
            coding: None,
            targets: Vec::new(),
        })
    }

    /// Stitches the local `segments` (and `audio`) of `task` into `output` in a child, runs
    /// the QC gate and checks the frame count; returns the result, the child's figures and
    /// the seconds it took. Why apart: a whole-input task (whole.rs) stitches the files it
    /// encoded itself, with no download.
    pub(crate) async fn stitch_files(
        &self,
        task: &StitchTask,
        segments: Vec<std::path::PathBuf>,
        audio: Option<std::path::PathBuf>,
        output: &Path,
    ) -> Result<(StitchResult, ChildStats, f64), FarmError> {
        let request = StitchRequest {
            segments,
            video_bias: task.video_bias,
            video_time_base: task.video_time_base,
            audio,
            audio_tracks: task.audio_tracks.clone(),
            start_seconds: task.start_seconds,
            display_matrix: task.display_matrix.clone(),
            frame_rate: task.frame_rate,
            container: task.container,
            output: output.to_path_buf(),
            chapters: task.chapters.clone(),
            title: task.title.clone(),
            subtitles: task.subtitles.clone(),
            expect: task.expect.clone(),
        };
        let started = std::time::Instant::now();
        let limits = stitch_limits(self.config.limits, task.expected_frames);
        let (stitched, stats): (StitchResult, _) = self
            .job_op(&task.job_id, &MediaOp::Stitch(request), limits)
            .await?;
        let media_seconds = started.elapsed().as_secs_f64();
        if let Some(check) = &stitched.check {
            tracing::info!(
                job = %task.job_id,
                output = task.output,
                frames = check.frames,
                decoded = check.decoded_frames,
                parts = check.video_parts,
                "QC gate passed"
            );
        }
        if stitched.frames != task.expected_frames {
            return Err(FarmError::frame_count_mismatch(
                task.output,
                stitched.frames,
                task.expected_frames,
            ));
        }
        Ok((stitched, stats, media_seconds))
    }
}

/// The slowest rate (frames per second) a stitch is allowed: stream copy plus the QC gate's
/// decode of the whole output.
const STITCH_FLOOR_FPS: u64 = 50;

/// A stitch's limits: the segment limits, with time for the output's length. Why: the
/// worker's timeout is sized for one segment, while a stitch copies and decodes a whole
/// output; a three-hour output would otherwise be killed as hung and retried forever.
fn stitch_limits(
    mut limits: tessera_farm::sandbox::Limits,
    frames: u64,
) -> tessera_farm::sandbox::Limits {
    let needed = std::time::Duration::from_secs(60 + frames / STITCH_FLOOR_FPS);
    limits.timeout = limits.timeout.max(needed);
    limits
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tessera_model::wire::keys;

    #[test]
    fn a_stitch_gets_time_for_its_whole_output() {
        let base = tessera_farm::sandbox::Limits {
            timeout: Duration::from_secs(1200),
            ..Default::default()
        };
        // A short output keeps the segment timeout.
        assert_eq!(stitch_limits(base, 3000).timeout, base.timeout);
        // Three hours at 30 fps: 324,000 frames need more than 20 minutes at 50 fps.
        let long = stitch_limits(base, 324_000).timeout;
        assert_eq!(long, Duration::from_secs(60 + 324_000 / 50));
        assert_eq!(stitch_limits(base, 324_000).memory_bytes, base.memory_bytes);
    }

    /// A stitch task as an older dispatcher writes it: no `attempt_keys`.
    fn older_task() -> StitchTask {
        serde_json::from_value(serde_json::json!({
            "v": 1, "job_id": "j", "plan": 1, "output": 0, "segment_keys": [],
            "audio_key": null, "audio_tracks": [], "video_bias": 0,
            "video_time_base": {"num": 1, "den": 25}, "start_seconds": 0.0,
            "frame_rate": {"num": 25, "den": 1}, "container": "mkv",
            "result_key": keys::output("j", 1, 0, "mkv"), "expected_frames": 1
        }))
        .expect("an older dispatcher's stitch task")
    }

    #[test]
    fn each_attempt_has_its_own_key_unless_the_dispatcher_reads_only_result_key() {
        let mut task = older_task();
        assert!(!task.attempt_keys);
        assert_eq!(attempt_key(&task), task.result_key);
        task.attempt_keys = true;
        let (a, b) = (attempt_key(&task), attempt_key(&task));
        assert_ne!(a, b);
        for key in [a, b] {
            assert!(key != task.result_key && keys::is_attempt_of(&key, &task.result_key));
        }
    }
}
