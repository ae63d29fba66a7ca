//! A worker's own fitness to take work: a staging disk below its free-space floor makes the
//! worker unfit until space returns.
//!
//! Why: a fault of the worker is not the task's. A worker with a full disk that kept taking
//! tasks would fail each within seconds, free its slot at once, attract a disproportionate
//! share of redeliveries and spend the delivery limits of segments across the farm. Instead
//! its tasks go back as fresh messages and it stops consuming until the condition clears.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// Whether the worker may take work, and why not.
pub struct Fitness {
    staging_dir: PathBuf,
    min_free_bytes: u64,
    unfit: Mutex<Option<String>>,
}

impl Fitness {
    /// A fit worker whose staging disk must keep `min_free_bytes` free.
    pub fn new(staging_dir: PathBuf, min_free_bytes: u64) -> Self {
        Fitness {
            staging_dir,
            min_free_bytes,
            unfit: Mutex::new(None),
        }
    }

    /// Stops the worker taking work until [`Fitness::is_fit`] finds the disk has room again.
    pub fn pause(&self, reason: &str) {
        let mut unfit = self.unfit.lock().unwrap_or_else(|p| p.into_inner());
        if unfit.is_none() {
            tracing::warn!(
                reason,
                "worker unfit: it stops taking work until this clears"
            );
        }
        *unfit = Some(reason.to_string());
    }

    /// Whether the worker may take work; a pause ends once the staging disk has its floor
    /// free again.
    pub fn is_fit(&self) -> bool {
        let mut unfit = self.unfit.lock().unwrap_or_else(|p| p.into_inner());
        if unfit.is_none() {
            return true;
        }
        if tessera_farm::disk::free_bytes(&self.staging_dir) >= self.min_free_bytes {
            tracing::info!("worker fit again: it takes work");
            *unfit = None;
            return true;
        }
        false
    }

    /// Why the worker is unfit now (`None` when fit), for health checks.
    pub fn reason(&self) -> Option<String> {
        self.unfit.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Returns once the worker is fit (checked every two seconds).
    pub async fn wait_fit(&self) {
        while !self.is_fit() {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
}

/// The worker's fault behind `err` when a write failed for want of space (`ENOSPC`,
/// `EDQUOT`), whether in this process (a download) or in a media child (a muxer); other
/// errors as they are.
///
/// Why: a disk that fills during a task (a neighbour's download, logs, another container
/// on the node) fails the write with an I/O error that would otherwise count against the
/// task's deliveries; it is the worker that must pause, not the segment that must fail.
pub fn disk_full_is_unfit(err: tessera_farm::FarmError) -> tessera_farm::FarmError {
    if matches!(err, tessera_farm::FarmError::WorkerUnfit { .. }) {
        return err;
    }
    let text = err.to_string();
    let signs = [
        "No space left on device",
        "os error 28",
        "Disk quota exceeded",
        "os error 122",
    ];
    if signs.iter().any(|s| text.contains(s)) {
        tessera_farm::FarmError::WorkerUnfit {
            reason: format!("staging disk full: {text}"),
            pause: true,
        }
    } else {
        err
    }
}

/// Fails as unfit (another worker may have them) when this worker's FFmpeg (`caps`, as its
/// media child says) lacks an encoder `task` needs: a software video encoder (when
/// `software`) or an image encoder for its stills.
pub(crate) fn check_encoders(
    task: &tessera_model::wire::SegmentTask,
    software: bool,
    caps: &tessera_model::capabilities::Capabilities,
) -> Result<(), tessera_farm::FarmError> {
    let unfit = |reason: String| tessera_farm::FarmError::WorkerUnfit {
        reason,
        pause: false,
    };
    if software {
        for (spec, _) in &task.renditions {
            if !caps.software_encoder(spec.codec) {
                return Err(unfit(format!(
                    "this worker's FFmpeg has no {} encoder",
                    tessera_model::settings::encoder_name(spec.codec)
                )));
            }
        }
    }
    let mut images = task.stills.iter().flat_map(|s| &s.images);
    if let Some((image, _)) = images.find(|(i, _)| !caps.image_encoder(i.format)) {
        return Err(unfit(format!(
            "this worker's FFmpeg cannot write {:?} images",
            image.format
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_that_found_no_space_are_the_workers_fault() {
        use tessera_farm::FarmError;
        let enospc = std::io::Error::from_raw_os_error(28);
        let io = FarmError::io(std::path::Path::new("/staging/chunk.nut"), enospc);
        let child = FarmError::Media {
            code: tessera_model::error_code::ErrorCode::WriteFailed,
            class: tessera_model::error_code::ErrorClass::Retry,
            message: "out.nut: write failed: packet: No space left on device".into(),
        };
        for err in [io, child] {
            match disk_full_is_unfit(err) {
                FarmError::WorkerUnfit { reason, pause } => {
                    assert!(pause && reason.starts_with("staging disk full"), "{reason}")
                }
                other => panic!("not unfit: {other}"),
            }
        }
        let other = FarmError::io(std::path::Path::new("/x"), "permission denied");
        assert!(matches!(disk_full_is_unfit(other), FarmError::Io { .. }));
    }

    #[test]
    fn a_pause_lasts_while_the_disk_is_short_of_its_floor() {
        let dir = tempfile::tempdir().unwrap();
        let short = Fitness::new(dir.path().into(), u64::MAX - 1);
        assert!(short.is_fit(), "fit until a fault pauses it");
        short.pause("staging disk full");
        assert!(!short.is_fit());
        assert_eq!(short.reason().as_deref(), Some("staging disk full"));
        let roomy = Fitness::new(dir.path().into(), 1);
        roomy.pause("staging disk full");
        assert!(roomy.is_fit(), "space returned: fit again");
        assert_eq!(roomy.reason(), None);
    }
}
