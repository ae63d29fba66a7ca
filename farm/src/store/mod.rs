//! The object-store abstraction: what the farm needs from S3, with a local-directory store.
//!
//! Why a trait: work areas live in S3 in the distributed farm and in a directory on one
//! machine; the dispatcher and worker code is the same for both.

mod local;
mod s3;

pub use local::LocalStore;
pub use s3::{Delivered, ObjectInfo, S3Client, S3Config, S3Store, DELIVERY_MARK};

use std::path::Path;

use async_trait::async_trait;

use crate::FarmError;

/// An object store holding files under keys.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Uploads the file at `src` to `key`, replacing any object there; returns its size.
    /// The object appears whole or not at all.
    async fn put_file(&self, key: &str, src: &Path) -> Result<u64, FarmError>;
    /// [`Store::put_file`], also returning the stored object's version tag (the S3 ETag)
    /// where the store has one. Why: a stitch that passed the QC gate names the exact object
    /// it stored, so the delivery copies that object and no later writer's (review N6).
    async fn put_file_tagged(&self, key: &str, src: &Path) -> Result<Stored, FarmError> {
        Ok(Stored {
            size: self.put_file(key, src).await?,
            etag: None,
        })
    }
    /// Downloads `key` into the file `dst`; returns its size.
    async fn get_file(&self, key: &str, dst: &Path) -> Result<u64, FarmError>;
    /// Whether `key` exists.
    async fn exists(&self, key: &str) -> Result<bool, FarmError>;
    /// Deletes every object under `prefix`; returns how many.
    async fn delete_prefix(&self, prefix: &str) -> Result<u64, FarmError>;
    /// Deletes one object (absent is fine). Why: a worker whose upload may have missed its
    /// ended job's cleanup removes what it wrote.
    async fn delete(&self, key: &str) -> Result<(), FarmError>;
}

/// An object just stored: its size and, where the store tags versions, its ETag (without
/// quotes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Bytes stored.
    pub size: u64,
    /// The ETag the store answered for this write; `None` where the store has none.
    pub etag: Option<String>,
}

/// Checks an object key: relative, `/`-separated, no empty, `.` or `..` parts, UTF-8
/// without control characters or backslashes (people name uploads in their own languages),
/// at most 1024 bytes (S3's limit).
///
/// Why: keys come from users (destinations, uploads); a key must never escape its bucket or
/// the local store's root directory.
pub fn validate_key(key: &str) -> Result<(), FarmError> {
    let ok = !key.is_empty()
        && key.len() <= 1024
        && !key.starts_with('/')
        && key.chars().all(|c| !c.is_control() && c != '\\')
        && key
            .trim_end_matches('/')
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..");
    if ok {
        Ok(())
    } else {
        Err(FarmError::InvalidKey(key.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::validate_key;

    #[test]
    fn keys() {
        for good in [
            "jobs/a/chunks/000001.nut",
            "a",
            "in/My Video (1).mp4",
            "jobs/a/",
            "in/vidéo été 🎬.mp4",
            "in/動画.mov",
        ] {
            assert!(validate_key(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "a/../b",
            "..",
            "a//b",
            "a/./b",
            "a\\b",
            "a\u{0}b",
            "a\u{7f}b",
            "a\u{85}b",
            "a\nb",
            &"k".repeat(1025),
        ] {
            assert!(validate_key(bad).is_err(), "{bad:?}");
        }
    }
}
