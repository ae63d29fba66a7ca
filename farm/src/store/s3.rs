//! The S3 store: tessera's [`Store`] on AWS S3 or an S3-compatible server (MinIO, Garage, Ceph
//! RGW), through aws-sdk-s3.
//!
//! Why: in the distributed farm the work area and the outputs live in a bucket that every
//! dispatcher and worker can reach. Bodies are streamed from and to files, never held whole in
//! memory; large files go up as multipart uploads, aborted on failure (see `s3_multipart`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_credential_types::Credentials;
use aws_sdk_s3::config::{RequestChecksumCalculation, ResponseChecksumValidation};
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::operation::get_object::GetObjectOutput;
use aws_sdk_s3::presigning::PresigningConfig;
use tokio::io::AsyncWriteExt;

pub use super::s3_config::S3Config;
use super::s3_config::MIB;
use super::s3_errors::{error_chain, sdk_err, store_err};
use super::s3_multipart::{self, PartPolicy};
use super::{validate_key, Store};
use crate::FarmError;

/// S3 returns at most 1000 keys per list page.
const BATCH: usize = 1000;
/// Bounds loading the SDK configuration (environment, profile files).
const LOAD_TIMEOUT: Duration = Duration::from_secs(30);
/// A single PutObject may not exceed 5 GiB.
const MAX_SINGLE_PUT: u64 = 5 * 1024 * MIB;

/// A connection to one S3 endpoint, shared by the stores of its buckets (cheap to clone).
///
/// Why: building the SDK client (credentials, HTTP connection pool) is done once per process.
#[derive(Clone)]
pub struct S3Client {
    inner: aws_sdk_s3::Client,
    /// Signs presigned URLs: `inner` unless a public endpoint is configured.
    presigner: aws_sdk_s3::Client,
    tuning: Tuning,
}

/// The transfer settings a store needs besides the SDK client.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tuning {
    pub(super) op_timeout: Duration,
    pub(super) multipart_threshold: u64,
    pub(super) parts: PartPolicy,
}

impl S3Client {
    /// Builds the client: static credentials when both are set, else the default AWS chain;
    /// connect and per-attempt timeouts and the SDK's standard retries (3 attempts).
    ///
    /// Checksums are computed only where S3 requires them, so that S3-compatible servers
    /// without the newer checksum headers (aws-chunked trailers) work too.
    pub async fn new(cfg: S3Config) -> Result<Self, FarmError> {
        let config_err = |reason: &str| store_err("(s3 config)", reason);
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(cfg.connect_timeout)
            .operation_attempt_timeout(cfg.op_timeout)
            .build();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(cfg.region.clone()))
            .timeout_config(timeouts)
            .retry_config(RetryConfig::standard().with_max_attempts(3));
        if let Some(endpoint) = &cfg.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        match (&cfg.access_key_id, &cfg.secret_access_key) {
            (Some(id), Some(secret)) => {
                let creds = Credentials::new(id, secret, None, None, "tessera-config");
                loader = loader.credentials_provider(creds);
            }
            (None, None) => {}
            _ => {
                return Err(config_err(
                    "set both access_key_id and secret_access_key, or none",
                ))
            }
        }
        let shared = tokio::time::timeout(LOAD_TIMEOUT, loader.load())
            .await
            .map_err(|_| config_err("loading the AWS configuration timed out"))?;
        let conf = aws_sdk_s3::config::Builder::from(&shared)
            .force_path_style(cfg.force_path_style)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .build();
        // Presigned URLs are signed for the host they name, so a public endpoint needs a client
        // of its own (signing only: it never sends a request).
        let presigner = cfg
            .public_endpoint
            .as_ref()
            .map(|url| aws_sdk_s3::Client::from_conf(conf.to_builder().endpoint_url(url).build()));
        tracing::debug!(endpoint = ?cfg.endpoint, public_endpoint = ?cfg.public_endpoint,
            region = %cfg.region, "S3 client ready");
        let inner = aws_sdk_s3::Client::from_conf(conf);
        Ok(S3Client {
            presigner: presigner.unwrap_or_else(|| inner.clone()),
            inner,
            tuning: Tuning {
                op_timeout: cfg.op_timeout,
                multipart_threshold: cfg.multipart_threshold.min(MAX_SINGLE_PUT),
                parts: PartPolicy::new(cfg.part_size),
            },
        })
    }

    /// The store for one bucket of this endpoint.
    pub fn store(&self, bucket: &str) -> S3Store {
        S3Store {
            client: self.inner.clone(),
            presigner: self.presigner.clone(),
            bucket: Arc::from(bucket),
            tuning: self.tuning,
        }
    }
}

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

/// The objects of one bucket, as a [`Store`] (cheap to clone).
///
/// Why: the farm's work area and destinations are buckets; one store per bucket keeps keys
/// relative, exactly like the local store.
#[derive(Clone)]
pub struct S3Store {
    pub(super) client: aws_sdk_s3::Client,
    pub(super) presigner: aws_sdk_s3::Client,
    pub(super) bucket: Arc<str>,
    pub(super) tuning: Tuning,
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store")
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

impl S3Store {
    /// The bucket this store works on.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// A URL that lets anyone holding it PUT one object at `key` until `expires` has passed,
    /// without credentials: how users upload inputs straight into the bucket. It names the
    /// public endpoint when one is configured ([`S3Config::public_endpoint`]).
    pub async fn presign_put(&self, key: &str, expires: Duration) -> Result<String, FarmError> {
        validate_key(key)?;
        let presigning = PresigningConfig::expires_in(expires)
            .map_err(|e| store_err(key, format!("presign: {e}")))?;
        let request = self.presigner.put_object().bucket(&*self.bucket).key(key);
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
        validate_key(key)?;
        let sent = self
            .client
            .head_object()
            .bucket(&*self.bucket)
            .key(key)
            .send()
            .await;
        match sent {
            Ok(out) => Ok(Some(ObjectInfo {
                key: key.to_string(),
                etag: clean_etag(out.e_tag()),
                size: out.content_length().unwrap_or(0).max(0) as u64,
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
    ) -> Result<u64, FarmError> {
        let (expected, mut body) = (got.content_length(), got.body);
        let io = |e: std::io::Error| FarmError::io(tmp, e);
        let file = tokio::fs::File::create(tmp).await.map_err(io)?;
        let mut out = tokio::io::BufWriter::with_capacity(MIB as usize, file);
        let (limit, mut written) = (self.tuning.op_timeout, 0u64);
        while let Some(chunk) = tokio::time::timeout(limit, body.try_next())
            .await
            .map_err(|_| store_err(key, format!("get: no data for {limit:?}")))?
            .map_err(|e| store_err(key, format!("get: reading body: {}", error_chain(&e))))?
        {
            out.write_all(&chunk).await.map_err(io)?;
            written += chunk.len() as u64;
        }
        out.flush().await.map_err(io)?;
        match expected {
            Some(len) if len >= 0 && len as u64 != written => {
                let why = format!("get: body ended after {written} of {len} bytes");
                Err(store_err(key, why))
            }
            _ => Ok(written),
        }
    }
}

#[async_trait]
impl Store for S3Store {
    async fn put_file(&self, key: &str, src: &Path) -> Result<u64, FarmError> {
        s3_multipart::put(self, key, src).await
    }

    async fn get_file(&self, key: &str, dst: &Path) -> Result<u64, FarmError> {
        validate_key(key)?;
        let sent = self
            .client
            .get_object()
            .bucket(&*self.bucket)
            .key(key)
            .send()
            .await;
        let out = match sent {
            Ok(out) => out,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                return Err(store_err(key, "no such object"))
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
        let written = self.download(key, out, &tmp.path).await?;
        tokio::fs::rename(&tmp.path, dst)
            .await
            .map_err(|e| FarmError::io(dst, e))?;
        tmp.keep = true;
        tracing::debug!(bucket = %self.bucket, key, size = written, "fetched object");
        Ok(written)
    }

    async fn exists(&self, key: &str) -> Result<bool, FarmError> {
        Ok(self.head(key).await?.is_some())
    }

    /// Treats `prefix` as a directory, like the local store: `jobs/a` and `jobs/a/` both
    /// delete `jobs/a/...` and never `jobs/ab/...`.
    async fn delete_prefix(&self, prefix: &str) -> Result<u64, FarmError> {
        s3_multipart::delete_prefix(self, prefix).await
    }

    async fn delete(&self, key: &str) -> Result<(), FarmError> {
        S3Store::delete(self, key).await
    }
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

/// Checks a listing prefix: `""` (the whole bucket) or a valid key.
pub(super) fn validate_prefix(prefix: &str) -> Result<(), FarmError> {
    match prefix {
        "" => Ok(()),
        _ => validate_key(prefix),
    }
}

/// `None` for an empty prefix, as the SDK wants it.
pub(super) fn non_empty(prefix: &str) -> Option<String> {
    (!prefix.is_empty()).then(|| prefix.to_string())
}
