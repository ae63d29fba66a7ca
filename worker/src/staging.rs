//! The worker's own directory under the staging root.
//!
//! Why: a killed predecessor of the same id may have left files there, and nothing in it
//! survives a restart. Other workers' directories on the same disk are never touched, and a
//! second worker of the same id is refused (its lock file is held).

use std::path::{Path, PathBuf};

use tessera_farm::FarmError;

/// Takes `<root>/<id>` for this worker: creates the root, holds the id's lock and empties
/// the directory. Returns the lock (to hold for the worker's life) and the directory.
pub(crate) fn claim(root: &Path, id: &str) -> Result<(std::fs::File, PathBuf), FarmError> {
    std::fs::create_dir_all(root).map_err(|e| FarmError::io(root, e))?;
    let own = dir_name(id);
    let lock = lock_staging(root, &own)?;
    let dir = root.join(&own);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| FarmError::io(&dir, e))?;
    Ok((lock, dir))
}

/// The name of worker `id`'s CUDA kernel cache directory in the staging root: apart from its
/// own directory, which [`claim`] empties at every start, and never a worker's directory name
/// (those have no leading dot). Only the service names one (the one-process CLI's workers,
/// built without the `service` feature, share its sandbox).
#[cfg_attr(not(feature = "service"), allow(dead_code))]
pub(crate) fn cuda_cache_name(id: &str) -> String {
    format!(".cuda-cache-{}", dir_name(id))
}

/// A worker id as one safe path component (`[A-Za-z0-9._-]`, no leading dot).
fn dir_name(id: &str) -> String {
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = safe.trim_start_matches('.');
    if safe.is_empty() {
        "worker".into()
    } else {
        safe.into()
    }
}

/// Holds `<root>/<id>.lock` for the worker's life; refused while another worker of the
/// same id uses the root.
fn lock_staging(root: &Path, id: &str) -> Result<std::fs::File, FarmError> {
    let path = root.join(format!("{id}.lock"));
    match tessera_farm::disk::try_lock_file(&path) {
        Ok(Some(file)) => Ok(file),
        Ok(None) => Err(FarmError::Io {
            path: path.display().to_string(),
            reason: format!("another worker with id '{id}' uses this staging directory"),
        }),
        Err(e) => Err(FarmError::io(&path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_owns_one_directory_of_the_staging_root() {
        assert_eq!(dir_name("w1"), "w1");
        assert_eq!(dir_name("../../etc"), "_.._etc");
        assert_eq!(dir_name("host:1234/x"), "host_1234_x");
        assert_eq!(dir_name(".."), "worker");
        let root = tempfile::tempdir().unwrap();
        let held = lock_staging(root.path(), "w1").unwrap();
        let err = lock_staging(root.path(), "w1").unwrap_err().to_string();
        assert!(err.contains("another worker with id 'w1'"), "{err}");
        assert!(lock_staging(root.path(), "w2").is_ok());
        drop(held);
        assert!(lock_staging(root.path(), "w1").is_ok());
    }
}
