//! The job's report, built in one place from what the stages handed forward.
//!
//! Why a module of its own: the report reads every stage's output (`Prepared`,
//! `Collected`, `Finished`) and the job's clock; built here, no stage needs to know it.

use std::time::Instant;

use crate::collect::Collected;
use crate::finish::Finished;
use crate::prepare::Prepared;
use crate::request::{Destination, JobReport, OutputReport, RungSearch};
use tessera_model::encode::TargetResult;
use tessera_model::stitch::QualityReport;

/// When the job's stages ran: the report's times.
pub(crate) struct Clock {
    /// When the job began.
    pub started: Instant,
    /// Seconds spent preparing (probe, plan, split up to the first publish), summed over a
    /// CPU fallback's second preparation.
    pub prepare_s: f64,
    /// Seconds from the start until every segment was in.
    pub collected_at: f64,
}

impl JobReport {
    /// The report of a finished job; its wall time ends now.
    pub(crate) fn new(
        prepared: &Prepared,
        collected: &Collected,
        finished: &Finished,
        clock: &Clock,
    ) -> JobReport {
        let (plan, req) = (&prepared.plan, &prepared.plan.req);
        let wall_s = clock.started.elapsed().as_secs_f64();
        let mut overheads = collected.overheads.clone();
        overheads.sort_by(f64::total_cmp);
        let mut outputs: Vec<OutputReport> = (req.outputs.iter().enumerate())
            .zip(&finished.sizes)
            .zip(&finished.quality)
            .filter(|(((_, o), _), _)| o.destination != Destination::Rung)
            .map(|(((k, o), &bytes), quality)| {
                let target = searches(collected, k);
                OutputReport {
                    destination: o.destination.to_string(),
                    rendition: o.rendition.name.clone(),
                    bytes,
                    quality: quality.clone(),
                    target_vmaf_error: search_error(&target, quality.as_ref()),
                    target,
                    rungs: Vec::new(),
                }
            })
            .collect();
        if let (Some(p), Some(bytes)) = (&req.package, finished.package_bytes) {
            outputs.push(OutputReport {
                destination: p.destination.to_string(),
                rendition: "package".into(),
                bytes,
                quality: None,
                target: Vec::new(),
                target_vmaf_error: None,
                rungs: (req.outputs.iter().enumerate())
                    .filter(|(_, o)| o.destination == Destination::Rung)
                    .map(|(k, o)| RungSearch {
                        rendition: o.rendition.name.clone(),
                        target: searches(collected, k),
                    })
                    .filter(|r| !r.target.is_empty())
                    .collect(),
            });
        }
        let warnings = (plan.info.ignored.iter())
            .map(|s| format!("{s}: left out of the outputs"))
            .chain(plan.info.warnings.iter().cloned())
            .chain(finished.warnings.iter().cloned())
            .collect();
        let finish_s = wall_s - clock.collected_at;
        JobReport {
            job_id: req.id.clone(),
            frames: collected.frames,
            source_frames: plan.info.video.frames,
            segments: plan.segments.len() as u32,
            segment_frames: plan.segments.iter().map(|s| s.frames).collect(),
            audio_tracks: finished.audio_tracks,
            bytes: outputs.iter().map(|o| o.bytes).sum(),
            wall_s,
            encode_fps: collected.frames as f64 / wall_s.max(1e-9),
            peak_child_rss_bytes: [
                prepared.peak_rss_bytes,
                collected.peak_segment_rss,
                finished.audio_rss,
                finished.stitched.peak_rss_bytes,
            ]
            .into_iter()
            .max()
            .unwrap_or(0),
            peak_segment_rss_bytes: collected.peak_segment_rss,
            median_segment_overhead_s: overheads.get(overheads.len() / 2).copied().unwrap_or(0.0),
            quality: outputs.first().and_then(|o| o.quality.clone()),
            outputs,
            decode_errors: collected.decode_errors,
            warnings,
            prepare_s: clock.prepare_s,
            finish_s,
            fixed_overhead_s: clock.prepare_s + finish_s,
            qc_s: finished.stitched.check_seconds,
            title: plan.info.title.clone(),
            video_s: plan.info.duration_seconds,
        }
    }
}

/// Output `k`'s target-quality search of every segment (empty when no segment searched).
fn searches(collected: &Collected, k: usize) -> Vec<Option<TargetResult>> {
    let per_segment: Vec<Option<TargetResult>> = (collected.targets.iter())
        .map(|segment| segment.get(k).cloned().flatten())
        .collect();
    if per_segment.iter().all(Option::is_none) {
        return Vec::new();
    }
    per_segment
}

/// The largest gap between a segment's searched VMAF and its VMAF in the stitched output
/// (`None` without both).
fn search_error(target: &[Option<TargetResult>], quality: Option<&QualityReport>) -> Option<f64> {
    let measured = &quality?.vmaf.as_ref()?.segments;
    (target.iter().zip(measured))
        .filter_map(|(t, m)| Some((t.as_ref()?.vmaf - m.mean).abs()))
        .reduce(f64::max)
}
