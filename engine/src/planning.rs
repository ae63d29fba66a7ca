//! The plan step of preparing a job: segment ranges from the probe's packet index (for a
//! streaming package, whole media segments with their IDR frames), and the request resolved
//! for a run (the package's rungs as outputs, the run's hardware).
//!
//! Why apart from prepare.rs: planning is pure work on the probe, run on a blocking thread
//! under a deadline; prepare.rs runs the children and the queue around it.

use std::time::Duration;

use tessera_farm::FarmError;
use tessera_model::encode::Container;
use tessera_model::error_code::{ErrorClass, ErrorCode};
use tessera_model::plan::{plan_package_segments, plan_segments_at_scenes, shown_pts};
use tessera_model::plan::{timestamp_bias, PackagePlan};
use tessera_model::probe::{Probe, ProbeInfo, SegmentPlan};
use tessera_model::wire::Hardware;
use tessera_package::ladder::{renditions, Source};

use crate::request::{Destination, JobOutput, JobRequest, PlannedStill, PlannedThumbnails};

/// Longest the planner may take; it is O(n log n) in the frame count, so a 2-hour 60 fps
/// source plans in well under a second and only a hostile index comes near this.
const PLAN_TIMEOUT: Duration = Duration::from_secs(60);
/// Most segments one job may have (each is a queue message, a chunk and an encoded object):
/// 10 s segments of the longest input allowed (48 h) are 17,280.
pub const MAX_SEGMENTS: usize = 20_000;

/// Plans the segments on a blocking thread under [`PLAN_TIMEOUT`] (a source of millions of
/// frames must not stall the dispatcher's runtime: its API and other jobs go on), and holds
/// the plan to [`MAX_SEGMENTS`]. Hands the probe back with the plan and the bias. A job with
/// a package gets farm segments of whole media segments and the media segment starts.
/// `busy_last`: work one worker does before its segment, in frames (see
/// `plan_segments_busy`). `scenes`: frames where a scene begins, where cuts go when near
/// the segment length (`plan_segments_at_scenes`).
pub(crate) async fn plan(
    req: &JobRequest,
    probe: Probe,
    busy_last: f64,
    scenes: &[u64],
) -> Result<(Probe, PackagePlan, i64), FarmError> {
    let (seconds, parallelism) = (req.segment_seconds, req.parallelism);
    let media_seconds = req.package.as_ref().map(|p| p.spec.segment_seconds);
    let scenes = scenes.to_vec();
    let planning = tokio::task::spawn_blocking(move || {
        let video = &probe.info.video;
        let planned = match media_seconds {
            Some(media) => {
                plan_package_segments(&probe.packets, video.time_base, seconds, media, parallelism)
            }
            None => PackagePlan {
                segments: plan_segments_at_scenes(
                    &probe.packets,
                    video.time_base,
                    (seconds, parallelism, busy_last),
                    &shown_pts(&probe.packets, &scenes),
                ),
                media_starts: Vec::new(),
            },
        };
        let bias = timestamp_bias(&probe.packets, video.time_base);
        (probe, planned, bias)
    });
    let input = req.input.display();
    let refused = |message: String| FarmError::Media {
        code: ErrorCode::InputUnsupported,
        class: ErrorClass::Abort,
        message,
    };
    let (probe, planned, bias) = match tokio::time::timeout(PLAN_TIMEOUT, planning).await {
        Ok(Ok(planned)) => planned,
        Ok(Err(e)) => {
            return Err(FarmError::ChildCrashed {
                what: "planner".into(),
                detail: e.to_string(),
            })
        }
        Err(_) => {
            return Err(refused(format!(
                "{input}: planning took longer than {} s",
                PLAN_TIMEOUT.as_secs()
            )))
        }
    };
    if planned.segments.is_empty() {
        return Err(FarmError::Media {
            code: ErrorCode::InputNoVideo,
            class: ErrorClass::Abort,
            message: format!("{input}: no video frame to encode"),
        });
    }
    if planned.segments.len() > MAX_SEGMENTS {
        return Err(refused(format!(
            "{input}: {} segments of {seconds} s, over the limit of {MAX_SEGMENTS} \
             (ask for longer segments)",
            planned.segments.len()
        )));
    }
    Ok((probe, planned, bias))
}

/// The request as a run carries it out: its package's rungs appended to the outputs
/// (stitched to MP4 in the work area, then packaged; not again when it already has them),
/// and `hardware` for the run's (the request's own, or the CPU on a fallback).
pub(crate) fn resolve(req: &JobRequest, info: &ProbeInfo, hardware: Hardware) -> JobRequest {
    let mut outputs = req.outputs.clone();
    let has_rungs = outputs.iter().any(|o| o.destination == Destination::Rung);
    if let Some(package) = req.package.as_ref().filter(|_| !has_rungs) {
        let video = &info.video;
        let rate = [video.avg_frame_rate, video.frame_rate]
            .into_iter()
            .find(|r| r.num > 0 && r.den > 0);
        let source = Source {
            width: video.width,
            height: video.height,
            fps: rate.map_or(0.0, |r| r.as_f64()),
        };
        outputs.extend(
            renditions(&package.spec, source)
                .into_iter()
                .map(|rendition| JobOutput {
                    rendition,
                    container: Container::Mp4,
                    destination: Destination::Rung,
                }),
        );
    }
    JobRequest {
        outputs,
        hardware,
        ..req.clone()
    }
}

/// Plans the thumbnails of `req`'s package on the probed source (`None`: none asked for).
pub(crate) fn thumbnails(req: &JobRequest, probe: &Probe) -> Option<PlannedThumbnails> {
    use tessera_package::thumbnails::{plan, Picture};
    let spec = req.package.as_ref()?.spec.thumbnails.as_ref()?;
    let video = &probe.info.video;
    let sar = video.sample_aspect_ratio;
    let sar = if sar.num > 0 && sar.den > 0 {
        sar.as_f64()
    } else {
        1.0
    };
    let rate = [video.avg_frame_rate, video.frame_rate]
        .into_iter()
        .find(|r| r.num > 0 && r.den > 0)
        .map_or(0.0, |r| r.as_f64());
    let (_, span) = tessera_model::plan::frames_at_times(&probe.packets, video.time_base, &[]);
    let picture = Picture {
        width: video.width,
        height: video.height,
        aspect: f64::from(video.width) * sar / f64::from(video.height.max(1)),
        seconds: span + if rate > 0.0 { 1.0 / rate } else { 0.0 },
    };
    let plan = plan(spec, picture);
    let times: Vec<f64> = plan.shots.iter().map(|s| s.time).collect();
    let (pts, _) = tessera_model::plan::frames_at_times(&probe.packets, video.time_base, &times);
    let stills = plan
        .shots
        .iter()
        .zip(pts)
        .map(|(shot, pts)| PlannedStill {
            pts,
            images: shot.images.clone(),
        })
        .collect();
    Some(PlannedThumbnails { stills, plan })
}

/// Sets a CPU-only run of a job apart from a run of the same plan on the GPU path: a job
/// that falls back to the CPU gets other work-area keys and events, so segments its GPU run
/// still has in flight can never mix into it (one encoder per rendition).
pub(crate) fn path_salt(hardware: Hardware) -> u64 {
    match hardware {
        Hardware::Cpu => 0x9e37_79b9_7f4a_7c15,
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
