//! The package step: a job's streaming package (HLS, DASH, CMAF) cut from its stitched
//! rungs by stream copy, its manifests written from the files and checked like a strict
//! player would, then delivered media first and manifests last.
//!
//! Why after the stitch: each rung is stitched and passes the QC gate (every frame, in
//! order) before it is cut; cutting is a rewrap of packets at the IDRs the encoders put at
//! every media segment start, so no frame is encoded twice.

use std::path::{Path, PathBuf};

use tessera_farm::sandbox::MediaOp;
use tessera_farm::FarmError;
use tessera_model::error_code::{ErrorClass, ErrorCode};
use tessera_model::package::SegmentType;
use tessera_model::segmented::{SegmentRequest, SegmentedTrack, StreamPick};
use tessera_model::wire::keys;
use tessera_model::wire::StitchTask;
use tessera_package::assemble;
use tessera_package::{subtitles, thumbnails, Package, TrackKind};

use crate::package_images;
use crate::parallel;
use crate::patience::patiently;
use crate::prepare::Prepared;
use crate::request::{Destination, DispatchContext, JobRequest, PackageJob};

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

/// Cuts the rungs of `req`'s package (outputs whose destination is [`Destination::Rung`],
/// stitched by `tasks`) into media segments, writes and checks the manifests. `None` when
/// the job has no package.
pub(crate) async fn build(
    ctx: &DispatchContext,
    req: &JobRequest,
    prepared: &Prepared,
    tasks: &[StitchTask],
    staging: &Path,
) -> Result<Option<Built>, FarmError> {
    let Some(package) = &req.package else {
        return Ok(None);
    };
    let spec = &package.spec;
    let ts = spec.segment_type == SegmentType::Ts;
    let (src, root) = (staging.join("package-src"), staging.join("package"));
    for dir in [&src, &root] {
        let _ = tokio::fs::remove_dir_all(dir).await;
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| FarmError::io(dir, e))?;
    }
    let segment = |input: PathBuf, stream: StreamPick, dir: String| {
        MediaOp::Segment(SegmentRequest {
            input,
            stream,
            root: root.clone(),
            dir,
            ts,
            segment_seconds: spec.segment_seconds,
        })
    };
    let mut written: Vec<(String, SegmentedTrack)> = Vec::new();
    let mut audio_source: Option<(PathBuf, usize)> = None;
    for (out, task) in req.outputs.iter().zip(tasks) {
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
    let images = match (&spec.thumbnails, &prepared.thumbnails) {
        (Some(t), Some(planned)) => {
            let job = (req.id.as_str(), prepared.fingerprint);
            package_images::build(ctx, job, t, planned, (&root, &src)).await?
        }
        _ => Vec::new(),
    };
    // Text tracks as WebVTT renditions unless turned off; those left out are named.
    let (texts, warnings) = subtitles::carried(spec.subtitles, &prepared.info.subtitles);
    let video_info = &prepared.info.video;
    // The source's nominal and average frame rates, for the variants' stated rate.
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
    // Cue times count from the first frame shown (its source time).
    let first_frame = prepared
        .plans
        .first()
        .map(|p| p.first_frame_pts.unwrap_or(p.start_pts))
        .unwrap_or(0);
    let start_seconds = video_info.time_base.seconds(first_frame);
    let _ = tokio::fs::remove_dir_all(&src).await;
    // The sprite sheets (written above) as the MPD's thumbnail track.
    let tiles = match (&spec.thumbnails, &prepared.thumbnails) {
        (Some(t), Some(planned)) if spec.format.has_dash() => {
            let size_of = |rel: &str| std::fs::metadata(root.join(rel)).ok().map(|m| m.len());
            thumbnails::tile_track(t, &planned.plan, size_of)
        }
        _ => None,
    };
    let (format, seconds) = (spec.format, spec.segment_seconds);
    let package_for_errors = package.clone();
    let root_for_work = root.clone();
    let assembled = tokio::task::spawn_blocking(move || {
        let root = root_for_work;
        let read = |rel: &str| std::fs::read(root.join(rel)).ok();
        let mut tracks = written
            .iter()
            .map(|(id, w)| assemble::track(id, w, &read))
            .collect::<Result<Vec<_>, String>>()?;
        // The source's nominal frame rate when it has a constant one, not the rung's
        // measured average (30.003 for a 30/1 source).
        for t in &mut tracks {
            if let TrackKind::Video { frame_rate, .. } = &mut t.kind {
                *frame_rate = assemble::frame_rate(source_rate.0, source_rate.1, *frame_rate);
            }
        }
        let video = written.iter().zip(&tracks).find(|(_, t)| t.kind.is_video());
        let mut media_text = Vec::new();
        if let Some(((_, w), video)) = video.map(|(w, t)| (w, t.clone())) {
            for (k, source) in texts.iter().enumerate() {
                let text = subtitles::TextTrack {
                    language: source.language.clone().unwrap_or_else(|| "und".into()),
                    cues: subtitles::cues_from_source(&source.cues, start_seconds, video.seconds()),
                };
                let both = (format.has_hls(), format.has_dash());
                let track = subtitles::write_track(
                    &format!("s{k}"),
                    &text,
                    &video,
                    w.first_seconds,
                    both,
                    &root,
                )
                .map_err(|e| format!("writing subtitles s{k}: {e}"))?;
                media_text.extend(track.segments.iter().map(|s| s.uri.clone()));
                if let TrackKind::Subtitles { file: Some(f), .. } = &track.kind {
                    if !media_text.contains(f) {
                        media_text.push(f.clone());
                    }
                }
                tracks.push(track);
            }
        }
        let media: Vec<String> = written
            .iter()
            .flat_map(|(_, w)| {
                w.init
                    .iter()
                    .cloned()
                    .chain(w.segments.iter().map(|s| s.0.clone()))
            })
            .chain(images)
            .chain(media_text)
            .collect();
        let pkg = Package {
            tracks,
            hls_master: format.has_hls().then(|| "master.m3u8".to_string()),
            dash_manifest: format.has_dash().then(|| "manifest.mpd".to_string()),
            ts,
            segment_seconds: seconds,
            tiles,
        };
        let manifests = assemble::write_manifests(&pkg, &root)
            .map_err(|e| format!("writing the manifests: {e}"))?;
        let problems = assemble::check(&pkg, &root);
        if !problems.is_empty() {
            return Err(format!("failed its checks: {}", problems.join("; ")));
        }
        let bytes = media
            .iter()
            .chain(&manifests)
            .filter_map(|rel| std::fs::metadata(root.join(rel)).ok())
            .map(|m| m.len())
            .sum();
        Ok((media, manifests, bytes))
    })
    .await
    .map_err(|e| FarmError::ChildCrashed {
        what: "package".into(),
        detail: e.to_string(),
    })?;
    let (media, manifests, bytes) = assembled.map_err(|why| failed(&package_for_errors, why))?;
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

/// Delivers a built package: media first, manifests last. On failure nothing of it stays at
/// the destination.
pub(crate) async fn deliver(
    ctx: &DispatchContext,
    req: &JobRequest,
    plan: u64,
    built: &Built,
) -> Result<(), FarmError> {
    let Some(package) = &req.package else {
        return Ok(());
    };
    match &package.destination {
        Destination::File(dir) => deliver_folder(&built.root, dir).await,
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
            let deliver_one = |rel: String| {
                let (work, dest) = (keys::package_file(&job, plan, &rel), format!("{key}{rel}"));
                let (sink, bucket) = (sink.clone(), bucket.clone());
                async move {
                    patiently("deliver package file", || {
                        sink.deliver(&work, &bucket, &dest)
                    })
                    .await?;
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
                for rel in &delivered {
                    sink.remove(bucket, &format!("{key}{rel}")).await;
                }
                return Err(e);
            }
            Ok(())
        }
        Destination::Rung => Err(failed(package, "a package cannot be a rung")),
    }
}

/// Removes a delivered package again (a later step of the job failed).
pub(crate) async fn undeliver(ctx: &DispatchContext, req: &JobRequest, built: &Built) {
    let Some(package) = &req.package else { return };
    match &package.destination {
        Destination::File(dir) => {
            let _ = tokio::fs::remove_dir_all(dir).await;
        }
        Destination::Object { bucket, key } => {
            if let Some(sink) = &ctx.sink {
                for rel in built.media.iter().chain(&built.manifests) {
                    sink.remove(bucket, &format!("{key}{rel}")).await;
                }
            }
        }
        Destination::Rung => {}
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
        let tmp = tessera_media::temp_path(&dir);
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
