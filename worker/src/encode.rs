//! Encoding one segment task: fetch its chunk, encode it in a child, check the result, store
//! the renditions and stills.
//!
//! Why apart from segment.rs: settling a delivery (segment.rs `run_task`) is the same for
//! every task; this is a segment's own work, on the CPU (segment.rs `handle`) or on a card
//! (gpu_task.rs).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tessera_farm::sandbox::{ChildStats, MediaOp};
use tessera_farm::FarmError;
use tessera_model::encode::{
    EncodeRequest, EncodeResult, HardwareEncode, RenditionOutput, TargetResult,
};
use tessera_model::wire::{SegmentCut, SegmentTask};

use crate::segment::Done;
use crate::SegmentRunner;

impl SegmentRunner {
    /// Encodes a segment: in software, or on a card when `hardware` is given.
    pub(crate) async fn execute(
        &self,
        task: &SegmentTask,
        staging: &PathBuf,
        hardware: Option<HardwareEncode>,
    ) -> Result<Done, FarmError> {
        let t0 = Instant::now();
        self.check_free_space()?;
        let caps = self.sandbox.capabilities().await?;
        crate::fitness::check_encoders(task, hardware.is_none(), &caps)?;
        tokio::fs::create_dir_all(staging)
            .await
            .map_err(|e| FarmError::io(staging, e))?;
        let chunk = match &task.cut {
            Some(cut) => self.cut_from_source(&task.job_id, cut, staging).await?,
            None => {
                let chunk = staging.join("chunk.nut");
                self.store.get_file(&task.chunk_key, &chunk).await?;
                chunk
            }
        };
        let t_fetched = Instant::now();
        let card = hardware.as_ref().map(|h| h.device);
        let request = self.encode_request(task, staging, chunk, hardware);
        let outputs = request.outputs.clone();
        let op = MediaOp::Encode(request);
        let ((result, stats), t_encoded) = (self.encode(task, card, &op).await?, Instant::now());
        crate::qc::check_segment(task.segment, &task.encode, &result)?;
        if let Some(warning) = crate::qc::gpu_decode_warning(task.segment, &result) {
            let frames = result.gpu_decode.as_ref().map_or(0, |d| d.uploaded_frames);
            self.config.metrics.nvdec_fell_back(frames);
            tracing::warn!(job = %task.job_id, card = ?card, "{warning}");
        }
        let booked = card.and_then(|c| self.config.gpus.as_ref()?.pci_bus_id_of(c));
        if let Some(warning) = crate::qc::gpu_card_warning(task.segment, booked.as_deref(), &result)
        {
            tracing::warn!(job = %task.job_id, card = ?card, "{warning}");
        }
        let bytes = self.store_outputs(task, staging, &outputs).await?;
        self.discard_if_ended(task).await?;
        let (ms, media) = (|d: Duration| d.as_millis() as u64, result.media_seconds);
        tracing::debug!(job = %task.job_id, segment = task.segment, fetch_ms = ms(t_fetched - t0),
            child_ms = ms((t_encoded - t_fetched).saturating_sub(Duration::from_secs_f64(media))),
            media_ms = (media * 1e3) as u64, store_ms = ms(t_encoded.elapsed()), "segment phases");
        Ok(Done {
            frames: result.frames_in_range,
            bytes,
            media_seconds: result.media_seconds,
            peak_rss_bytes: stats.peak_rss_bytes,
            decode_errors: result.decode_errors,
            check_seconds: 0.0,
            etags: Vec::new(),
            keys: Vec::new(),
            card,
            coding: Some(crate::segment::Coding::of(&result)),
            targets: targets(&result),
        })
    }

    /// Cuts the segment's chunk from the job's source, fetched once per job into the
    /// source cache (wire/cut.rs); its path in `staging`.
    async fn cut_from_source(
        &self,
        job: &str,
        cut: &SegmentCut,
        staging: &Path,
    ) -> Result<PathBuf, FarmError> {
        let key = &cut.source_key;
        let source = (self.sources)
            .get(job, key, |path| async move {
                let bytes = self.store.get_file(key, &path).await?;
                tracing::info!(job, key, bytes, "source fetched for cutting");
                Ok(bytes)
            })
            .await?;
        let cut_chunk = self.cut(job, &cut.split, source.path(), staging).await?;
        // Where a fetched chunk would be: a worker's staging reads the same either way.
        let chunk = staging.join("chunk.nut");
        tokio::fs::rename(&cut_chunk, &chunk)
            .await
            .map_err(|e| FarmError::io(&chunk, e))?;
        Ok(chunk)
    }

    /// The child's request: the fetched `chunk`'s range, one output per rendition in
    /// `staging`, this worker's threads, and the card when `hardware` is given.
    pub(crate) fn encode_request(
        &self,
        task: &SegmentTask,
        staging: &Path,
        chunk: PathBuf,
        hardware: Option<HardwareEncode>,
    ) -> EncodeRequest {
        let outputs: Vec<RenditionOutput> = task
            .renditions
            .iter()
            .enumerate()
            .map(|(i, (spec, _))| RenditionOutput {
                spec: spec.clone(),
                path: staging.join(format!("out-{i}.nut")),
            })
            .collect();
        EncodeRequest {
            chunk,
            source: task.encode.source.clone(),
            outputs,
            threads: match self.config.lend_idle_cores {
                Some(share) => share.threads(self.config.threads_per_slot, task.segments),
                None => self.config.threads_per_slot,
            },
            hardware,
            stills: crate::stills::shots(task, staging),
        }
    }

    /// Runs the encode `op` in a child (on `card`, or in software), reporting its frames as
    /// live progress.
    pub(crate) async fn encode(
        &self,
        task: &SegmentTask,
        card: Option<u32>,
        op: &MediaOp,
    ) -> Result<(EncodeResult, ChildStats), FarmError> {
        let progress = self.progress.clone();
        let (job, seg) = (task.job_id.clone(), task.segment);
        let mut report = move |n: u64| {
            if let Some(p) = &progress {
                p(&job, seg, n);
            }
        };
        // A GPU child gets no address-space limit (CUDA reserves about the card's memory in
        // address space); its resident memory is bounded instead.
        let limits = match card {
            Some(_) => self.config.limits.for_gpu(),
            None => self.config.limits,
        };
        // The one-process farm's software encodes share its warm children with the job's
        // other operations; elsewhere each slot keeps its own (GPU ones hold a device context).
        if card.is_none() && self.sandbox.reuses_children() {
            self.sandbox.run(op, limits, &mut report).await
        } else {
            self.encoders
                .run(card, &task.job_id, op, limits, &mut report)
                .await
        }
    }

    /// Runs a job's other media operation (cut, audio, stitch with its QC gate) in a warm
    /// child of the job: the one its encodes use when one is idle, so a whole-input task or a
    /// segment and the stitch after it on this worker start one child, not one per operation.
    /// Why: a fresh child of a Debian FFmpeg costs about 50 ms of CPU in the dynamic loader
    /// alone (167 libraries bound at start), which a batch of short inputs paid four times a
    /// task. A child still never serves two jobs ([`SlotPool`]).
    pub(crate) async fn job_op<T: serde::de::DeserializeOwned>(
        &self,
        job: &str,
        op: &MediaOp,
        limits: tessera_farm::sandbox::Limits,
    ) -> Result<(T, ChildStats), FarmError> {
        if self.sandbox.reuses_children() {
            self.sandbox.run(op, limits, &mut |_| {}).await
        } else {
            self.encoders.run(None, job, op, limits, &mut |_| {}).await
        }
    }

    /// Stores each rendition under its key, then the stills; the bytes stored.
    async fn store_outputs(
        &self,
        task: &SegmentTask,
        staging: &Path,
        outputs: &[RenditionOutput],
    ) -> Result<u64, FarmError> {
        let mut bytes = 0;
        for (out, (_, key)) in outputs.iter().zip(&task.renditions) {
            bytes += self.store.put_file(key, &out.path).await?;
        }
        bytes += crate::stills::upload(self.store.as_ref(), task, staging).await?;
        Ok(bytes)
    }

    /// Fails as cancelled, with the stored objects removed, when the job has ended.
    ///
    /// The dispatcher writes a job's end marker, then empties its work area. Checked after
    /// the uploads: no marker yet means the emptying comes after them; a marker means it
    /// may have come before, so these objects are removed here. Either way none is left.
    async fn discard_if_ended(&self, task: &SegmentTask) -> Result<(), FarmError> {
        if self.job_ended(&task.job_id).await {
            for (_, key) in &task.renditions {
                let _ = self.store.delete(key).await;
            }
            crate::stills::remove(self.store.as_ref(), task).await;
            return Err(FarmError::Cancelled {
                job: task.job_id.clone(),
            });
        }
        Ok(())
    }
}

/// Each rendition's target-quality search, in output order; empty when none has a target.
fn targets(result: &EncodeResult) -> Vec<Option<TargetResult>> {
    if result.renditions.iter().all(|r| r.target.is_none()) {
        return Vec::new();
    }
    result.renditions.iter().map(|r| r.target.clone()).collect()
}
