//! The finish step, once every segment is in: the source's decoder errors judged, the audio
//! step awaited, every output stitched and frame-checked (stitching.rs), measured when
//! asked, the package cut and checked (packaging.rs), then all of it delivered, or none of
//! it. Gives `Finished`.
//!
//! Why one step: stitch, measure, package and deliver share the stitch tasks and the
//! point of no return (a cancel before delivery refuses it; a failed package delivery takes
//! the delivered outputs back), so they read best in one place, in order.

use std::path::Path;

use tessera_farm::queue::Consumer;
use tessera_farm::FarmError;
use tessera_model::stitch::QualityReport;
use tessera_model::wire::StitchTask;
use tokio_util::sync::CancellationToken;

use crate::audio_step::{AudioOutcome, AudioTask};
use crate::cancel::or_cancel;
use crate::collect::{judge_decode_errors, Collected};
use crate::packaging::{self, Built};
use crate::patience::{recorded, recorded_unless_cancelled};
use crate::prepare::Prepared;
use crate::request::{DispatchContext, JobPlan, JobRequest, JobStage};
use crate::rollback::Rollback;
use crate::stitching::{self, Stitched};

/// What the finish step delivered, for the report.
pub(crate) struct Finished {
    /// Each output's delivered size, in the plan's output order (a rung's is 0).
    pub sizes: Vec<u64>,
    /// Each output's PSNR/SSIM against the source, when asked.
    pub quality: Vec<Option<QualityReport>>,
    /// The package's bytes, when the job has one.
    pub package_bytes: Option<u64>,
    /// What the stitches cost.
    pub stitched: Stitched,
    /// Audio tracks in each output.
    pub audio_tracks: usize,
    /// Peak RSS of the audio step's child (0 without audio).
    pub audio_rss: u64,
    /// The decoder errors' warning, then what the package left out.
    pub warnings: Vec<String>,
}

/// Stitches, measures, packages and delivers the prepared job whose segments `collected`
/// counted; a cancel before delivery fails it as `Cancelled`.
pub(crate) async fn finish(
    ctx: &DispatchContext,
    prepared: &mut Prepared,
    collected: &Collected,
    staging: &Path,
    events: &mut dyn Consumer,
    cancel: &CancellationToken,
) -> Result<Finished, FarmError> {
    let plan = &prepared.plan;
    let req = &plan.req;
    let job = req.id.as_str();
    let mut warnings = Vec::new();
    let (errors, frames) = (collected.decode_errors, collected.frames);
    match judge_decode_errors(&req.input, errors, frames, ctx.max_decode_error_share) {
        Ok(warning) => warnings.extend(warning),
        Err(e) => {
            prepared.audio.abort();
            return Err(e);
        }
    }
    recorded(&ctx.on_stage, &JobStage::Stitching).await;
    let audio = or_cancel(cancel, job, audio_done(&mut prepared.audio)).await?;
    let (audio_tracks, audio_rss) = match &audio {
        Some((result, stats)) => (Some(result.tracks.as_slice()), stats.peak_rss_bytes),
        None => (None, 0),
    };
    let tasks = stitching::stitch_tasks(plan, audio_tracks, frames);
    let (stitched, track_count) = match (&collected.stitched, &prepared.whole) {
        // A whole-input task stitched, checked and stored every output already.
        (Some(done), Some(whole)) => {
            let tracks = whole.audio.as_ref().map_or(0, |a| a.tracks.len());
            (done.clone(), tracks)
        }
        _ => {
            let stitching = stitching::stitch_all(ctx, req, &tasks, events);
            let tracks = audio_tracks.map_or(0, <[_]>::len);
            (or_cancel(cancel, job, stitching).await?, tracks)
        }
    };
    // From here on each output is read where its first checked stitch stored it.
    let tasks = stitching::at_stored_keys(&tasks, &stitched.keys);
    let segment_frames: Vec<u64> = plan.segments.iter().map(|p| p.frames).collect();
    let quality = measure_all(ctx, req, (&tasks, &segment_frames), staging, cancel).await?;
    let package = packaging::build(ctx, plan, &tasks, staging);
    let package = or_cancel(cancel, job, package).await?;
    if let Some(built) = &package {
        warnings.extend(built.warnings.iter().cloned());
    }
    let sizes = deliver(
        ctx,
        plan,
        (&tasks, &stitched.etags),
        package.as_ref(),
        cancel,
    )
    .await?;
    Ok(Finished {
        sizes,
        quality,
        package_bytes: package.map(|built| built.bytes),
        stitched,
        audio_tracks: track_count,
        audio_rss,
        warnings,
    })
}

/// The audio step's result, once it has finished.
async fn audio_done(audio: &mut AudioTask) -> AudioOutcome {
    audio.finish().await.map_err(|e| FarmError::ChildCrashed {
        what: "audio".into(),
        detail: e.to_string(),
    })?
}

/// PSNR/SSIM and VMAF (per segment of `segments`' frame counts too) of every stitched output
/// when the request asks for it (`None` each otherwise).
async fn measure_all(
    ctx: &DispatchContext,
    req: &JobRequest,
    (tasks, segments): (&[StitchTask], &[u64]),
    staging: &Path,
    cancel: &CancellationToken,
) -> Result<Vec<Option<QualityReport>>, FarmError> {
    let mut quality = Vec::with_capacity(tasks.len());
    for task in tasks {
        quality.push(if req.measure_quality {
            let measured = stitching::measure(ctx, req, (task, segments), staging);
            Some(or_cancel(cancel, &req.id, measured).await?)
        } else {
            None
        });
    }
    Ok(quality)
}

/// Delivers every output (each the object its stitch stored, by the `etags` they reported),
/// then the package; returns the outputs' sizes. If the package fails to deliver, it and
/// the outputs are taken back, retried through store outages; what could not be is named in
/// the job's error.
async fn deliver(
    ctx: &DispatchContext,
    plan: &JobPlan,
    (tasks, etags): (&[StitchTask], &[Option<String>]),
    package: Option<&Built>,
    cancel: &CancellationToken,
) -> Result<Vec<u64>, FarmError> {
    let req = &plan.req;
    // The point of no return: from here a cancel cannot leave some outputs delivered and
    // others not; a job cancelled before it is refused delivery.
    if cancel.is_cancelled() {
        return Err(FarmError::Cancelled {
            job: req.id.clone(),
        });
    }
    recorded_unless_cancelled(&ctx.on_stage, &JobStage::Delivering).await?;
    let sizes = stitching::deliver_all(ctx, req, tasks, etags).await?;
    if let Some(built) = package {
        let mut rollback = Rollback::default();
        if let Err(e) = packaging::deliver(ctx, req, plan.fingerprint, built, &mut rollback).await {
            stitching::undeliver_all(ctx, req, &mut rollback).await;
            return Err(rollback.fail(e));
        }
    }
    Ok(sizes)
}
