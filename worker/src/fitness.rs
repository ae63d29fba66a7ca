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

#[cfg(test)]
mod tests {
    use super::*;

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
