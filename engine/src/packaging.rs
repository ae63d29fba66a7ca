//! The package step: a job's streaming package (HLS, DASH, CMAF) cut from its stitched
//! rungs by stream copy, its manifests written from the files and checked like a strict
//! player would, then delivered media first and manifests last.
//!
//! Why after the stitch: each rung is stitched and passes the QC gate (every frame, in
//! order) before it is cut; cutting is a rewrap of packets at the IDRs the encoders put at
//! every media segment start, so no frame is encoded twice.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tessera_farm::sandbox::MediaOp;
use tessera_farm::FarmError;
use tessera_model::error_code::{ErrorClass, ErrorCode};
use tessera_model::package::{PackageSpec, SegmentType};
use tessera_model::segmented::{SegmentRequest, SegmentedTrack, StreamPick};
use tessera_model::wire::keys;
use tessera_model::wire::StitchTask;
use tessera_package::{subtitles, thumbnails};

use crate::package_assemble::{assemble, Assembly, RatePair};
use crate::package_images;
use crate::parallel;
use crate::patience::patiently;
use crate::request::{Destination, DispatchContext, JobPlan, JobRequest, PackageJob};
use crate::rollback::Rollback;

/// A package written and checked in staging, ready for delivery.
pub(crate) struct Built {
    /// The package root in staging.
    root: PathBuf,
    /// Media files (init and media segments), root-relative.
    media: Vec<String>,
    /// Manifests in publishing order (media playlists, then master and MPD).
    manifests: Vec<String>,
    /// Bytes of all files.
    pub bytes: u64,
    /// What the package left out of the source, in words, for the job's warnings.
    pub warnings: Vec<String>,
}

fn failed(package: &PackageJob, why: impl std::fmt::Display) -> FarmError {
    FarmError::Media {
        code: ErrorCode::QcFailed,
        class: ErrorClass::Abort,
        message: format!("package {}: {why}", package.destination),
    }
}

/// Cuts the rungs of the plan's package (outputs whose destination is
/// [`Destination::Rung`], stitched by `tasks`) into media segments, writes and checks the
/// manifests. `None` when the job has no package.
pub(crate) async fn build(
    ctx: &DispatchContext,
    plan: &JobPlan,
    tasks: &[StitchTask],
    staging: &Path,
) -> Result<Option<Built>, FarmError> {
    let req = &plan.req;
    let Some(package) = &req.package else {
        return Ok(None);
    };
    let spec = &package.spec;
    let (src, root) = (staging.join("package-src"), staging.join("package"));
    for dir in [&src, &root] {
        let _ = tokio::fs::remove_dir_all(dir).await;
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| FarmError::io(dir, e))?;
    }
    let written = segment_tracks(ctx, plan, spec, tasks, (&src, &root)).await?;
    let images = match (&spec.thumbnails, &plan.thumbnails) {
        (Some(t), Some(planned)) => {
            let job = (req.id.as_str(), plan.fingerprint);
            package_images::build(ctx, job, t, planned, (&root, &src)).await?
        }
        _ => Vec::new(),
    };
    // Text tracks as WebVTT renditions unless turned off; those left out are named.
    let (texts, warnings) = subtitles::carried(spec.subtitles, &plan.info.subtitles);
    let (source_rate, start_seconds) = source_timing(plan);
    let _ = tokio::fs::remove_dir_all(&src).await;
    // The sprite sheets (written above) as the MPD's thumbnail track.
    let tiles = match (&spec.thumbnails, &plan.thumbnails) {
        (Some(t), Some(planned)) if spec.format.has_dash() => {
            let size_of = |rel: &str| std::fs::metadata(root.join(rel)).ok().map(|m| m.len());
            thumbnails::tile_track(t, &planned.plan, size_of)
        }
        _ => None,
    };
    let assembly = Assembly {
        root: root.clone(),
        written,
        images,
        texts,
        source_rate,
        start_seconds,
        tiles,
        format: spec.format,
        ts: spec.segment_type == SegmentType::Ts,
        segment_seconds: spec.segment_seconds,
    };
    let assembled = tokio::task::spawn_blocking(move || assemble(assembly))
        .await
        .map_err(|e| FarmError::ChildCrashed {
            what: "package".into(),
            detail: e.to_string(),
        })?;
    let (media, manifests, bytes) = assembled.map_err(|why| failed(package, why))?;
    tracing::info!(
        job = %req.id, files = media.len() + manifests.len(), bytes,
        destination = %package.destination, "package written and checked"
    );
    Ok(Some(Built {
        root,
        media,
        manifests,
        bytes,
        warnings,
    }))
}

/// Fetches each rung's stitched file into `src` and cuts it into media segments under
/// `root`, then the audio tracks of the first rung; returns each track with its id.
async fn segment_tracks(
    ctx: &DispatchContext,
    plan: &JobPlan,
    spec: &PackageSpec,
    tasks: &[StitchTask],
    (src, root): (&Path, &Path),
) -> Result<Vec<(String, SegmentedTrack)>, FarmError> {
    let segment = |input: PathBuf, stream: StreamPick, dir: String| {
        MediaOp::Segment(SegmentRequest {
            input,
            stream,
            root: root.to_path_buf(),
            dir,
            ts: spec.segment_type == SegmentType::Ts,
            segment_seconds: spec.segment_seconds,
        })
    };
    let mut written: Vec<(String, SegmentedTrack)> = Vec::new();
    let mut audio_source: Option<(PathBuf, usize)> = None;
    for (out, task) in plan.req.outputs.iter().zip(tasks) {
        if out.destination != Destination::Rung {
            continue;
        }
        let name = out.rendition.name.clone();
        let local = src.join(format!("{name}.mp4"));
        patiently("fetch rung", || {
            ctx.store.get_file(&task.result_key, &local)
        })
        .await?;
        let op = segment(local.clone(), StreamPick::Video, name.clone());
        let (track, _) = ctx.sandbox.run(&op, ctx.limits, &mut |_| {}).await?;
        written.push((name, track));
        audio_source.get_or_insert((local, task.audio_tracks.len()));
    }
    if let Some((file, count)) = audio_source {
        for k in 0..count {
            let op = segment(file.clone(), StreamPick::Audio(k), format!("a{k}"));
            let (track, _) = ctx.sandbox.run(&op, ctx.limits, &mut |_| {}).await?;
            written.push((format!("a{k}"), track));
        }
    }
    Ok(written)
}

/// The source's nominal and average frame rates (for the variants' stated rate), and the
/// source time of the first frame shown (cue times count from it).
fn source_timing(plan: &JobPlan) -> ((RatePair, RatePair), f64) {
    let video_info = &plan.info.video;
    let as_pair = |r: tessera_model::probe::Rational| {
        (
            u32::try_from(r.num).unwrap_or(0),
            u32::try_from(r.den).unwrap_or(0),
        )
    };
    let source_rate = (
        as_pair(video_info.frame_rate),
        as_pair(video_info.avg_frame_rate),
    );
    let first_frame = plan
        .segments
        .first()
        .map(|p| p.first_frame_pts.unwrap_or(p.start_pts))
        .unwrap_or(0);
    (source_rate, video_info.time_base.seconds(first_frame))
}

/// Delivers a built package: media first, manifests last. On failure what of it was
/// delivered is removed again (a folder appears whole or not at all); what could not be is
/// noted in `rollback`.
pub(crate) async fn deliver(
    ctx: &DispatchContext,
    req: &JobRequest,
    plan: u64,
    built: &Built,
    rollback: &mut Rollback,
) -> Result<(), FarmError> {
    let Some(package) = &req.package else {
        return Ok(());
    };
    match &package.destination {
        Destination::File(dir) => {
            deliver_folder(&built.root, dir).await?;
            let files = built.media.len() + built.manifests.len();
            let destination = package.destination.to_string();
            tracing::info!(job = %req.id, %destination, files, bytes = built.bytes, "output delivered");
            Ok(())
        }
        Destination::Object { bucket, key } => {
            let Some(sink) = &ctx.sink else {
                return Err(failed(
                    package,
                    "this farm cannot deliver to object destinations",
                ));
            };
            let files: Vec<String> = built
                .media
                .iter()
                .chain(&built.manifests)
                .cloned()
                .collect();
            let (job, root, store) = (req.id.clone(), built.root.clone(), ctx.store.clone());
            let (_, err) = parallel::each(files, parallel::TRANSFERS, |rel: String| {
                let (work, path) = (keys::package_file(&job, plan, &rel), root.join(&rel));
                let store = store.clone();
                async move {
                    patiently("store package file", || store.put_file(&work, &path)).await?;
                    Ok(())
                }
            })
            .await;
            if let Some(e) = err {
                return Err(e);
            }
            // Files copied now (not found there from the run before a restart).
            let copied = Arc::new(AtomicUsize::new(0));
            let deliver_one = |rel: String| {
                let (work, dest) = (keys::package_file(&job, plan, &rel), format!("{key}{rel}"));
                let (sink, bucket) = (sink.clone(), bucket.clone());
                let copied = copied.clone();
                async move {
                    let done = patiently("deliver package file", || {
                        sink.deliver(&work, None, &bucket, &dest)
                    })
                    .await?;
                    if !done.earlier {
                        copied.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                }
            };
            // Media side by side; the manifests after them, one by one, master and MPD last.
            let (mut delivered, mut err) =
                parallel::each(built.media.clone(), parallel::TRANSFERS, deliver_one).await;
            for rel in &built.manifests {
                if err.is_some() {
                    break;
                }
                match deliver_one(rel.clone()).await {
                    Ok(()) => delivered.push(rel.clone()),
                    Err(e) => err = Some(e),
                }
            }
            if let Some(e) = err {
                let keys = delivered.iter().map(|rel| format!("{key}{rel}")).collect();
                rollback.remove_objects(sink, bucket, keys).await;
                return Err(e);
            }
            let destination = package.destination.to_string();
            let (files, bytes) = (delivered.len(), built.bytes);
            if copied.load(Ordering::Relaxed) == 0 {
                tracing::info!(job = %req.id, %destination, files, bytes,
                    "output already at its destination: the run before the restart copied it");
            } else {
                tracing::info!(job = %req.id, %destination, files, bytes, "output delivered");
            }
            Ok(())
        }
        Destination::Rung => Err(failed(package, "a package cannot be a rung")),
    }
}

/// Moves the package into the folder `dir` (which must not exist, or be empty): written
/// beside it under a temporary name and renamed, so the folder appears whole or not at all.
async fn deliver_folder(root: &Path, dir: &Path) -> Result<(), FarmError> {
    let (root, dir) = (root.to_path_buf(), dir.to_path_buf());
    tokio::task::spawn_blocking(move || {
        if dir.exists() {
            let empty = std::fs::read_dir(&dir)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            if !empty {
                return Err(FarmError::io(
                    &dir,
                    "the package folder exists and is not empty",
                ));
            }
            std::fs::remove_dir(&dir).map_err(|e| FarmError::io(&dir, e))?;
        }
        let tmp = tessera_model::stitch::temp_path(&dir);
        let _ = std::fs::remove_dir_all(&tmp);
        if std::fs::rename(&root, &tmp).is_err() {
            // Another file system: copy, then rename within the destination's.
            copy_tree(&root, &tmp).inspect_err(|_| {
                let _ = std::fs::remove_dir_all(&tmp);
            })?;
        }
        std::fs::rename(&tmp, &dir).map_err(|e| {
            let _ = std::fs::remove_dir_all(&tmp);
            FarmError::io(&dir, e)
        })
    })
    .await
    .map_err(|e| FarmError::ChildCrashed {
        what: "package delivery".into(),
        detail: e.to_string(),
    })?
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), FarmError> {
    std::fs::create_dir_all(to).map_err(|e| FarmError::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| FarmError::io(from, e))? {
        let entry = entry.map_err(|e| FarmError::io(from, e))?;
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(|e| FarmError::io(&target, e))?;
        }
    }
    Ok(())
}
