//! How the S3 store is reached and tuned: [`S3Config`].
//!
//! Why a file of its own: the services build it from their settings and tests from a Garage
//! server, without needing the client code in `client.rs`.

use std::fmt;
use std::time::Duration;

/// One mebibyte, the unit of the transfer sizes.
pub(super) const MIB: u64 = 1024 * 1024;
/// The largest object one CopyObject may copy.
pub(super) const MAX_SINGLE_COPY: u64 = 5 * 1024 * MIB;

/// How to reach an S3 endpoint and how to move objects to it.
///
/// Why: the worker and dispatcher binaries build it from their command line / environment;
/// tests build it from a Garage server ([`S3Config::new`] gives the defaults).
#[derive(Clone)]
pub struct S3Config {
    /// Endpoint URL (`http://127.0.0.1:3900`); `None` means AWS S3 for `region`.
    pub endpoint: Option<String>,
    /// The endpoint as clients outside the farm reach it, named in presigned upload URLs
    /// (compose: `http://127.0.0.1:3900` on the host, while the services use
    /// `http://garage:3900`); `None`: `endpoint`.
    pub public_endpoint: Option<String>,
    /// Signing region (`us-east-1`, or `garage` for Garage).
    pub region: String,
    /// Static access key id; `None` (with no secret) uses the default AWS credential chain.
    pub access_key_id: Option<String>,
    /// Static secret key; never logged or printed by `Debug`.
    pub secret_access_key: Option<String>,
    /// Path-style URLs (`endpoint/bucket/key`), which most S3-compatible servers need.
    pub force_path_style: bool,
    /// Limit for opening a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// Limit for one attempt of one request (the SDK retries up to 3 attempts); for downloads,
    /// also the longest wait for the next piece of a response body.
    pub op_timeout: Duration,
    /// Files of at least this many bytes go up as multipart uploads (default 16 MiB).
    pub multipart_threshold: u64,
    /// Part size of multipart uploads (default 8 MiB; raised to 5 MiB, the S3 minimum, and
    /// further when a file would need more than 10000 parts).
    pub part_size: u64,
    /// Objects larger than this are copied server-side as a multipart copy of ranges (default
    /// and most: 5 GiB, the largest single CopyObject S3 allows). Why a setting: tests copy a
    /// few MiB in parts.
    pub single_copy_max: u64,
    /// Part size of multipart copies (default 1 GiB; S3 allows 5 MiB to 5 GiB).
    pub copy_part_size: u64,
}

impl S3Config {
    /// A config for `region` with the defaults: AWS endpoint, default credential chain,
    /// virtual-hosted URLs, 10 s connect and 120 s per-attempt timeouts, 16 MiB multipart
    /// threshold, 8 MiB parts, copies in 1 GiB parts above 5 GiB.
    pub fn new(region: impl Into<String>) -> Self {
        S3Config {
            endpoint: None,
            public_endpoint: None,
            region: region.into(),
            access_key_id: None,
            secret_access_key: None,
            force_path_style: false,
            connect_timeout: Duration::from_secs(10),
            op_timeout: Duration::from_secs(120),
            multipart_threshold: 16 * MIB,
            part_size: 8 * MIB,
            single_copy_max: MAX_SINGLE_COPY,
            copy_part_size: 1024 * MIB,
        }
    }
}

impl fmt::Debug for S3Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Config")
            .field("endpoint", &self.endpoint)
            .field("public_endpoint", &self.public_endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<redacted>"),
            )
            .field("force_path_style", &self.force_path_style)
            .field("connect_timeout", &self.connect_timeout)
            .field("op_timeout", &self.op_timeout)
            .field("multipart_threshold", &self.multipart_threshold)
            .field("part_size", &self.part_size)
            .field("single_copy_max", &self.single_copy_max)
            .field("copy_part_size", &self.copy_part_size)
            .finish()
    }
}
