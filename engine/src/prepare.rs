//! The prepare stage: probe, plan, resolve the request for the run, start the audio, then
//! the publish stage (split, store the chunks, publish the tasks). Gives `Prepared`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tessera_farm::sandbox::{Limits, MediaOp};
use tessera_farm::FarmError;
use tessera_model::plan::shown_pts;
use tessera_model::probe::{PacketEntry, Probe, ProbeInfo, SegmentPlan};
use tessera_model::target::scenes::scene_leaders;
use tessera_model::wire::Hardware;

use crate::audio_step::{audio_step_frames_of, spawn_audio, AudioTask};
use crate::patience::recorded;
use crate::planning::{path_salt, plan, plan_fingerprint, resolve, thumbnails};
use crate::publish::{split_and_publish, Publisher, SplitTimestamps};
use crate::request::{DispatchContext, JobPlan, JobRequest, JobStage};
use crate::scene_leads::SceneLeads;

/// A job after preparation: its plan, and the audio step and the publisher running beside
/// the encodes.
pub(crate) struct Prepared {
    /// The request resolved for this run and its plan, read by every later stage.
    pub plan: JobPlan,
    /// The audio step, transcoding beside the encodes.
    pub audio: AudioTask,
    /// Still publishing segments (none when an earlier run published them all).
    pub publisher: Option<Publisher>,
    /// The largest peak RSS of the probe and split children.
    pub peak_rss_bytes: u64,
    /// Segments an earlier run finished (with the searches they reported): not waited for
    /// again.
    pub reused: Vec<crate::request::DoneSegment>,
    /// The whole-input task, when this run goes whole (whole.rs): no split, no audio step,
    /// no stitch tasks; the collect stage waits for this task instead.
    pub whole: Option<tessera_model::wire::WholeTask>,
}

impl Prepared {
    /// Ends this run (its audio step and publisher stop) and hands back the request as it
    /// resolved it, which a CPU fallback prepares again.
    pub(crate) fn into_request(self) -> JobRequest {
        self.plan.req
    }
}

/// Prepares one run of `req` on `hardware` (the request's own; the CPU on a fallback):
/// probes, plans, resolves the request for the run, records the plan, starts the audio step
/// and the publish stage.
pub(crate) async fn prepare(
    ctx: &DispatchContext,
    req: &JobRequest,
    hardware: Hardware,
    staging: &Path,
) -> Result<Prepared, FarmError> {
    tokio::fs::create_dir_all(staging)
        .await
        .map_err(|e| FarmError::io(staging, e))?;
    let (probe, probe_rss) = probe(ctx, req).await?;
    let busy_last = busy_last(ctx, req, &probe.info);
    let encode_queue = encode_queue(ctx, hardware, &probe.info, req).await?;
    let scenes = scene_cuts(ctx, req).await?;
    let planned = plan(req, probe, busy_last, scenes.as_deref().unwrap_or_default()).await?;
    let salt = path_salt(hardware);
    let split_fingerprint = plan_fingerprint(&planned.1.segments) ^ salt;
    let on_cpu = encode_queue == ctx.encode_queue;
    let split_seen = crate::cut::split_seen(req, split_fingerprint);
    let (probe, planned, bias, whole) =
        crate::whole::choose(ctx, req, planned, (on_cpu, split_seen, salt)).await?;
    let thumbnails = thumbnails(req, &probe);
    let timestamps = SplitTimestamps {
        dts_rule: probe.dts_rule,
        derived_pts: probe.derived_pts,
    };
    let info = probe.info;
    // A package's rungs join the outputs now that the source's size is known.
    let resolved = resolve(req, &info, hardware);
    let fingerprint = plan_fingerprint(&planned.segments) ^ salt;
    let (cut, fingerprint, encode_queue) = match whole {
        true => (false, fingerprint, encode_queue),
        false => {
            let able = (on_cpu, timestamps.derived_pts.is_some());
            crate::cut::route(ctx, req, able, fingerprint, encode_queue).await
        }
    };
    // A restarted dispatcher keeps what the earlier run did, if it planned the same segments.
    let resume = req
        .resume
        .as_ref()
        .filter(|r| r.plan_fingerprint == fingerprint)
        .cloned()
        .unwrap_or_default();
    let segments = planned.segments.len();
    let leads = scene_leads(&probe.packets, &planned.segments, scenes.as_deref(), whole);
    let plan = JobPlan {
        req: resolved,
        info,
        segments: planned.segments,
        bias,
        fingerprint,
        // Written before `encode_queue` moves in: fields are evaluated in this order.
        leads: Arc::new(SceneLeads::new(leads, encode_queue == ctx.gpu_queue)),
        encode_queue,
        cut: cut.then_some(timestamps.dts_rule),
        on_queue: Arc::new(Mutex::new(vec![resume.published; segments])),
        media_starts: planned.media_starts,
        thumbnails,
    };
    record_planned(ctx, &plan).await;
    let bias_seconds = plan.info.video.time_base.seconds(bias);
    if whole {
        return prepared_whole(ctx, plan, timestamps, (bias_seconds, probe_rss)).await;
    }
    let audio = spawn_audio(
        ctx,
        &plan.req,
        (fingerprint, segments),
        &plan.info,
        bias_seconds,
        staging,
    );

    tracing::info!(job = %plan.req.id, queue = %plan.encode_queue, "segments go to");
    let (split_rss, publisher) = if resume.published {
        tracing::info!(job = %plan.req.id, done = resume.done.len(), "resuming: segments already on the queue");
        (0, None)
    } else if plan.cut.is_some() {
        (0, Some(crate::cut::store_and_publish(ctx, &plan).await?))
    } else {
        let (rss, publisher) = split_and_publish(ctx, &plan, staging, timestamps).await?;
        (rss, Some(publisher))
    };
    Ok(Prepared {
        plan,
        audio,
        publisher,
        peak_rss_bytes: probe_rss.max(split_rss),
        reused: if resume.published {
            resume.done
        } else {
            Vec::new()
        },
        whole: None,
    })
}

/// A whole-input run prepared (engine whole.rs): its task published, no audio step, no
/// publisher. Published again on a resume too: the earlier run's task may be gone with its
/// worker, and a second copy only writes the same outputs again.
async fn prepared_whole(
    ctx: &DispatchContext,
    plan: JobPlan,
    timestamps: SplitTimestamps,
    (bias_seconds, probe_rss): (f64, u64),
) -> Result<Prepared, FarmError> {
    let audio = crate::audio_step::whole_audio(&plan.req, &plan.info, bias_seconds);
    let task = crate::whole::publish(ctx, &plan, timestamps, audio).await?;
    Ok(Prepared {
        plan,
        audio: AudioTask::skipped(),
        publisher: None,
        peak_rss_bytes: probe_rss,
        reused: Vec::new(),
        whole: Some(task),
    })
}

/// Probes the input in a child (at most ten minutes); returns the probe and the child's
/// peak RSS.
async fn probe(ctx: &DispatchContext, req: &JobRequest) -> Result<(Probe, u64), FarmError> {
    let probe_limits = Limits {
        timeout: Duration::from_secs(600).min(ctx.limits.timeout),
        ..ctx.limits
    };
    let (probe, stats): (Probe, _) = ctx
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
    Ok((probe, stats.peak_rss_bytes))
}

/// Work one worker does before its segment, in frames: in the one-process farm the audio
/// step takes the first child a segment frees (see audio_step.rs), so a short input's last
/// segment is planned that much shorter.
fn busy_last(ctx: &DispatchContext, req: &JobRequest, info: &ProbeInfo) -> f64 {
    if ctx.sandbox.reuses_children() {
        audio_step_frames_of(req, info)
    } else {
        0.0
    }
}

/// The frames where the input's scenes change, when an output or a package rung searches a
/// target quality: a segment with no scene change before it follows the one before
/// (scene_leads.rs), and the cuts of a job without a package move to them (planning.rs; a
/// package's cuts stay its media segments'). `None` otherwise. One decode of the input in a
/// child.
async fn scene_cuts(
    ctx: &DispatchContext,
    req: &JobRequest,
) -> Result<Option<Vec<u64>>, FarmError> {
    let targeted = req.outputs.iter().any(|o| o.rendition.target.is_some());
    if !targeted && !req.package.as_ref().is_some_and(|p| p.spec.searches()) {
        return Ok(None);
    }
    let op = MediaOp::Scenes {
        input: req.input.clone(),
    };
    let (scenes, _): (Vec<u64>, _) = ctx.sandbox.run(&op, ctx.limits, &mut |_| {}).await?;
    tracing::info!(job = %req.id, scenes = scenes.len(), "scene changes found");
    Ok(Some(scenes))
}

/// Which segment each segment follows (`tessera_model::target::scenes`): none unless the
/// scenes were looked for (`scenes`: a target, no package) and the run is split.
fn scene_leads(
    packets: &[PacketEntry],
    segments: &[SegmentPlan],
    scenes: Option<&[u64]>,
    whole: bool,
) -> Vec<Option<u32>> {
    match scenes {
        Some(scenes) if !whole => {
            let starts: Vec<i64> = segments.iter().map(|s| s.start_pts).collect();
            scene_leaders(&starts, &shown_pts(packets, scenes))
        }
        _ => vec![None; segments.len()],
    }
}

/// Records the plan (the `Planned` stage) and logs it.
async fn record_planned(ctx: &DispatchContext, plan: &JobPlan) {
    let video = &plan.info.video;
    let segments = &plan.segments;
    recorded(
        &ctx.on_stage,
        &JobStage::Planned {
            frames: segments.iter().map(|p| p.frames).sum(),
            segments: segments.len() as u32,
            fingerprint: plan.fingerprint,
            segment_seconds: segments
                .iter()
                .map(|p| video.time_base.seconds(p.end_pts - p.start_pts))
                .collect(),
            on_gpu: plan.on_gpu(ctx),
        },
    )
    .await;
    tracing::info!(
        job = %plan.req.id, segments = segments.len(), frames = video.frames,
        codec = %video.codec, width = video.width, height = video.height, "job planned"
    );
}

/// Where a job of `hardware` may run given its source's `transfer`. An HDR source (PQ or
/// HLG) never goes to the GPU: the GPU path keeps no HDR (no tone mapping, and NVENC in
/// FFmpeg 5.1 writes no mastering-display or light-level metadata), so "any" runs on the
/// CPU and "gpu" is refused, naming the input (GPU re-review, failure 4).
fn hdr_route(
    hardware: Hardware,
    transfer: Option<&str>,
    (job, input): (&str, &Path),
) -> Result<Hardware, FarmError> {
    if !tessera_model::hdr::is_hdr_transfer(transfer) {
        return Ok(hardware);
    }
    let transfer = transfer.unwrap_or_default();
    match hardware {
        Hardware::Gpu => Err(FarmError::Media {
            code: tessera_model::error_code::ErrorCode::GpuRequestUnsupported,
            class: tessera_model::error_code::ErrorClass::Abort,
            message: format!(
                "{}: the source is HDR (transfer {transfer}) and the GPU path keeps no HDR \
                 (no tone mapping, no HDR10 metadata from NVENC): submit it with hardware \
                 \"cpu\" or \"any\"",
                input.display()
            ),
        }),
        Hardware::Any => {
            tracing::info!(job, transfer, "HDR source: encoded on the CPU path");
            Ok(Hardware::Cpu)
        }
        Hardware::Cpu => Ok(Hardware::Cpu),
    }
}

/// The queue of a job's segments: by its hardware (an HDR source's by [`hdr_route`]), and
/// for "any" by whether GPU workers are consuming the GPU queue now.
async fn encode_queue(
    ctx: &DispatchContext,
    hardware: Hardware,
    info: &tessera_model::probe::ProbeInfo,
    req: &JobRequest,
) -> Result<String, FarmError> {
    let transfer = info.video.color.transfer.as_deref();
    Ok(
        match hdr_route(hardware, transfer, (&req.id, &req.input))? {
            Hardware::Cpu => ctx.encode_queue.clone(),
            Hardware::Gpu => ctx.gpu_queue.clone(),
            Hardware::Any => {
                if ctx.queue.consumers(&ctx.gpu_queue).await.unwrap_or(0) > 0 {
                    ctx.gpu_queue.clone()
                } else {
                    ctx.encode_queue.clone()
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hdr_source_never_goes_to_the_gpu() {
        let at = ("j1", Path::new("/in/hdr.mkv"));
        for sdr in [None, Some("bt709"), Some("smpte170m")] {
            for hw in [Hardware::Cpu, Hardware::Gpu, Hardware::Any] {
                assert_eq!(hdr_route(hw, sdr, at).unwrap(), hw, "{sdr:?}");
            }
        }
        for hdr in ["smpte2084", "arib-std-b67"] {
            assert_eq!(
                hdr_route(Hardware::Any, Some(hdr), at).unwrap(),
                Hardware::Cpu
            );
            assert_eq!(
                hdr_route(Hardware::Cpu, Some(hdr), at).unwrap(),
                Hardware::Cpu
            );
            let refused = hdr_route(Hardware::Gpu, Some(hdr), at).unwrap_err();
            assert_eq!(
                refused.code(),
                tessera_model::error_code::ErrorCode::GpuRequestUnsupported
            );
            let text = refused.to_string();
            assert!(text.contains("/in/hdr.mkv") && text.contains(hdr), "{text}");
        }
    }
}
