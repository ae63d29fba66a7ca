//! Executing one whole-input task: fetch the input, cut its one chunk, encode it, transcode
//! its audio, stitch and check every output, store them in the work area.
//!
//! Why the same media operations as the split path (split, encode, audio, stitch with its QC
//! gate), only in one staging directory: the output is the one the dispatcher and two tasks
//! would have made from the same plan, frame for frame, without the chunk, the encoded
//! segments and the audio going through the store in between (model's wire/whole.rs).
//! A whole input is short, so its delivery is held to the end like a segment's.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tessera_farm::queue::Delivery;
use tessera_farm::sandbox::MediaOp;
use tessera_farm::FarmError;
use tessera_model::audio::{AudioRequest, AudioResult, AudioTrackResult};
use tessera_model::encode::EncodeResult;
use tessera_model::probe::{chunk_file_name, ChunkInfo};
use tessera_model::wire::{decode_message, TaskRef, WholeSplit, WholeTask, QUEUE_WHOLE_CPU};

use crate::segment::{Done, SegmentRunner, Ticket};

impl SegmentRunner {
    /// Handles one whole-input delivery to the end: acked after its done event, retried or
    /// failed by its error's class; an unreadable or inconsistent task is dead-lettered.
    pub async fn handle_whole(&self, delivery: Delivery) {
        let task = decode_message::<WholeTask>(&delivery.body)
            .map_err(FarmError::from)
            .and_then(|t| t.check().map(|()| t).map_err(FarmError::BadMessage));
        let task = match task {
            Ok(t) => t,
            Err(e) => {
                crate::segment::refuse_unreadable(&delivery, "whole-input", &e).await;
                return;
            }
        };
        let staging = self.config.staging_dir.join(format!(
            "{}-whole-{}",
            task.job_id,
            uuid::Uuid::new_v4().simple()
        ));
        let origin = (self.config.whole_queue.clone()).unwrap_or_else(|| QUEUE_WHOLE_CPU.into());
        let ticket = Ticket {
            job: &task.job_id,
            plan: task.plan,
            task: TaskRef::Whole,
        };
        let work = self.whole(&task, &staging);
        self.run_task(ticket, &origin, delivery, &staging, work)
            .await;
    }

    async fn whole(&self, task: &WholeTask, staging: &Path) -> Result<Done, FarmError> {
        let started = Instant::now();
        self.check_free_space()?;
        let caps = self.sandbox.capabilities().await?;
        crate::fitness::check_encoders(&task.encode_task, true, &caps)?;
        tokio::fs::create_dir_all(staging)
            .await
            .map_err(|e| FarmError::io(staging, e))?;
        let ext = Path::new(&task.source_key)
            .extension()
            .and_then(|e| e.to_str())
            .map_or(String::new(), |e| format!(".{e}"));
        let source = staging.join(format!("input{ext}"));
        self.store.get_file(&task.source_key, &source).await?;
        let chunk = self
            .cut(&task.job_id, &task.split, &source, staging)
            .await?;
        let seg = &task.encode_task;
        let request = self.encode_request(seg, staging, chunk, None);
        let outputs = request.outputs.clone();
        let (result, mut peak) = self.encode(seg, None, &MediaOp::Encode(request)).await?;
        crate::qc::check_segment(seg.segment, &seg.encode, &result)?;
        let (audio, audio_rss) = self.audio(task, &source, staging).await?;
        peak.peak_rss_bytes = peak.peak_rss_bytes.max(audio_rss);
        let files: Vec<PathBuf> = outputs.into_iter().map(|o| o.path).collect();
        let (bytes, stitched) = self.stitch_all(task, &result, &files, audio).await?;
        if self.job_ended(&task.job_id).await {
            for key in stitched.keys.iter().flatten() {
                let _ = self.store.delete(key).await;
            }
            return Err(FarmError::Cancelled {
                job: task.job_id.clone(),
            });
        }
        tracing::debug!(job = %task.job_id, ms = started.elapsed().as_millis() as u64,
            media_s = result.media_seconds, "whole input phases");
        Ok(Done {
            frames: result.frames_in_range,
            bytes,
            media_seconds: result.media_seconds + stitched.media_seconds,
            peak_rss_bytes: peak.peak_rss_bytes.max(stitched.peak_rss_bytes),
            decode_errors: result.decode_errors,
            check_seconds: stitched.check_seconds,
            etags: stitched.etags,
            keys: stitched.keys,
            card: None,
            coding: None,
            targets: Vec::new(),
        })
    }

    /// Cuts the one chunk of `split` from `source`, as the dispatcher's split would (a whole
    /// input's, or a cut task's segment); its path.
    pub(crate) async fn cut(
        &self,
        job: &str,
        split: &WholeSplit,
        source: &Path,
        staging: &Path,
    ) -> Result<PathBuf, FarmError> {
        let dir = staging.join("chunks");
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| FarmError::io(&dir, e))?;
        let op = MediaOp::Split {
            input: source.to_path_buf(),
            segments: vec![split.segment.clone()],
            bias: split.bias,
            dts_rule: split.dts_rule,
            derived_pts: split.derived_pts.clone(),
            dir: dir.clone(),
        };
        let (chunks, _): (Vec<ChunkInfo>, _) = self.job_op(job, &op, self.config.limits).await?;
        let index = split.segment.index;
        match chunks.into_iter().find(|c| c.index == index) {
            Some(chunk) => Ok(chunk.path),
            None => Ok(dir.join(chunk_file_name(index))),
        }
    }

    /// Transcodes the audio when the task has some: the file and its tracks, and the
    /// child's peak RSS.
    async fn audio(
        &self,
        task: &WholeTask,
        source: &Path,
        staging: &Path,
    ) -> Result<(Option<(PathBuf, Vec<AudioTrackResult>)>, u64), FarmError> {
        let Some(audio) = task.audio.as_ref().filter(|a| !a.tracks.is_empty()) else {
            return Ok((None, 0));
        };
        let output = staging.join("audio.nut");
        let request = AudioRequest {
            input: source.to_path_buf(),
            tracks: audio.tracks.clone(),
            bias_seconds: audio.bias_seconds,
            copy_tracks: audio.copy_tracks.clone(),
            bitrate_per_channel: audio.bitrate_per_channel,
            output: output.clone(),
            stereo_downmix: audio.stereo_downmix,
            run_shifts_seconds: audio.run_shifts_seconds.clone(),
        };
        let op = MediaOp::Audio(request);
        let (result, stats): (AudioResult, _) =
            self.job_op(&task.job_id, &op, self.config.limits).await?;
        Ok((Some((output, result.tracks)), stats.peak_rss_bytes))
    }

    /// Stitches and checks each output from the encode's rendition `files` (in the order of
    /// the encode's renditions) and the audio, and stores it; the bytes stored and what the
    /// stitches cost.
    async fn stitch_all(
        &self,
        task: &WholeTask,
        encoded: &EncodeResult,
        files: &[PathBuf],
        audio: Option<(PathBuf, Vec<AudioTrackResult>)>,
    ) -> Result<(u64, Stitched), FarmError> {
        let renditions = &task.encode_task.renditions;
        let (audio_file, tracks) = audio.unzip();
        let mut cost = Stitched::default();
        let mut bytes = 0;
        for stitch in &task.stitch_tasks {
            let mut stitch = stitch.clone();
            // What the dispatcher fills in from the segments' events and the audio step.
            stitch.expected_frames = encoded.frames_in_range;
            stitch.audio_tracks = tracks.clone().unwrap_or_default();
            let file = renditions
                .iter()
                .position(|(_, key)| stitch.segment_keys.first() == Some(key))
                .and_then(|i| files.get(i))
                .ok_or_else(|| FarmError::BadMessage("a stitch names no rendition".into()))?;
            let ext = Path::new(&stitch.result_key)
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("out");
            let output = file.with_file_name(format!("output-{:02}.{ext}", stitch.output));
            let (result, stats, seconds) = self
                .stitch_files(&stitch, vec![file.clone()], audio_file.clone(), &output)
                .await?;
            let key = crate::stitch::attempt_key(&stitch);
            let stored = self.store.put_file_tagged(&key, &output).await?;
            bytes += stored.size;
            let at = stitch.output as usize;
            if cost.etags.len() <= at {
                cost.etags.resize(at + 1, None);
                cost.keys.resize(at + 1, None);
            }
            cost.etags[at] = stored.etag;
            cost.keys[at] = Some(key);
            cost.media_seconds += seconds;
            cost.check_seconds += result.check.as_ref().map_or(0.0, |c| c.seconds);
            cost.peak_rss_bytes = cost.peak_rss_bytes.max(stats.peak_rss_bytes);
        }
        Ok((bytes, cost))
    }
}

/// What a whole task's stitches cost.
#[derive(Debug, Default)]
struct Stitched {
    media_seconds: f64,
    check_seconds: f64,
    peak_rss_bytes: u64,
    /// Each stored output's ETag, by output index.
    etags: Vec<Option<String>>,
    /// Each stored output's key (this attempt's own), by output index.
    keys: Vec<Option<String>>,
}
