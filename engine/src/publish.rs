//! The publish stage: the input split into chunks, each chunk stored and its segment task
//! published as it appears (encoding overlaps the split), admitted by priority.
//!
//! Why a stage of its own: prepare starts it once the plan is made; it runs on beside the
//! encodes (with a gate it waits for places only finished segments free), and the collect
//! stage polls it and republishes its tasks after a silence.

use std::path::Path;
use std::sync::Arc;

use tessera_farm::sandbox::MediaOp;
use tessera_farm::FarmError;
use tessera_model::encode::SegmentSource;
use tessera_model::probe::{ChunkInfo, SegmentPlan};
use tessera_model::timestamps::{DerivedPts, DtsRule};
use tessera_model::wire::keys;
use tessera_model::wire::{
    encode_message, SegmentCut, SegmentEncode, SegmentTask, StillTask, WholeSplit, WIRE_VERSION,
};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;

use crate::patience::{patiently, publish_patiently, recorded};
use crate::request::{DispatchContext, JobPlan, JobStage};
use crate::scene_leads::Held;

/// How the split reads the source's timestamps (from the probe).
pub(crate) struct SplitTimestamps {
    /// How the split derives the dts while it streams the packets.
    pub dts_rule: DtsRule,
    /// The pts the probe derived for a container that stores none.
    pub derived_pts: Option<DerivedPts>,
}

/// Splits the input and publishes each segment as its chunk appears (encoding overlaps the
/// split); returns the split child's peak RSS and the task still publishing.
pub(crate) async fn split_and_publish(
    ctx: &DispatchContext,
    plan: &JobPlan,
    staging: &Path,
    timestamps: SplitTimestamps,
) -> Result<(u64, Publisher), FarmError> {
    let chunk_dir = staging.join("chunks");
    tokio::fs::create_dir_all(&chunk_dir)
        .await
        .map_err(|e| FarmError::io(&chunk_dir, e))?;
    let split = MediaOp::Split {
        input: plan.req.input.clone(),
        segments: plan.segments.clone(),
        bias: plan.bias,
        dts_rule: timestamps.dts_rule,
        derived_pts: timestamps.derived_pts,
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
    let (ready_tx, ready_rx) = tokio::sync::mpsc::unbounded_channel::<SegmentTask>();
    let storing = async move {
        while let Some(index) = rx.recv().await {
            let segment = usize::try_from(index)
                .ok()
                .and_then(|i| plan.segments.get(i))
                .ok_or_else(|| FarmError::BadMessage(format!("split reported chunk {index}")))?;
            let path = chunk_dir.join(tessera_model::probe::chunk_file_name(segment.index));
            let task = segment_task(plan, segment);
            patiently("store chunk", || ctx.store.put_file(&task.chunk_key, &path)).await?;
            let _ = tokio::fs::remove_file(&path).await;
            let _ = ready_tx.send(task);
        }
        Ok::<(), FarmError>(())
    };
    let publisher = spawn_publisher(ctx, plan, ready_rx);
    let (split_result, stored) = tokio::join!(splitting, storing);
    let (chunks, split_stats) = split_result?;
    stored?;
    if chunks.len() != plan.segments.len() {
        return Err(FarmError::ChildCrashed {
            what: "split".into(),
            detail: "did not report every chunk".into(),
        });
    }
    Ok((split_stats.peak_rss_bytes, publisher))
}

/// Publishing runs on beside the encodes: with a gate it waits for places that only finished
/// segments free, and the job's events are read once preparation returns. `ready` gives the
/// tasks whose chunks are stored; one of a segment that follows its scene's first segment
/// waits until that one is done (`plan.leads`, recorded by the collect stage) and goes with
/// the band the leader's result gives it.
pub(crate) fn spawn_publisher(
    ctx: &DispatchContext,
    plan: &JobPlan,
    mut ready: UnboundedReceiver<SegmentTask>,
) -> Publisher {
    let ctx = ctx.clone();
    let (job, priority, total) = (plan.req.id.clone(), plan.req.priority, plan.segments.len());
    let (queue, on_queue) = (plan.encode_queue.clone(), plan.on_queue.clone());
    let leads = Arc::clone(&plan.leads);
    Publisher(tokio::spawn(async move {
        let (mut published, mut held, mut stored_all) = (0usize, Held::default(), false);
        let mut go: Vec<SegmentTask> = Vec::new();
        loop {
            for mut task in go.drain(..) {
                if let Some(gate) = &ctx.gate {
                    gate.admit(&job, priority).await;
                }
                leads.bind(&mut task);
                publish_patiently(&*ctx.queue, &queue, &encode_message(&task)).await?;
                if let Some(p) = (on_queue.lock().unwrap_or_else(|p| p.into_inner()))
                    .get_mut(task.segment as usize)
                {
                    *p = true;
                }
                published += 1;
            }
            if stored_all && held.is_empty() {
                break;
            }
            tokio::select! {
                task = ready.recv(), if !stored_all => match task {
                    Some(task) => match leads.waits_for(task.segment) {
                        Some(leader) => held.hold(leader, task.segment, task),
                        None => go.push(task),
                    },
                    None => stored_all = true,
                },
                () = leads.changed(), if !held.is_empty() => {
                    go = held.release(&leads.take_recorded());
                }
            }
        }
        if published != total {
            return Err(FarmError::ChildCrashed {
                what: "split".into(),
                detail: format!("published {published} of {total} segments"),
            });
        }
        recorded(&ctx.on_stage, &JobStage::Published).await;
        Ok(())
    }))
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
/// silence); a follower's renditions searching within its band once its leader is known.
pub(crate) fn segment_task(plan: &JobPlan, segment: &SegmentPlan) -> SegmentTask {
    let mut task = unbound_task(plan, segment);
    plan.leads.bind(&mut task);
    task
}

/// [`segment_task`] before a follower's band is applied.
fn unbound_task(plan: &JobPlan, segment: &SegmentPlan) -> SegmentTask {
    let (req, fingerprint) = (&plan.req, plan.fingerprint);
    let video = &plan.info.video;
    let media_starts = &plan.media_starts;
    let lo = media_starts.partition_point(|&p| p < segment.start_pts);
    let hi = media_starts.partition_point(|&p| p < segment.end_pts);
    SegmentTask {
        v: WIRE_VERSION,
        job_id: req.id.clone(),
        plan: fingerprint,
        segment: segment.index,
        chunk_key: keys::chunk(&req.id, fingerprint, segment.index),
        encode: SegmentEncode {
            source: SegmentSource {
                start_pts: segment.start_pts,
                end_pts: segment.end_pts,
                time_base: video.time_base,
                bias: plan.bias,
                frame_rate: if video.avg_frame_rate.num > 0 {
                    video.avg_frame_rate
                } else {
                    video.frame_rate
                },
                sample_aspect_ratio: video.sample_aspect_ratio,
                source_size: Some((video.width, video.height)),
                color: video.color.clone(),
                source_bit_depth: video.bit_depth,
                keyframes: media_starts[lo..hi].to_vec(),
            },
            expected_frames: segment.frames,
            expected_pts: segment.first_frame_pts.zip(segment.last_frame_pts),
            source_codec: video.codec.clone(),
            source_pix_fmt: video.pix_fmt.clone(),
        },
        renditions: req
            .outputs
            .iter()
            .map(|o| {
                let key = keys::encoded(&req.id, fingerprint, &o.rendition.name, segment.index);
                (o.rendition.clone(), key)
            })
            .collect(),
        stills: plan
            .stills()
            .iter()
            .filter(|s| (segment.start_pts..segment.end_pts).contains(&s.pts))
            .map(|s| StillTask {
                pts: s.pts,
                images: s
                    .images
                    .iter()
                    .map(|(image, rel)| (*image, keys::still(&req.id, fingerprint, rel)))
                    .collect(),
            })
            .collect(),
        segments: u32::try_from(plan.segments.len()).unwrap_or(u32::MAX),
        cut: plan.cut.map(|dts_rule| SegmentCut {
            source_key: keys::source(&req.id, fingerprint, ""),
            split: WholeSplit {
                segment: segment.clone(),
                bias: plan.bias,
                dts_rule,
                derived_pts: None,
            },
        }),
    }
}
