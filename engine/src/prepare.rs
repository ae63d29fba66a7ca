//! Preparing a job: probe, plan, start the audio, split, store the chunks, publish the tasks.

use std::path::Path;
use std::time::Duration;

use tessera_farm::sandbox::{Limits, MediaOp};
use tessera_farm::FarmError;
use tessera_model::probe::{ChunkInfo, Probe, ProbeInfo, SegmentPlan};
use tessera_model::wire::keys;
use tessera_model::wire::{
    encode_message, Hardware, SegmentEncode, SegmentTask, StillTask, WIRE_VERSION,
};
use tokio::task::JoinHandle;

use crate::audio_step::{audio_step_frames_of, spawn_audio, AudioTask};
use crate::patience::{patiently, publish_patiently, recorded};
use crate::planning::{plan, thumbnails, with_rungs, PlannedStill, PlannedThumbnails};
use crate::request::{DispatchContext, JobRequest, JobStage};

/// A job after preparation: its plan, and the audio step running beside the encodes.
pub(crate) struct Prepared {
    pub info: ProbeInfo,
    pub plans: Vec<SegmentPlan>,
    pub bias: i64,
    pub audio: AudioTask,
    /// Still publishing segments (none when an earlier run published them all).
    pub publisher: Option<Publisher>,
    pub peak_rss_bytes: u64,
    /// Segments an earlier run finished (index, frames): not waited for again.
    pub reused: Vec<(u32, u64)>,
    /// The queue the segment tasks go to.
    pub encode_queue: String,
    /// The plan's fingerprint: in every task, event and work-area key of this run.
    pub fingerprint: u64,
    /// Which segments are on the queue (the publisher marks them; all of them on a resume
    /// of a run that published everything): the ones a silence may republish.
    pub on_queue: OnQueue,
    /// A package's media segment starts (source pts): IDRs in every rendition. Empty
    /// without a package.
    pub media_starts: Vec<i64>,
    /// A package's thumbnails: the stills the segment tasks make, the sheets made of them.
    pub thumbnails: Option<PlannedThumbnails>,
    /// The job's outputs with its package's rungs (the request's own when it has none).
    pub outputs: Vec<crate::request::JobOutput>,
}

/// Which segments of a job have been published, shared with its publisher.
pub(crate) type OnQueue = std::sync::Arc<std::sync::Mutex<Vec<bool>>>;

/// Sets a CPU-only run of a job apart from a run of the same plan on the GPU path: a job
/// that falls back to the CPU gets other work-area keys and events, so segments its GPU run
/// still has in flight can never mix into it (one encoder per rendition).
pub(crate) fn path_salt(hardware: tessera_model::wire::Hardware) -> u64 {
    match hardware {
        tessera_model::wire::Hardware::Cpu => 0x9e37_79b9_7f4a_7c15,
        _ => 0,
    }
}

/// A fingerprint of a plan's segment ranges (FNV-1a), stable across runs and builds.
pub(crate) fn plan_fingerprint(plans: &[SegmentPlan]) -> u64 {
    plans
        .iter()
        .flat_map(|p| [p.start_pts, p.end_pts])
        .flat_map(i64::to_le_bytes)
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

pub(crate) async fn prepare(
    ctx: &DispatchContext,
    req: &JobRequest,
    staging: &Path,
) -> Result<Prepared, FarmError> {
    tokio::fs::create_dir_all(staging)
        .await
        .map_err(|e| FarmError::io(staging, e))?;
    let probe_limits = Limits {
        timeout: Duration::from_secs(600).min(ctx.limits.timeout),
        ..ctx.limits
    };
    let (probe, probe_stats): (Probe, _) = ctx
        .sandbox
        .run(
            &MediaOp::Probe {
                input: req.input.clone(),
                max_frames: ctx.max_input_frames,
            },
            probe_limits,
            &mut |_| {},
        )
        .await?;
    // In the one-process farm the audio step takes the first child a segment frees (see
    // audio_step.rs): a short input's last segment is planned that much shorter.
    let busy_last = if ctx.sandbox.reuses_children() {
        audio_step_frames_of(req, &probe.info)
    } else {
        0.0
    };
    let (probe, planned, bias) = plan(req, probe, busy_last).await?;
    let plans = planned.segments;
    let media_starts = planned.media_starts;
    let thumbnails = thumbnails(req, &probe);
    let stills: &[PlannedStill] = thumbnails.as_ref().map_or(&[], |t| &t.stills);
    // A package's rungs join the outputs now that the source's size is known.
    let req = &with_rungs(req, &probe.info);
    let video = &probe.info.video;
    let fingerprint = plan_fingerprint(&plans) ^ path_salt(req.hardware);
    let encode_queue = encode_queue(ctx, req).await;
    // A restarted dispatcher keeps what the earlier run did, if it planned the same segments.
    let resume = req
        .resume
        .as_ref()
        .filter(|r| r.plan_fingerprint == fingerprint)
        .cloned()
        .unwrap_or_default();
    recorded(
        &ctx.on_stage,
        &JobStage::Planned {
            frames: plans.iter().map(|p| p.frames).sum(),
            segments: plans.len() as u32,
            fingerprint,
            segment_seconds: plans
                .iter()
                .map(|p| video.time_base.seconds(p.end_pts - p.start_pts))
                .collect(),
            on_gpu: encode_queue == ctx.gpu_queue,
        },
    )
    .await;
    tracing::info!(
        job = %req.id, segments = plans.len(), frames = video.frames,
        codec = %video.codec, width = video.width, height = video.height, "job planned"
    );

    let audio = spawn_audio(
        ctx,
        req,
        (fingerprint, plans.len()),
        &probe.info,
        video.time_base.seconds(bias),
        staging,
    );

    tracing::info!(job = %req.id, queue = %encode_queue, "segments go to");
    let on_queue: OnQueue =
        std::sync::Arc::new(std::sync::Mutex::new(vec![resume.published; plans.len()]));
    let (split_rss, publisher) = if resume.published {
        tracing::info!(job = %req.id, done = resume.done.len(), "resuming: segments already on the queue");
        (0, None)
    } else {
        let publish = (encode_queue.clone(), on_queue.clone());
        let (rss, publisher) = split_and_publish(
            ctx,
            req,
            staging,
            (&plans, fingerprint, &media_starts, stills),
            &probe,
            bias,
            publish,
        )
        .await?;
        (rss, Some(publisher))
    };
    Ok(Prepared {
        info: probe.info,
        plans,
        bias,
        audio,
        publisher,
        peak_rss_bytes: probe_stats.peak_rss_bytes.max(split_rss),
        reused: if resume.published {
            resume.done
        } else {
            Vec::new()
        },
        encode_queue,
        on_queue,
        fingerprint,
        media_starts,
        thumbnails,
        outputs: req.outputs.clone(),
    })
}

/// Splits the input and publishes each segment as its chunk appears (encoding overlaps the
/// split); returns the split child's peak RSS and the task still publishing.
async fn split_and_publish(
    ctx: &DispatchContext,
    req: &JobRequest,
    staging: &Path,
    (plans, fingerprint, media_starts, stills): (&[SegmentPlan], u64, &[i64], &[PlannedStill]),
    probe: &Probe,
    bias: i64,
    (queue, on_queue): (String, OnQueue),
) -> Result<(u64, Publisher), FarmError> {
    let info = &probe.info;
    let chunk_dir = staging.join("chunks");
    tokio::fs::create_dir_all(&chunk_dir)
        .await
        .map_err(|e| FarmError::io(&chunk_dir, e))?;
    let split = MediaOp::Split {
        input: req.input.clone(),
        segments: plans.to_vec(),
        bias,
        dts_rule: probe.dts_rule,
        derived_pts: probe.derived_pts.clone(),
        dir: chunk_dir.clone(),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let splitting = async move {
        let mut on_chunk = move |index: u64| {
            let _ = tx.send(index);
        };
        ctx.sandbox
            .run::<Vec<ChunkInfo>>(&split, ctx.limits, &mut on_chunk)
            .await
    };
    // Chunks are stored as the split writes them; their tasks wait for admission (priority)
    // apart, so storing never waits behind the gate.
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<SegmentTask>();
    let storing = async move {
        while let Some(index) = rx.recv().await {
            let plan = usize::try_from(index)
                .ok()
                .and_then(|i| plans.get(i))
                .ok_or_else(|| FarmError::BadMessage(format!("split reported chunk {index}")))?;
            let path = chunk_dir.join(tessera_media::chunk_file_name(plan.index));
            let segments = (plan, plans.len());
            let task = segment_task(
                req,
                fingerprint,
                segments,
                info,
                (bias, media_starts, stills),
            );
            patiently("store chunk", || ctx.store.put_file(&task.chunk_key, &path)).await?;
            let _ = tokio::fs::remove_file(&path).await;
            let _ = ready_tx.send(task);
        }
        Ok::<(), FarmError>(())
    };
    // Publishing runs on beside the encodes: with a gate it waits for places that only
    // finished segments free, and the job's events are read once preparation returns.
    let publisher = {
        let ctx = ctx.clone();
        let (job, priority, total) = (req.id.clone(), req.priority, plans.len());
        tokio::spawn(async move {
            let mut published = 0usize;
            while let Some(task) = ready_rx.recv().await {
                if let Some(gate) = &ctx.gate {
                    gate.admit(&job, priority).await;
                }
                publish_patiently(&*ctx.queue, &queue, &encode_message(&task)).await?;
                if let Some(p) = (on_queue.lock().unwrap_or_else(|p| p.into_inner()))
                    .get_mut(task.segment as usize)
                {
                    *p = true;
                }
                published += 1;
            }
            if published != total {
                return Err(FarmError::ChildCrashed {
                    what: "split".into(),
                    detail: format!("published {published} of {total} segments"),
                });
            }
            recorded(&ctx.on_stage, &JobStage::Published).await;
            Ok(())
        })
    };
    let publisher = Publisher(publisher);
    let (split_result, stored) = tokio::join!(splitting, storing);
    let (chunks, split_stats) = split_result?;
    stored?;
    if chunks.len() != plans.len() {
        return Err(FarmError::ChildCrashed {
            what: "split".into(),
            detail: "did not report every chunk".into(),
        });
    }
    Ok((split_stats.peak_rss_bytes, publisher))
}

/// The queue of a job's segments: by its hardware, and for "any" by whether GPU workers
/// are consuming the GPU queue now.
async fn encode_queue(ctx: &DispatchContext, req: &JobRequest) -> String {
    match req.hardware {
        Hardware::Cpu => ctx.encode_queue.clone(),
        Hardware::Gpu => ctx.gpu_queue.clone(),
        Hardware::Any => {
            if ctx.queue.consumers(&ctx.gpu_queue).await.unwrap_or(0) > 0 {
                ctx.gpu_queue.clone()
            } else {
                ctx.encode_queue.clone()
            }
        }
    }
}

/// The task publishing a job's segments; aborted when dropped (the job ended).
pub(crate) struct Publisher(JoinHandle<Result<(), FarmError>>);

impl Publisher {
    /// Waits until every segment is published (or publishing failed).
    pub(crate) async fn finished(&mut self) -> Result<(), FarmError> {
        (&mut self.0).await.map_err(|e| FarmError::ChildCrashed {
            what: "publisher".into(),
            detail: e.to_string(),
        })?
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Whether `publisher` finished: pending forever when there is none (nothing to publish).
pub(crate) async fn published(publisher: &mut Option<Publisher>) -> Result<(), FarmError> {
    match publisher {
        Some(p) => p.finished().await,
        None => std::future::pending().await,
    }
}

/// The task message of one planned segment (published by the split, republished after a
/// silence).
pub(crate) fn segment_task(
    req: &JobRequest,
    fingerprint: u64,
    (plan, segments): (&SegmentPlan, usize),
    info: &ProbeInfo,
    (bias, media_starts, stills): (i64, &[i64], &[PlannedStill]),
) -> SegmentTask {
    let video = &info.video;
    let lo = media_starts.partition_point(|&p| p < plan.start_pts);
    let hi = media_starts.partition_point(|&p| p < plan.end_pts);
    SegmentTask {
        v: WIRE_VERSION,
        job_id: req.id.clone(),
        plan: fingerprint,
        segment: plan.index,
        chunk_key: keys::chunk(&req.id, fingerprint, plan.index),
        encode: SegmentEncode {
            start_pts: plan.start_pts,
            end_pts: plan.end_pts,
            time_base: video.time_base,
            bias,
            frame_rate: if video.avg_frame_rate.num > 0 {
                video.avg_frame_rate
            } else {
                video.frame_rate
            },
            sample_aspect_ratio: video.sample_aspect_ratio,
            source_size: Some((video.width, video.height)),
            color: video.color.clone(),
            source_bit_depth: video.bit_depth,
            expected_frames: plan.frames,
            expected_pts: plan.first_frame_pts.zip(plan.last_frame_pts),
            source_codec: video.codec.clone(),
            source_pix_fmt: video.pix_fmt.clone(),
            keyframes: media_starts[lo..hi].to_vec(),
        },
        renditions: req
            .outputs
            .iter()
            .map(|o| {
                let key = keys::encoded(&req.id, fingerprint, &o.rendition.name, plan.index);
                (o.rendition.clone(), key)
            })
            .collect(),
        stills: stills
            .iter()
            .filter(|s| (plan.start_pts..plan.end_pts).contains(&s.pts))
            .map(|s| StillTask {
                pts: s.pts,
                images: s
                    .images
                    .iter()
                    .map(|(image, rel)| (*image, keys::still(&req.id, fingerprint, rel)))
                    .collect(),
            })
            .collect(),
        segments: u32::try_from(segments).unwrap_or(u32::MAX),
    }
}
