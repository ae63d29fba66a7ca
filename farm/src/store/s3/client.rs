//! The S3 client: [`S3Client`] (one connection to an S3 endpoint, built from an
//! [`S3Config`]) and [`S3Store`] (one bucket of it), with the helpers every part of the store
//! shares.
//!
//! Why a file of its own: the reads, uploads, copies and aborts each live in a sibling file;
//! they all need the client and the bucket, and nothing else from each other, so the client
//! sits below them and imports none of them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_credential_types::Credentials;
use aws_sdk_s3::config::{RequestChecksumCalculation, ResponseChecksumValidation};

use super::config::{S3Config, MAX_SINGLE_COPY, MIB};
use super::errors::store_err;
use crate::store::validate_key;
use crate::FarmError;

/// Bounds loading the SDK configuration (environment, profile files).
const LOAD_TIMEOUT: Duration = Duration::from_secs(30);
/// A single PutObject may not exceed 5 GiB.
const MAX_SINGLE_PUT: u64 = 5 * 1024 * MIB;

/// The user metadata (`x-amz-meta-tessera-delivery`) a delivered object carries: the job
/// that copied it and the ETag of the work object it copied (see delivery.rs).
pub const DELIVERY_MARK: &str = "tessera-delivery";

/// The metadata a delivery's copy carries in place of the source's: the delivery mark
/// ([`DELIVERY_MARK`]) and the source's content type.
#[derive(Clone)]
pub(super) struct Mark {
    pub(super) value: String,
    pub(super) content_type: Option<String>,
}

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
    /// The configured part size of multipart uploads (the part plan keeps it within S3's
    /// limits).
    pub(super) part_size: u64,
    /// Larger objects are copied in parts (at most [`MAX_SINGLE_COPY`]).
    pub(super) single_copy_max: u64,
    /// The part size of multipart copies (at least 1 byte).
    pub(super) copy_part_size: u64,
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
                part_size: cfg.part_size,
                single_copy_max: cfg.single_copy_max.min(MAX_SINGLE_COPY),
                copy_part_size: cfg.copy_part_size.max(1),
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

/// The objects of one bucket, as a [`crate::store::Store`] (cheap to clone).
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
