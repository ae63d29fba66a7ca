//! The whole-input path (issue 31): when the fleet is busy, a short input goes to one worker
//! as one task that cuts, encodes, transcodes the audio, stitches and checks every output
//! (the worker's whole.rs), instead of a split, segment tasks, an audio step and stitch
//! tasks. Here: the rule and the task's publication (collect.rs waits for its event).
//!
//! The rule ([`goes_whole`]): a job goes whole when workers consume the whole-input queue,
//! it has no streaming package, its segments would go to the CPU queue, its input lasts at
//! most `whole_max_seconds`, and segments already wait on that queue or at the priority gate
//! (the fleet cannot start all the queued work: splitting would buy no latency, only work). A resumed job keeps the
//! plan its earlier run recorded. Why: a split pays, per input, a chunk upload and download,
//! encoded segments and audio through the store and a stitch-queue hop, which per-file
//! encoding does not; that is worth paying only while workers would otherwise sit idle.

use tessera_farm::FarmError;
use tessera_model::plan::PackagePlan;
use tessera_model::probe::Probe;
use tessera_model::wire::{
    encode_message, keys, StitchTask, WholeAudio, WholeSplit, WholeTask, WIRE_VERSION,
};

use crate::patience::{patiently, publish_patiently, recorded};
use crate::publish::{segment_task, SplitTimestamps};
use crate::request::{DispatchContext, JobPlan, JobRequest, JobStage};
use crate::stitching::stitch_tasks;

/// Inputs up to this many seconds may go whole (the dispatcher's default).
pub const DEFAULT_WHOLE_MAX_SECONDS: f64 = 60.0;

/// What the rule looks at.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WholeCase {
    /// The input's duration.
    pub input_seconds: f64,
    /// The longest input that may go whole.
    pub max_seconds: f64,
    /// Whether the job has a streaming package (split at its media segments).
    pub package: bool,
    /// Whether its segments would go to the CPU queue.
    pub on_cpu_queue: bool,
    /// Workers consuming the whole-input queue.
    pub whole_consumers: u32,
    /// Segment tasks waiting on the CPU queue for a worker.
    pub segments_waiting: u32,
    /// Which plan an earlier run of the job recorded.
    pub resumed: Resumed,
}

/// Which plan an earlier run of a job recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resumed {
    /// None, or one that is neither of this run's.
    Fresh,
    /// The split plan.
    Split,
    /// The whole-input plan.
    Whole,
}

/// Whether a run goes as one whole-input task (see the module doc).
pub(crate) fn goes_whole(c: &WholeCase) -> bool {
    let eligible =
        c.whole_consumers > 0 && !c.package && c.on_cpu_queue && c.input_seconds <= c.max_seconds;
    match c.resumed {
        Resumed::Split => false,
        Resumed::Whole => eligible,
        Resumed::Fresh => eligible && c.segments_waiting > 0,
    }
}

/// The plan a run carries out: `planned` (split) as it is, or the whole-input plan of one
/// segment when the rule says so; the flag says which. `split_fingerprint`: the split plan's
/// fingerprint (a resumed run of it stays split); `salt`: the run's key salt.
pub(crate) async fn choose(
    ctx: &DispatchContext,
    req: &JobRequest,
    (probe, planned, bias): (Probe, PackagePlan, i64),
    (on_cpu_queue, split_fingerprint, salt): (bool, u64, u64),
) -> Result<(Probe, PackagePlan, i64, bool), FarmError> {
    let resumed = req.resume.as_ref().map(|r| r.plan_fingerprint);
    let split = (probe, planned, bias, false);
    let Some(queue) = &ctx.whole_queue else {
        return Ok(split);
    };
    let quick = WholeCase {
        input_seconds: split.0.info.duration_seconds,
        max_seconds: ctx.whole_max_seconds,
        package: req.package.is_some(),
        on_cpu_queue,
        whole_consumers: 1,
        segments_waiting: 1,
        resumed: if resumed == Some(split_fingerprint) {
            Resumed::Split
        } else {
            Resumed::Fresh
        },
    };
    if !goes_whole(&quick) {
        return Ok(split);
    }
    let one = JobRequest {
        segment_seconds: f64::from(u32::MAX),
        parallelism: 1,
        ..req.clone()
    };
    let (probe, planned, bias, _) = split;
    let (probe, whole, _) = crate::planning::plan(&one, probe, 0.0, &[]).await?;
    let fingerprint = crate::planning::plan_fingerprint(&whole.segments) ^ salt;
    // Waiting: on the CPU queue for a worker, or at the priority gate for room on it.
    let mut queued = ctx.queue.waiting(&ctx.encode_queue).await.unwrap_or(0);
    if let Some(cut) = &ctx.cut_queue {
        queued = queued.saturating_add(ctx.queue.waiting(cut).await.unwrap_or(0));
    }
    let gated = ctx.gate.as_ref().map_or(0, |g| g.counts().waiting);
    let case = WholeCase {
        whole_consumers: ctx.queue.consumers(queue).await.unwrap_or(0),
        segments_waiting: queued.saturating_add(u32::try_from(gated).unwrap_or(u32::MAX)),
        resumed: if resumed == Some(fingerprint) {
            Resumed::Whole
        } else {
            Resumed::Fresh
        },
        ..quick
    };
    if whole.segments.len() == 1 && goes_whole(&case) {
        tracing::info!(job = %req.id, waiting = case.segments_waiting, "the fleet is busy: the input goes whole");
        Ok((probe, whole, bias, true))
    } else {
        Ok((probe, planned, bias, false))
    }
}

/// Stores the input in the work area and publishes the whole-input task of `plan` (one
/// segment); returns the task, which a silence republishes.
pub(crate) async fn publish(
    ctx: &DispatchContext,
    plan: &JobPlan,
    timestamps: SplitTimestamps,
    audio: Option<WholeAudio>,
) -> Result<WholeTask, FarmError> {
    let (req, fingerprint) = (&plan.req, plan.fingerprint);
    let queue = ctx.whole_queue.as_deref().unwrap_or_default();
    let segment = plan.segments.first().ok_or_else(|| {
        FarmError::BadMessage(format!(
            "job {}: a whole-input plan without a segment",
            req.id
        ))
    })?;
    let source_key = keys::source(&req.id, fingerprint, "");
    patiently("store whole input", || {
        ctx.store.put_file(&source_key, &req.input)
    })
    .await?;
    let tracks = audio.as_ref().map_or(0, |a| a.tracks.len());
    let task = WholeTask {
        v: WIRE_VERSION,
        job_id: req.id.clone(),
        plan: fingerprint,
        source_key,
        split: WholeSplit {
            segment: segment.clone(),
            bias: plan.bias,
            dts_rule: timestamps.dts_rule,
            derived_pts: timestamps.derived_pts,
        },
        encode_task: segment_task(plan, segment),
        audio,
        stitch_tasks: whole_stitches(plan, segment.frames, tracks),
    };
    publish_patiently(&*ctx.queue, queue, &encode_message(&task)).await?;
    recorded(&ctx.on_stage, &JobStage::Published).await;
    tracing::info!(job = %req.id, queue, "whole-input task published");
    Ok(task)
}

/// The stitch tasks a whole-input task carries: the split path's, with the QC gate told of
/// the `tracks` audio tracks the worker's audio step will make (their results, and the
/// frames, the worker fills in).
fn whole_stitches(plan: &JobPlan, frames: u64, tracks: usize) -> Vec<StitchTask> {
    let mut tasks = stitch_tasks(plan, None, frames);
    for task in &mut tasks {
        if tracks > 0 {
            task.audio_key = Some(keys::audio(&plan.req.id, plan.fingerprint));
        }
        if let Some(expect) = &mut task.expect {
            expect.audio_tracks = tracks;
        }
    }
    tasks
}

#[cfg(test)]
mod tests;
