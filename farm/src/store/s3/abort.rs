//! Aborting multipart uploads and copies: on a failure, and from a guard when the future
//! doing one is dropped mid-way.
//!
//! Why a module of its own: both the streamed multipart upload and the multipart server-side
//! copy need it, and an incomplete upload left behind is stored (and billed) by the bucket
//! until a lifecycle rule removes it. They reach it as methods of [`S3Store`]
//! (`create_upload`, `abort_upload`), so it imports only the client below it.

use super::client::{Mark, S3Store, DELIVERY_MARK};
use super::errors::{sdk_err, store_err};
use crate::FarmError;

impl S3Store {
    /// Aborts an upload, so its parts stop taking space; a failure is logged, not returned
    /// (the caller already has the error that matters).
    pub(super) async fn abort_upload(&self, key: &str, upload_id: &str) {
        let result = self
            .client
            .abort_multipart_upload()
            .bucket(&*self.bucket)
            .key(key)
            .upload_id(upload_id)
            .send()
            .await;
        match result {
            Ok(_) => tracing::debug!(bucket = %self.bucket, key, "aborted multipart upload"),
            Err(e) => tracing::warn!(
                bucket = %self.bucket,
                key,
                error = %sdk_err(key, "abort multipart upload", &e),
                "multipart upload left behind"
            ),
        }
    }

    /// Creates a multipart upload for `key` (`what` names the operation in errors), carrying
    /// the delivery `mark` in its metadata when given (see delivery.rs), and returns the
    /// armed guard that aborts it (its `upload_id` is the upload's).
    ///
    /// Why the create runs on a task of its own: a caller cancelled while the create request
    /// is in flight would otherwise drop the only copy of an upload id the server has already
    /// handed out, leaving an upload nobody can abort. Dropped before the answer, this waits
    /// for it in the background and aborts what the server made.
    pub(super) async fn create_upload(
        &self,
        key: &str,
        what: &'static str,
        mark: Option<&Mark>,
    ) -> Result<AbortGuard, FarmError> {
        let request = {
            let (store, key) = (self.clone(), key.to_string());
            let mark = mark.cloned();
            async move {
                let mut create = store
                    .client
                    .create_multipart_upload()
                    .bucket(&*store.bucket)
                    .key(&key);
                if let Some(Mark {
                    value,
                    content_type,
                }) = mark
                {
                    create = create
                        .metadata(DELIVERY_MARK, value)
                        .set_content_type(content_type);
                }
                let created = create.send().await.map_err(|e| sdk_err(&key, what, &e))?;
                created
                    .upload_id()
                    .map(str::to_string)
                    .ok_or_else(|| store_err(&key, format!("{what}: no upload id")))
            }
        };
        let mut pending = PendingCreate {
            store: self.clone(),
            key: key.to_string(),
            request: Some(tokio::spawn(request)),
        };
        let answer = match pending.request.as_mut() {
            Some(request) => request.await,
            None => unreachable!("the request was set just above"),
        };
        pending.request = None;
        let upload_id = answer.map_err(|e| store_err(key, format!("{what}: {e}")))??;
        Ok(AbortGuard {
            store: self.clone(),
            key: key.to_string(),
            upload_id,
            armed: true,
        })
    }
}

/// A create request still in flight; dropped, it aborts the upload once the answer comes.
struct PendingCreate {
    store: S3Store,
    key: String,
    request: Option<tokio::task::JoinHandle<Result<String, FarmError>>>,
}

impl Drop for PendingCreate {
    fn drop(&mut self) {
        let Some(request) = self.request.take() else {
            return;
        };
        let (store, key) = (self.store.clone(), std::mem::take(&mut self.key));
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    if let Ok(Ok(upload_id)) = request.await {
                        store.abort_upload(&key, &upload_id).await;
                    }
                });
            }
            Err(_) => tracing::warn!(
                bucket = %store.bucket,
                key = %key,
                "multipart upload cancelled outside a runtime while being created"
            ),
        }
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
                rt.spawn(async move { store.abort_upload(&key, &upload_id).await });
            }
            Err(_) => tracing::warn!(
                bucket = %self.store.bucket,
                key = %key,
                "multipart upload cancelled outside a runtime; left behind"
            ),
        }
    }
}
