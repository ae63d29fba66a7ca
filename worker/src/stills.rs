//! A segment task's still images (a package's poster, thumbnails and sprite tiles): where the
//! encode writes them in staging, and their upload to the work area.
//!
//! Why beside the encode: the images are taken from the frames the encode decodes anyway;
//! they travel with the segment's renditions and are settled (uploaded, or removed when the
//! job ended meanwhile) with them.

use std::path::Path;

use tessera_farm::store::Store;
use tessera_farm::FarmError;
use tessera_model::images::StillShot;
use tessera_model::wire::SegmentTask;

/// The staging file of image `j` of still `i`.
fn staging_file(staging: &Path, i: usize, j: usize, ext: &str) -> std::path::PathBuf {
    staging.join(format!("still-{i}-{j}.{ext}"))
}

/// The still shots of `task` for the encode request, writing under `staging`.
pub(crate) fn shots(task: &SegmentTask, staging: &Path) -> Vec<StillShot> {
    task.stills
        .iter()
        .enumerate()
        .map(|(i, s)| StillShot {
            pts: s.pts,
            images: s
                .images
                .iter()
                .enumerate()
                .map(|(j, (image, _))| {
                    (
                        *image,
                        staging_file(staging, i, j, image.format.extension()),
                    )
                })
                .collect(),
        })
        .collect()
}

/// Uploads the images the encode wrote; the bytes stored.
pub(crate) async fn upload(
    store: &dyn Store,
    task: &SegmentTask,
    staging: &Path,
) -> Result<u64, FarmError> {
    let mut bytes = 0;
    for (i, s) in task.stills.iter().enumerate() {
        for (j, (image, key)) in s.images.iter().enumerate() {
            let file = staging_file(staging, i, j, image.format.extension());
            bytes += store.put_file(key, &file).await?;
        }
    }
    Ok(bytes)
}

/// Removes the uploaded images again (the job ended while they were stored).
pub(crate) async fn remove(store: &dyn Store, task: &SegmentTask) {
    for (_, key) in task.stills.iter().flat_map(|s| &s.images) {
        let _ = store.delete(key).await;
    }
}
