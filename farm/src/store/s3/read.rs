//! The S3 store's reads: presigned upload URLs, listings, HEAD requests and downloads
//! streamed into a file.
//!
//! Why a file of its own: these are the calls that only look at or fetch objects; keeping them
//! apart from the uploads and copies keeps both short. Bodies are streamed to files, never
//! held whole in memory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::operation::get_object::GetObjectOutput;
use aws_sdk_s3::presigning::PresigningConfig;
use tokio::io::AsyncWriteExt;

use super::client::{non_empty, validate_prefix, S3Store, DELIVERY_MARK};
use super::config::MIB;
use super::errors::{error_chain, sdk_err, store_err};
use crate::store::validate_key;
use crate::FarmError;

/// S3 returns at most 1000 keys per list page.
const BATCH: usize = 1000;

/// One object as a listing or a HEAD request describes it.
///
/// Why: the dispatcher lists uploads and checks outputs; the ETag tells changed objects apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The object key.
    pub key: String,
    /// The ETag, without the surrounding quotes (`"abc-3"` for a 3-part multipart upload).
    pub etag: String,
    /// Size in bytes.
    pub size: u64,
}

/// An object as a HEAD describes it, with the metadata a delivery reads.
pub(super) struct Headed {
    pub(super) info: ObjectInfo,
    pub(super) content_type: Option<String>,
    /// Its [`DELIVERY_MARK`], if it carries one.
    pub(super) mark: Option<String>,
}

impl S3Store {
    /// A URL that lets anyone holding it PUT one object at `key` until `expires` has passed,
    /// without credentials: how users upload inputs straight into the bucket. It names the
    /// public endpoint when one is configured ([`super::S3Config::public_endpoint`]).
    pub async fn presign_put(&self, key: &str, expires: Duration) -> Result<String, FarmError> {
        self.presign_put_sized(key, expires, None).await
    }

    /// [`S3Store::presign_put`] whose PUT must carry `Content-Length: size` when a size is
    /// given: the length is a signed header, so the store refuses a body of any other
    /// length. Why: a URL handed to a client is otherwise an upload of unbounded size.
    pub async fn presign_put_sized(
        &self,
        key: &str,
        expires: Duration,
        size: Option<u64>,
    ) -> Result<String, FarmError> {
        validate_key(key)?;
        let presigning = PresigningConfig::expires_in(expires)
            .map_err(|e| store_err(key, format!("presign: {e}")))?;
        let length = size
            .map(i64::try_from)
            .transpose()
            .map_err(|_| store_err(key, "presign: size too large"))?;
        let request = self
            .presigner
            .put_object()
            .bucket(&*self.bucket)
            .key(key)
            .set_content_length(length);
        let presigned = tokio::time::timeout(self.tuning.op_timeout, request.presigned(presigning))
            .await
            .map_err(|_| store_err(key, "presign: timed out"))?
            .map_err(|e| sdk_err(key, "presign", &e))?;
        Ok(presigned.uri().to_string())
    }

    /// Up to `max` objects whose keys start with `prefix` (`""`: the whole bucket), in key
    /// order, after `start_after` when given. Why: paging through a bucket prefix (watched
    /// uploads, a job's segments) without loading all of it.
    pub async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max: usize,
    ) -> Result<Vec<ObjectInfo>, FarmError> {
        validate_prefix(prefix)?;
        start_after.map(validate_key).transpose()?;
        let mut found = Vec::new();
        let mut after = start_after.map(str::to_string);
        while found.len() < max {
            let want = (max - found.len()).min(BATCH);
            let page = self
                .client
                .list_objects_v2()
                .bucket(&*self.bucket)
                .set_prefix(non_empty(prefix))
                .set_start_after(after.take())
                .max_keys(want as i32)
                .send()
                .await
                .map_err(|e| sdk_err(prefix, "list", &e))?;
            found.extend(page.contents().iter().filter_map(|o| {
                Some(ObjectInfo {
                    key: o.key()?.to_string(),
                    etag: clean_etag(o.e_tag()),
                    size: o.size().unwrap_or(0).max(0) as u64,
                })
            }));
            if page.is_truncated() != Some(true) || page.contents().is_empty() {
                break;
            }
            after = found.last().map(|o| o.key.clone());
        }
        found.truncate(max);
        Ok(found)
    }

    /// Size and ETag of `key`, or `None` when it does not exist.
    pub async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, FarmError> {
        Ok(self.head_full(key).await?.map(|h| h.info))
    }

    /// [`S3Store::head`] with the metadata a delivery reads (delivery.rs).
    pub(super) async fn head_full(&self, key: &str) -> Result<Option<Headed>, FarmError> {
        validate_key(key)?;
        let sent = self
            .client
            .head_object()
            .bucket(&*self.bucket)
            .key(key)
            .send()
            .await;
        match sent {
            Ok(out) => Ok(Some(Headed {
                info: ObjectInfo {
                    key: key.to_string(),
                    etag: clean_etag(out.e_tag()),
                    size: out.content_length().unwrap_or(0).max(0) as u64,
                },
                content_type: out.content_type().map(str::to_string),
                mark: out.metadata().and_then(|m| m.get(DELIVERY_MARK)).cloned(),
            })),
            Err(SdkError::ServiceError(e)) if e.raw().status().as_u16() == 404 => Ok(None),
            Err(e) => Err(sdk_err(key, "head", &e)),
        }
    }

    /// Streams a GetObject body into the new file `tmp`; returns the byte count.
    async fn download(
        &self,
        key: &str,
        got: GetObjectOutput,
        tmp: &Path,
        max_bytes: u64,
    ) -> Result<u64, FarmError> {
        let (expected, mut body) = (got.content_length(), got.body);
        if let Some(len) = expected.filter(|&len| len >= 0 && len as u64 > max_bytes) {
            let why = format!("get: {len} bytes, more than the {max_bytes} expected");
            return Err(store_err(key, why));
        }
        let io = |e: std::io::Error| FarmError::io(tmp, e);
        let file = tokio::fs::File::create(tmp).await.map_err(io)?;
        let mut out = tokio::io::BufWriter::with_capacity(MIB as usize, file);
        let (limit, mut written) = (self.tuning.op_timeout, 0u64);
        while let Some(chunk) = tokio::time::timeout(limit, body.try_next())
            .await
            .map_err(|_| broke_off(key, format!("get: no data for {limit:?}")))?
            .map_err(|e| broke_off(key, format!("get: reading body: {}", error_chain(&e))))?
        {
            written += chunk.len() as u64;
            // Checked before writing: a body longer than promised never fills the disk.
            if written > max_bytes {
                let why = format!("get: body longer than the {max_bytes} bytes expected");
                return Err(store_err(key, why));
            }
            out.write_all(&chunk).await.map_err(io)?;
        }
        out.flush().await.map_err(io)?;
        match expected {
            Some(len) if len >= 0 && len as u64 != written => {
                let why = format!("get: body ended after {written} of {len} bytes");
                Err(broke_off(key, why))
            }
            _ => Ok(written),
        }
    }
}

impl S3Store {
    /// Downloads `key` into the file `dst` like `Store::get_file`, but only the version whose
    /// ETag is `etag` (If-Match: an object replaced since is refused with a store error naming
    /// the change) and at most `max_bytes` of it (more is refused while writing, before it
    /// lands on disk). Why: the dispatcher sizes its staging from a HEAD of the input; the
    /// bytes it fetches must be the ones it measured.
    pub async fn get_file_if_match(
        &self,
        key: &str,
        dst: &Path,
        etag: &str,
        max_bytes: u64,
    ) -> Result<u64, FarmError> {
        get_version(self, key, dst, Some(etag), max_bytes).await
    }
}

/// A body that stalled or broke off mid-transfer: the connection, not the object, failed (a
/// partition, a store restart), so the store is unavailable and the read is retried.
fn broke_off(key: &str, reason: String) -> FarmError {
    FarmError::StoreUnavailable {
        key: key.to_string(),
        reason,
    }
}

/// `Store::get_file`: downloads `key` into a temporary file next to `dst` and renames it into
/// place, so `dst` appears whole or not at all; returns the size.
pub(super) async fn get(store: &S3Store, key: &str, dst: &Path) -> Result<u64, FarmError> {
    get_version(store, key, dst, None, u64::MAX).await
}

/// [`get`] of the version with ETag `etag` when given, refusing more than `max_bytes`.
async fn get_version(
    store: &S3Store,
    key: &str,
    dst: &Path,
    etag: Option<&str>,
    max_bytes: u64,
) -> Result<u64, FarmError> {
    validate_key(key)?;
    let sent = store
        .client
        .get_object()
        .bucket(&*store.bucket)
        .key(key)
        .set_if_match(etag.map(|e| format!("\"{e}\"")))
        .send()
        .await;
    let out = match sent {
        Ok(out) => out,
        Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
            return Err(store_err(key, "no such object"))
        }
        Err(SdkError::ServiceError(e)) if e.raw().status().as_u16() == 412 => {
            let was = etag.unwrap_or_default();
            let why = format!("get: the object changed since it was looked at (ETag was {was})");
            return Err(store_err(key, why));
        }
        Err(e) => return Err(sdk_err(key, "get", &e)),
    };
    if let Some(dir) = dst.parent().filter(|d| !d.as_os_str().is_empty()) {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| FarmError::io(dir, e))?;
    }
    // Removed on error and on cancellation; renamed into place on success.
    let mut tmp = TempPath::next_to(dst);
    let written = store.download(key, out, &tmp.path, max_bytes).await?;
    tokio::fs::rename(&tmp.path, dst)
        .await
        .map_err(|e| FarmError::io(dst, e))?;
    tmp.keep = true;
    tracing::debug!(bucket = %store.bucket, key, size = written, "fetched object");
    Ok(written)
}

/// A temporary file next to its destination (one filesystem, so the rename is atomic),
/// removed when dropped unless `keep` (set once it was renamed into place).
struct TempPath {
    path: PathBuf,
    keep: bool,
}

impl TempPath {
    fn next_to(dst: &Path) -> Self {
        let name = dst.file_name().unwrap_or_default().to_string_lossy();
        let unique = uuid::Uuid::new_v4().simple();
        let path = dst.with_file_name(format!(".{name}.tmp-{unique}"));
        TempPath { path, keep: false }
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// An ETag without its quotes.
fn clean_etag(etag: Option<&str>) -> String {
    etag.unwrap_or_default().trim_matches('"').to_string()
}
