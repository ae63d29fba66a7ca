//! The images of a package: the stills the segment workers took (poster, thumbnails, sprite
//! tiles) fetched from the work area, sprite sheets composed of the tiles, and the WebVTT
//! thumbnails track that points into the sheets.
//!
//! Why apart from packaging.rs: the video and audio are cut from stitched rungs, the images
//! come from the segment encodes; both end up as files under the package root, published
//! before the manifests.

use std::path::{Path, PathBuf};

use tessera_farm::sandbox::MediaOp;
use tessera_farm::FarmError;
use tessera_model::images::{SpriteRequest, SpriteResult};
use tessera_model::package::thumbnails::ThumbnailSpec;
use tessera_model::wire::keys;
use tessera_package::thumbnails::TILE_DIR;

use crate::parallel;
use crate::patience::patiently;
use crate::request::DispatchContext;
use crate::request::PlannedThumbnails;

/// Writes the package's images under `root` (tiles under `scratch`, which the caller
/// removes); the root-relative files to publish, sheets and track included.
pub(crate) async fn build(
    ctx: &DispatchContext,
    (job, plan): (&str, u64),
    spec: &ThumbnailSpec,
    thumbnails: &PlannedThumbnails,
    (root, scratch): (&Path, &Path),
) -> Result<Vec<String>, FarmError> {
    let mut wanted: Vec<&String> = thumbnails
        .stills
        .iter()
        .flat_map(|s| s.images.iter().map(|(_, rel)| rel))
        .collect();
    wanted.sort();
    wanted.dedup();
    let place = |rel: &str| {
        if rel.starts_with(TILE_DIR) {
            scratch.join(rel)
        } else {
            root.join(rel)
        }
    };
    let fetches: Vec<(String, PathBuf)> = wanted
        .iter()
        .map(|rel| (keys::still(job, plan, rel), place(rel)))
        .collect();
    let store = ctx.store.clone();
    let (_, err) = parallel::each(fetches, parallel::TRANSFERS, |(key, path)| {
        let store = store.clone();
        async move {
            if let Some(dir) = path.parent() {
                tokio::fs::create_dir_all(dir)
                    .await
                    .map_err(|e| FarmError::io(dir, e))?;
            }
            patiently("fetch still", || store.get_file(&key, &path)).await?;
            Ok(())
        }
    })
    .await;
    if let Some(e) = err {
        return Err(e);
    }
    let mut published: Vec<String> = wanted
        .iter()
        .filter(|rel| !rel.starts_with(TILE_DIR))
        .map(|rel| rel.to_string())
        .collect();
    let plan_images = &thumbnails.plan;
    if let Some(sprite) = &spec.sprite {
        for sheet in &plan_images.sheets {
            let output = root.join(&sheet.rel);
            if let Some(dir) = output.parent() {
                tokio::fs::create_dir_all(dir)
                    .await
                    .map_err(|e| FarmError::io(dir, e))?;
            }
            let op = MediaOp::Sprite(SpriteRequest {
                tiles: sheet.tiles.iter().map(|t| scratch.join(t)).collect(),
                columns: sprite.columns,
                rows: sprite.rows,
                tile_width: plan_images.tile.0,
                tile_height: plan_images.tile.1,
                format: spec.format,
                quality: spec.quality,
                output,
            });
            let (_, _): (SpriteResult, _) = ctx.sandbox.run(&op, ctx.limits, &mut |_| {}).await?;
            published.push(sheet.rel.clone());
        }
    }
    if let Some((rel, text)) = &plan_images.vtt {
        let path = root.join(rel);
        tokio::fs::write(&path, text)
            .await
            .map_err(|e| FarmError::io(&path, e))?;
        published.push(rel.clone());
    }
    Ok(published)
}
