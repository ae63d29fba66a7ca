//! Server-side copies between buckets of one S3 endpoint, and single-object deletes.
//!
//! Why: a finished output is stitched into the work area by a worker and then moved to the
//! user's destination; a server-side copy moves no bytes through the dispatcher. Objects up
//! to 5 GiB take one CopyObject; larger ones a multipart upload of UploadPartCopy ranges,
//! aborted on failure so nothing partial ever appears at the destination.

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, MetadataDirective};
use futures_util::{StreamExt, TryStreamExt};

use super::client::{Mark, S3Store, DELIVERY_MARK};
use super::errors::{sdk_err, store_err};
use super::read::{Headed, ObjectInfo};
use crate::store::validate_key;
use crate::FarmError;

/// Part copies in flight.
const COPIES_IN_FLIGHT: usize = 4;

/// `x-amz-copy-source` for `bucket/key`: the key percent-encoded except `/` and unreserved
/// characters (keys may hold spaces and other characters users type).
fn copy_source(bucket: &str, key: &str) -> String {
    let mut out = format!("{bucket}/");
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The byte ranges (inclusive ends) of a multipart copy of `size` bytes in `part`-byte parts.
fn copy_ranges(size: u64, part: u64) -> Vec<(i32, u64, u64)> {
    (0..size.div_ceil(part))
        .map(|i| {
            let start = i * part;
            let end = (start + part).min(size) - 1;
            (i as i32 + 1, start, end)
        })
        .collect()
}

/// What a copy reads: the source as `x-amz-copy-source` names it, the ETag every request
/// requires of it, and `bucket/key` for errors and logs.
struct Pin {
    source: String,
    if_match: String,
    named: String,
}

/// The error of a failed copy request `op` to `key`: a refused precondition (HTTP 412) says
/// the source changed; anything else as [`sdk_err`] reads it.
fn copy_err<E>(key: &str, pin: &Pin, op: &str, err: &SdkError<E, HttpResponse>) -> FarmError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match err {
        SdkError::ServiceError(se) if se.raw().status().as_u16() == 412 => store_err(
            key,
            format!(
                "{op}: the source {} changed since it was checked (no longer ETag {}): \
                 nothing copied",
                pin.named, pin.if_match
            ),
        ),
        _ => sdk_err(key, op, err),
    }
}

/// Refuses a copy of `src` (of bucket `src_bucket`) to `key` unless it is the object of
/// ETag `etag` (when given): the error names both tags.
fn still_checked(
    src_bucket: &str,
    src: &ObjectInfo,
    etag: Option<&str>,
    key: &str,
) -> Result<(), FarmError> {
    match etag.map(|e| e.trim_matches('"')) {
        Some(wanted) if src.etag.trim_matches('"') != wanted => Err(store_err(
            key,
            format!(
                "copy: the source {src_bucket}/{} is not the object that was checked (ETag {} \
                 now, {wanted} when it passed): nothing copied",
                src.key, src.etag
            ),
        )),
        _ => Ok(()),
    }
}

impl S3Store {
    /// Copies `src_key` of bucket `src_bucket` (same endpoint) to `key` in this store's bucket,
    /// server-side; returns the size. The destination appears whole or not at all, and holds
    /// the object as this call's HEAD found it (see [`S3Store::copy_version`]).
    pub async fn copy_from(
        &self,
        src_bucket: &str,
        src_key: &str,
        key: &str,
    ) -> Result<u64, FarmError> {
        self.copy_tagged(src_bucket, src_key, None, key).await
    }

    /// [`S3Store::copy_from`], and when `etag` is given, only the object of that ETag: a
    /// source that is another object now (its HEAD answers another ETag, or it is replaced
    /// between the HEAD and the copy) is not copied, and the error names both tags.
    ///
    /// Why: the stitch that passed the QC gate reports the ETag of the object it stored; a
    /// later writer of the same work key (a duplicate stitch) must not have its object
    /// delivered in its place (review N6).
    pub async fn copy_tagged(
        &self,
        src_bucket: &str,
        src_key: &str,
        etag: Option<&str>,
        key: &str,
    ) -> Result<u64, FarmError> {
        let src = self.checked_source(src_bucket, src_key, etag, key).await?;
        self.copy_version(src_bucket, &src.info, key).await
    }

    /// The HEAD of the source `src_key` of bucket `src_bucket` for a copy to `key`, refused
    /// unless it is the object of ETag `etag` (when given).
    pub(super) async fn checked_source(
        &self,
        src_bucket: &str,
        src_key: &str,
        etag: Option<&str>,
        key: &str,
    ) -> Result<Headed, FarmError> {
        validate_key(key)?;
        let src = self
            .client_store(src_bucket)
            .head_full(src_key)
            .await?
            .ok_or_else(|| store_err(src_key, "copy: no such object"))?;
        still_checked(src_bucket, &src.info, etag, key)?;
        Ok(src)
    }

    /// Copies the object of bucket `src_bucket` that `src` describes (a HEAD or listing of it)
    /// to `key` in this store's bucket, server-side; returns the size. Every request is pinned
    /// to `src.etag` (`x-amz-copy-source-if-match`): if the source was replaced since `src` was
    /// taken, or is replaced between the parts of a multipart copy, the copy fails (nothing at
    /// the destination) instead of delivering another object, or a splice of two.
    ///
    /// Why: a late duplicate stitch may overwrite the work object that passed QC while it is
    /// being delivered.
    pub async fn copy_version(
        &self,
        src_bucket: &str,
        src: &ObjectInfo,
        key: &str,
    ) -> Result<u64, FarmError> {
        self.copy_pinned(src_bucket, src, key, None).await
    }

    /// [`S3Store::copy_version`], the copy carrying `mark` (the delivery mark and the
    /// source's content type) as its metadata when given, in place of the source's.
    pub(super) async fn copy_pinned(
        &self,
        src_bucket: &str,
        src: &ObjectInfo,
        key: &str,
        mark: Option<&Mark>,
    ) -> Result<u64, FarmError> {
        validate_key(key)?;
        let pin = Pin {
            source: copy_source(src_bucket, &src.key),
            if_match: format!("\"{}\"", src.etag.trim_matches('"')),
            named: format!("{src_bucket}/{}", src.key),
        };
        if src.size <= self.tuning.single_copy_max {
            let mut copy = self
                .client
                .copy_object()
                .bucket(&*self.bucket)
                .key(key)
                .copy_source(&pin.source)
                .copy_source_if_match(&pin.if_match);
            if let Some(mark) = mark {
                copy = copy
                    .metadata_directive(MetadataDirective::Replace)
                    .metadata(DELIVERY_MARK, &mark.value)
                    .set_content_type(mark.content_type.clone());
            }
            copy.send()
                .await
                .map_err(|e| copy_err(key, &pin, "copy", &e))?;
        } else {
            self.copy_multipart(&pin, key, src.size, mark).await?;
        }
        tracing::debug!(bucket = %self.bucket, key, size = src.size, from = %pin.named,
            etag = %src.etag, "copied object");
        Ok(src.size)
    }

    /// Deletes one object (absent is fine). Why: undoing a delivery when a later output of
    /// the same job fails, so a failed job leaves nothing at its destinations.
    pub async fn delete(&self, key: &str) -> Result<(), FarmError> {
        validate_key(key)?;
        self.client
            .delete_object()
            .bucket(&*self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| sdk_err(key, "delete", &e))?;
        Ok(())
    }

    fn client_store(&self, bucket: &str) -> S3Store {
        S3Store {
            client: self.client.clone(),
            presigner: self.presigner.clone(),
            bucket: bucket.into(),
            tuning: self.tuning,
        }
    }

    async fn copy_multipart(
        &self,
        pin: &Pin,
        key: &str,
        size: u64,
        mark: Option<&Mark>,
    ) -> Result<(), FarmError> {
        let mut guard = self
            .create_upload(key, "create multipart copy", mark)
            .await?;
        let upload_id = guard.upload_id.clone();
        let parts = futures_util::stream::iter(copy_ranges(size, self.tuning.copy_part_size))
            .map(|(number, start, end)| {
                let upload_id = upload_id.clone();
                async move {
                    let out = self
                        .client
                        .upload_part_copy()
                        .bucket(&*self.bucket)
                        .key(key)
                        .upload_id(upload_id)
                        .part_number(number)
                        .copy_source(&pin.source)
                        .copy_source_if_match(&pin.if_match)
                        .copy_source_range(format!("bytes={start}-{end}"))
                        .send()
                        .await
                        .map_err(|e| copy_err(key, pin, &format!("copy part {number}"), &e))?;
                    let etag = out
                        .copy_part_result()
                        .and_then(|r| r.e_tag())
                        .ok_or_else(|| store_err(key, "copy part: no ETag"))?;
                    Ok::<_, FarmError>(
                        CompletedPart::builder()
                            .part_number(number)
                            .e_tag(etag)
                            .build(),
                    )
                }
            })
            .buffer_unordered(COPIES_IN_FLIGHT)
            .try_collect::<Vec<_>>()
            .await;
        let completed = match parts {
            Ok(mut parts) => {
                parts.sort_by_key(|p| p.part_number());
                self.client
                    .complete_multipart_upload()
                    .bucket(&*self.bucket)
                    .key(key)
                    .upload_id(&upload_id)
                    .multipart_upload(
                        CompletedMultipartUpload::builder()
                            .set_parts(Some(parts))
                            .build(),
                    )
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| sdk_err(key, "complete multipart copy", &e))
            }
            Err(e) => Err(e),
        };
        if completed.is_err() {
            // Still armed while aborting: cancelled here, the guard aborts in the background.
            self.abort_upload(key, &upload_id).await;
        }
        guard.armed = false;
        completed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_sources_are_percent_encoded() {
        assert_eq!(copy_source("b", "dir/a b+c.mp4"), "b/dir/a%20b%2Bc.mp4");
        assert_eq!(copy_source("b", "x_y-z~.mp4"), "b/x_y-z~.mp4");
    }

    #[test]
    fn copy_ranges_cover_the_object() {
        const COPY_PART: u64 = 1024;
        assert_eq!(copy_ranges(10, COPY_PART), vec![(1, 0, 9)]);
        let r = copy_ranges(2 * COPY_PART + 5, COPY_PART);
        assert_eq!(r.len(), 3);
        assert_eq!(r[1], (2, COPY_PART, 2 * COPY_PART - 1));
        assert_eq!(r[2], (3, 2 * COPY_PART, 2 * COPY_PART + 4));
    }
}
