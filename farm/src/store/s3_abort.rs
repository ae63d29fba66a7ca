//! Aborting multipart uploads and copies: on a failure, and from a guard when the future
//! doing one is dropped mid-way.
//!
//! Why a module of its own: both the streamed multipart upload and the multipart server-side
//! copy need it, and an incomplete upload left behind is stored (and billed) by the bucket
//! until a lifecycle rule removes it.

use super::s3::S3Store;
use super::s3_errors::sdk_err;

/// Aborts an upload, so its parts stop taking space; a failure is logged, not returned (the
/// caller already has the error that matters).
pub(super) async fn abort(store: &S3Store, key: &str, upload_id: &str) {
    let result = store
        .client
        .abort_multipart_upload()
        .bucket(&*store.bucket)
        .key(key)
        .upload_id(upload_id)
        .send()
        .await;
    match result {
        Ok(_) => tracing::debug!(bucket = %store.bucket, key, "aborted multipart upload"),
        Err(e) => tracing::warn!(
            bucket = %store.bucket,
            key,
            error = %sdk_err(key, "abort multipart upload", &e),
            "multipart upload left behind"
        ),
    }
}

/// Aborts the upload from a background task if a multipart upload or copy is cancelled
/// mid-way (its future dropped: a shutdown, a timeout), so no incomplete upload is left
/// for the bucket to store and bill.
pub(super) struct AbortGuard {
    pub(super) store: S3Store,
    pub(super) key: String,
    pub(super) upload_id: String,
    pub(super) armed: bool,
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (store, key, upload_id) = (
            self.store.clone(),
            std::mem::take(&mut self.key),
            std::mem::take(&mut self.upload_id),
        );
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move { abort(&store, &key, &upload_id).await });
            }
            Err(_) => tracing::warn!(
                bucket = %self.store.bucket,
                key = %key,
                "multipart upload cancelled outside a runtime; left behind"
            ),
        }
    }
}
