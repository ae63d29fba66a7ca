//! The S3 store: tessera's [`Store`] on AWS S3 or an S3-compatible server (MinIO, Garage, Ceph
//! RGW), through aws-sdk-s3.
//!
//! Why: in the distributed farm the work area and the outputs live in a bucket that every
//! dispatcher and worker can reach. Bodies are streamed from and to files, never held whole in
//! memory; large files go up as multipart uploads, aborted on failure.
//!
//! Layout: `config` (how to reach and tune it) and `errors` (readable SDK errors) at the
//! bottom; `client` (the client, the bucket store and shared helpers) above them; then one
//! file per kind of operation, each importing only those: `read` (presign, list, head,
//! download), `multipart` (uploads, prefix deletes), `copy` (server-side copies pinned to
//! the ETag of the object read's `ObjectInfo` describes, single deletes), `delivery` (copies to destinations marked with the job that made them,
//! made once) and `abort` (creating and aborting multipart uploads, with the guards that
//! abort them when cancelled). This file only wires them into the [`Store`] trait.

mod abort;
mod client;
mod config;
mod copy;
mod delivery;
mod errors;
mod multipart;
mod read;

pub use client::{S3Client, S3Store, DELIVERY_MARK};
pub use config::S3Config;
pub use delivery::Delivered;
pub use read::ObjectInfo;

use std::path::Path;

use async_trait::async_trait;

use crate::store::{Store, Stored};
use crate::FarmError;

#[async_trait]
impl Store for S3Store {
    async fn put_file(&self, key: &str, src: &Path) -> Result<u64, FarmError> {
        Ok(multipart::put(self, key, src).await?.size)
    }

    async fn put_file_tagged(&self, key: &str, src: &Path) -> Result<Stored, FarmError> {
        multipart::put(self, key, src).await
    }

    async fn get_file(&self, key: &str, dst: &Path) -> Result<u64, FarmError> {
        read::get(self, key, dst).await
    }

    async fn exists(&self, key: &str) -> Result<bool, FarmError> {
        Ok(self.head(key).await?.is_some())
    }

    /// Treats `prefix` as a directory, like the local store: `jobs/a` and `jobs/a/` both
    /// delete `jobs/a/...` and never `jobs/ab/...`.
    async fn delete_prefix(&self, prefix: &str) -> Result<u64, FarmError> {
        multipart::delete_prefix(self, prefix).await
    }

    async fn delete(&self, key: &str) -> Result<(), FarmError> {
        S3Store::delete(self, key).await
    }
}
