//! The S3 store's writes: uploads (one streamed PutObject, or a multipart upload whose parts
//! are streamed from the file a few at a time and which is aborted on any failure or
//! cancellation, so no parts are left behind), and batched prefix deletes.
//!
//! Why a module of its own: the part plan and the abort on failure (through the guard of
//! `abort`) are the subtle part of the S3 store; keeping them apart from the client and the
//! reads keeps both files readable.

use std::path::Path;

use aws_sdk_s3::primitives::{ByteStream, Length};
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, Delete, ObjectIdentifier};
use futures_util::{StreamExt, TryStreamExt};

use super::client::{non_empty, validate_prefix, S3Store};
use super::config::MIB;
use super::errors::{sdk_err, store_err};
use crate::store::{validate_key, Stored};
use crate::FarmError;

/// The smallest part S3 accepts (except the last).
const MIN_PART_SIZE: u64 = 5 * MIB;
/// The largest part S3 accepts.
const MAX_PART_SIZE: u64 = 5 * 1024 * MIB;
/// The most parts one upload may have.
const MAX_PARTS: u64 = 10_000;
/// Parts in flight at once: enough to fill a link, few enough to stay gentle on small hosts.
/// Each part is streamed from the file, so memory does not grow with the part size.
const PARTS_IN_FLIGHT: usize = 4;
/// S3 deletes at most 1000 keys per DeleteObjects and lists at most 1000 per page.
const DELETE_BATCH: usize = 1000;

/// How a file is cut into parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PartPolicy {
    part_size: u64,
}

/// One part: its number (from 1), where it starts in the file, and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Part {
    number: i32,
    offset: u64,
    len: u64,
}

impl PartPolicy {
    /// Parts of `part_size` bytes, kept within S3's limits (5 MiB to 5 GiB).
    fn new(part_size: u64) -> Self {
        PartPolicy {
            part_size: part_size.clamp(MIN_PART_SIZE, MAX_PART_SIZE),
        }
    }

    /// The parts of a file of `size` bytes: contiguous, covering it exactly, at most 10000
    /// (the part size grows, in whole MiB, for files that would need more).
    fn plan(&self, size: u64) -> Vec<Part> {
        let needed = size.div_ceil(MAX_PARTS).div_ceil(MIB) * MIB;
        let part_size = self.part_size.max(needed);
        let count = size.div_ceil(part_size).max(1);
        (0..count)
            .map(|i| {
                let offset = i * part_size;
                Part {
                    number: i as i32 + 1,
                    offset,
                    len: part_size.min(size - offset),
                }
            })
            .collect()
    }
}

impl S3Store {
    /// Keys that have an unfinished multipart upload under `prefix`. Why: a failed upload
    /// must leave none behind; operators and tests check that here.
    pub async fn incomplete_uploads(&self, prefix: &str) -> Result<Vec<String>, FarmError> {
        validate_prefix(prefix)?;
        let out = self
            .client
            .list_multipart_uploads()
            .bucket(&*self.bucket)
            .set_prefix(non_empty(prefix))
            .send()
            .await
            .map_err(|e| sdk_err(prefix, "list multipart uploads", &e))?;
        Ok(out
            .uploads()
            .iter()
            .filter_map(|u| u.key().map(str::to_string))
            .collect())
    }
}

/// `Store::put_file`: one streamed PutObject below the multipart threshold, else a multipart
/// upload; returns the size and the ETag the store answered.
pub(super) async fn put(store: &S3Store, key: &str, src: &Path) -> Result<Stored, FarmError> {
    validate_key(key)?;
    let meta = tokio::fs::metadata(src)
        .await
        .map_err(|e| FarmError::io(src, e))?;
    if !meta.is_file() {
        return Err(FarmError::io(src, "not a regular file"));
    }
    let size = meta.len();
    let etag = if size >= store.tuning.multipart_threshold {
        put_multipart(store, key, src, size).await?
    } else {
        let body = ByteStream::from_path(src)
            .await
            .map_err(|e| FarmError::io(src, e))?;
        store
            .client
            .put_object()
            .bucket(&*store.bucket)
            .key(key)
            .content_length(size as i64)
            .body(body)
            .send()
            .await
            .map_err(|e| sdk_err(key, "put", &e))?
            .e_tag
    };
    let etag = etag.map(|e| e.trim_matches('"').to_string());
    tracing::debug!(bucket = %store.bucket, key, size, etag = ?etag, "stored object");
    Ok(Stored { size, etag })
}

/// Uploads `src` (`size` bytes) to `key` as a multipart upload; aborts it on any failure.
/// Returns the completed object's ETag.
async fn put_multipart(
    store: &S3Store,
    key: &str,
    src: &Path,
    size: u64,
) -> Result<Option<String>, FarmError> {
    let mut guard = store
        .create_upload(key, "create multipart upload", None)
        .await?;
    let upload_id = guard.upload_id.clone();
    let parts = PartPolicy::new(store.tuning.part_size).plan(size);
    tracing::debug!(bucket = %store.bucket, key, size, parts = parts.len(), "multipart upload");
    match upload_and_complete(store, key, src, &upload_id, parts).await {
        Ok(etag) => {
            guard.armed = false;
            Ok(etag)
        }
        Err(e) => {
            // Still armed while aborting: cancelled here, the guard aborts in the background.
            store.abort_upload(key, &upload_id).await;
            guard.armed = false;
            Err(e)
        }
    }
}

/// Uploads every part, then completes the upload; returns the object's ETag.
async fn upload_and_complete(
    store: &S3Store,
    key: &str,
    src: &Path,
    upload_id: &str,
    parts: Vec<Part>,
) -> Result<Option<String>, FarmError> {
    let mut done: Vec<CompletedPart> = futures_util::stream::iter(parts)
        .map(|part| upload_part(store, key, src, upload_id, part))
        .buffer_unordered(PARTS_IN_FLIGHT)
        .try_collect()
        .await?;
    done.sort_by_key(|p| p.part_number());
    let completed = store
        .client
        .complete_multipart_upload()
        .bucket(&*store.bucket)
        .key(key)
        .upload_id(upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(done))
                .build(),
        )
        .send()
        .await
        .map_err(|e| sdk_err(key, "complete multipart upload", &e))?;
    Ok(completed.e_tag)
}

/// Uploads one part, streamed from its range of the file.
async fn upload_part(
    store: &S3Store,
    key: &str,
    src: &Path,
    upload_id: &str,
    part: Part,
) -> Result<CompletedPart, FarmError> {
    // Exact length: a file that shrank since it was measured fails here instead of
    // uploading a short part.
    let body = ByteStream::read_from()
        .path(src)
        .offset(part.offset)
        .length(Length::Exact(part.len))
        .build()
        .await
        .map_err(|e| FarmError::io(src, format!("reading part {}: {e}", part.number)))?;
    let op = format!("upload part {}", part.number);
    let out = store
        .client
        .upload_part()
        .bucket(&*store.bucket)
        .key(key)
        .upload_id(upload_id)
        .part_number(part.number)
        .content_length(part.len as i64)
        .body(body)
        .send()
        .await
        .map_err(|e| sdk_err(key, &op, &e))?;
    let etag = out
        .e_tag()
        .ok_or_else(|| store_err(key, format!("{op}: no ETag in the response")))?;
    Ok(CompletedPart::builder()
        .part_number(part.number)
        .e_tag(etag)
        .build())
}

/// `Store::delete_prefix`: lists the "directory" `prefix/` page by page (at most 1000 keys)
/// and deletes each page with one DeleteObjects; returns the count.
pub(super) async fn delete_prefix(store: &S3Store, prefix: &str) -> Result<u64, FarmError> {
    validate_key(prefix)?;
    let dir = format!("{}/", prefix.trim_end_matches('/'));
    let (mut deleted, mut after) = (0u64, None);
    loop {
        let page = store
            .client
            .list_objects_v2()
            .bucket(&*store.bucket)
            .prefix(&dir)
            .set_start_after(after.take())
            .max_keys(DELETE_BATCH as i32)
            .send()
            .await
            .map_err(|e| sdk_err(prefix, "list", &e))?;
        let objects = page
            .contents()
            .iter()
            .filter_map(|o| o.key())
            .map(|k| ObjectIdentifier::builder().key(k).build())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| store_err(prefix, format!("delete: {e}")))?;
        let Some(last) = page.contents().last().and_then(|o| o.key()) else {
            break;
        };
        after = Some(last.to_string());
        let count = objects.len();
        let delete = Delete::builder()
            .set_objects(Some(objects))
            .quiet(true)
            .build()
            .map_err(|e| store_err(prefix, format!("delete: {e}")))?;
        let out = store
            .client
            .delete_objects()
            .bucket(&*store.bucket)
            .delete(delete)
            .send()
            .await
            .map_err(|e| sdk_err(prefix, "delete", &e))?;
        if let Some(e) = out.errors().first() {
            let (n, key, code) = (out.errors().len(), e.key(), e.code());
            let (key, code) = (key.unwrap_or("?"), code.unwrap_or("?"));
            let why = format!("delete: {n} objects not deleted, first {key}: {code}");
            return Err(store_err(prefix, why));
        }
        deleted += count as u64;
        if page.is_truncated() != Some(true) {
            break;
        }
    }
    tracing::debug!(bucket = %store.bucket, prefix, deleted, "deleted prefix");
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts are numbered from 1, contiguous, cover the file, and all but the last are >= 5 MiB.
    fn plan(part_size: u64, size: u64) -> Vec<Part> {
        let plan = PartPolicy::new(part_size).plan(size);
        let mut next = 0;
        for (i, p) in plan.iter().enumerate() {
            assert_eq!((p.number, p.offset), (i as i32 + 1, next), "{p:?}");
            assert!(p.len >= MIN_PART_SIZE || i + 1 == plan.len(), "{p:?}");
            next += p.len;
        }
        assert_eq!(next, size);
        assert!(plan.len() as u64 <= MAX_PARTS);
        plan
    }

    #[test]
    fn part_plans() {
        assert_eq!(plan(5 * MIB, 20 * MIB).len(), 4);
        assert_eq!(plan(5 * MIB, 21 * MIB + 7)[4].len, MIB + 7);
        // Too small a part size is raised to the S3 minimum; an empty file has one part.
        assert_eq!(plan(1, 20 * MIB).len(), 4);
        assert_eq!(plan(8 * MIB, 0).len(), 1);
        // A file needing more than 10000 parts gets bigger ones.
        assert!(plan(5 * MIB, 100 * 1024 * MIB + 3)[0].len > 5 * MIB);
    }
}
