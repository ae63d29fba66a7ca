//! The catalog of every error code a client can see (events, the job database, the API),
//! each with its retry class and HTTP status.
//!
//! Why one catalog in the bottom crate: the worker, the dispatcher and the API all report
//! and match these codes; as enum variants the compiler checks every producer and every
//! match, where string literals scattered over the crates could drift apart. Codes travel
//! as today's snake_case strings, so events, stored jobs and API answers keep their shape,
//! and a code from a newer peer survives as [`ErrorCode::Unknown`].

use serde::{Deserialize, Serialize};

/// Whether retrying the same operation can succeed.
///
/// Why: the farm requeues `Retry` failures with backoff and fails the job at once on `Abort`,
/// so a bad upload does not burn twenty redeliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// A transient condition (I/O hiccup, resource pressure): try again later.
    Retry,
    /// The input or request itself is bad: trying again gives the same answer.
    Abort,
}

/// Declares [`ErrorCode`] from one table: variant, wire string, default class, HTTP status.
/// Why a table: each code's string, class and status stand on one line, and parsing is
/// generated from the same strings, so they cannot disagree.
macro_rules! catalog {
    ($($(#[doc = $doc:literal])* $variant:ident = $code:literal, $class:ident, $status:literal;)*) => {
        /// A stable, machine-readable error code.
        ///
        /// Why: callers decide on variants (retry, back off, which HTTP status), while the
        /// wire carries the snake_case string of [`ErrorCode::as_str`].
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(from = "String", into = "String")]
        pub enum ErrorCode {
            $($(#[doc = $doc])* $variant,)*
            /// A code this build does not know (sent by a newer peer), kept as it came.
            Unknown(String),
        }

        impl ErrorCode {
            /// The code as it travels in events, the job database and API answers.
            pub fn as_str(&self) -> &str {
                match self {
                    $(ErrorCode::$variant => $code,)*
                    ErrorCode::Unknown(code) => code,
                }
            }

            /// The code for `code`: a known one's variant, anything else as `Unknown`.
            pub fn parse(code: &str) -> ErrorCode {
                match code {
                    $($code => ErrorCode::$variant,)*
                    other => ErrorCode::Unknown(other.to_string()),
                }
            }

            /// Whether a retry usually helps. A failure may carry its own class (a
            /// `FarmError::Media` keeps the one it was raised with); this is the default.
            pub fn class(&self) -> ErrorClass {
                match self {
                    $(ErrorCode::$variant => ErrorClass::$class,)*
                    ErrorCode::Unknown(_) => ErrorClass::Retry,
                }
            }

            /// The HTTP status the API answers with this code.
            pub fn http_status(&self) -> u16 {
                match self {
                    $(ErrorCode::$variant => $status,)*
                    ErrorCode::Unknown(_) => 500,
                }
            }
        }
    };
}

catalog! {
    // Media operations (MediaError).
    /// The input file does not exist or cannot be read.
    InputUnreadable = "input_unreadable", Abort, 422;
    /// The input file has zero bytes.
    InputEmpty = "input_empty", Abort, 422;
    /// The input is larger than the farm accepts.
    InputTooLarge = "input_too_large", Abort, 413;
    /// FFmpeg cannot recognise or parse the container.
    InputInvalid = "input_invalid", Abort, 422;
    /// The input has no video stream, or no video frame to encode.
    InputNoVideo = "input_no_video", Abort, 422;
    /// The input uses a codec or format this build cannot decode.
    InputUnsupported = "input_unsupported", Abort, 422;
    /// Decoding failed part-way (corrupt or truncated data).
    DecodeFailed = "decode_failed", Abort, 422;
    /// The encoder could not be opened or failed while encoding.
    EncodeFailed = "encode_failed", Abort, 500;
    /// A media request that makes no sense (bad range, unknown codec name).
    InvalidRequest = "invalid_request", Abort, 422;
    /// Writing an output or intermediate file failed.
    WriteFailed = "write_failed", Retry, 500;
    /// The GPU path cannot run on this host or card.
    GpuUnavailable = "gpu_unavailable", Retry, 503;
    /// No NVENC session could be opened on the card.
    GpuSessionUnavailable = "gpu_session_unavailable", Retry, 503;
    /// The driver reported a fault on the card.
    GpuDeviceFault = "gpu_device_fault", Retry, 503;
    /// The card's NVENC cannot do what the rendition asks (10-bit H.264, temporal AQ, a
    /// width beyond its limit): the same on every attempt, so a job that may run anywhere
    /// is run again on the CPU path.
    GpuRequestUnsupported = "gpu_request_unsupported", Abort, 422;
    // Job outcomes decided by the worker or the dispatcher.
    /// No card had the segment's sessions free within the wait: requeued, never failed.
    GpuNoSession = "gpu_no_session", Retry, 503;
    /// A stitched output has other than the frames its segments reported.
    FrameCountMismatch = "frame_count_mismatch", Retry, 500;
    /// The job was cancelled (by request or shutdown).
    Cancelled = "cancelled", Abort, 409;
    /// An output failed its quality check: encoding it again gives the same answer.
    QcFailed = "qc_failed", Abort, 422;
    /// The source is damaged beyond what decoding can work around.
    SourceCorrupt = "source_corrupt", Abort, 422;
    /// A task ended without a result: dead-lettered after its deliveries ran out, refused
    /// as unreadable, or silent past the job's deadline after every republish.
    TaskLost = "task_lost", Abort, 500;
    // Farm plumbing (FarmError).
    /// A media child process crashed, was killed, or broke the protocol.
    ChildCrashed = "child_crashed", Retry, 500;
    /// A media child process ran past its time limit.
    ChildTimeout = "child_timeout", Retry, 500;
    /// The queue (embedded or RabbitMQ) failed.
    QueueError = "queue_error", Retry, 503;
    /// The broker refused a queue as declared (an argument its version or policy does not
    /// allow, a queue of the same name declared otherwise): waiting does not change it.
    QueueRefused = "queue_refused", Abort, 500;
    /// The object store failed (missing object, access denied).
    StoreError = "store_error", Retry, 500;
    /// The object store could not be reached or answered "try later".
    StoreUnavailable = "store_unavailable", Retry, 503;
    /// An object key that is not allowed.
    InvalidKey = "invalid_key", Abort, 422;
    /// A message that cannot be parsed or has an unknown version.
    BadMessage = "bad_message", Abort, 500;
    /// Local disk (staging) failed.
    IoError = "io_error", Retry, 500;
    /// A worker could not run a task for a reason of its own (full disk, missing encoder);
    /// seen in a job's error only when no worker could take the task after many tries.
    WorkerUnfit = "worker_unfit", Retry, 503;
    // The dispatcher's API and its upload watch.
    /// No valid bearer token.
    Unauthorized = "unauthorized", Abort, 401;
    /// A body, header or query that cannot be read.
    BadRequest = "bad_request", Abort, 400;
    /// A job that breaks the farm's rules.
    InvalidJob = "invalid_job", Abort, 422;
    /// An upload request that breaks the farm's rules.
    InvalidUpload = "invalid_upload", Abort, 422;
    /// A watched upload's sidecar that cannot be used.
    InvalidSidecar = "invalid_sidecar", Abort, 422;
    /// A bucket this farm may not use.
    BucketNotAllowed = "bucket_not_allowed", Abort, 403;
    /// An object outside what the tenant may read or write (its scopes).
    ObjectNotAllowed = "object_not_allowed", Abort, 403;
    /// A callback URL on a dispatcher without a webhook secret.
    WebhooksDisabled = "webhooks_disabled", Abort, 422;
    /// The tenant has as many unfinished jobs as the farm allows it.
    TooManyJobs = "too_many_jobs", Retry, 429;
    /// The tenant was given as many upload URLs in the last 15 minutes as the farm allows.
    TooManyUploads = "too_many_uploads", Retry, 429;
    /// No such job.
    NotFound = "not_found", Abort, 404;
    /// The job already ended.
    JobFinished = "job_finished", Abort, 409;
    /// An Idempotency-Key already used for a different request (the body differs).
    IdempotencyConflict = "idempotency_conflict", Abort, 409;
    /// A failure inside the dispatcher.
    Internal = "internal", Retry, 500;
    /// The job database cannot be used now.
    DbUnavailable = "db_unavailable", Retry, 503;
    /// The dispatcher cannot serve yet.
    NotReady = "not_ready", Retry, 503;
}

impl From<String> for ErrorCode {
    fn from(code: String) -> Self {
        match ErrorCode::parse(&code) {
            ErrorCode::Unknown(_) => ErrorCode::Unknown(code),
            known => known,
        }
    }
}

impl From<&str> for ErrorCode {
    fn from(code: &str) -> Self {
        ErrorCode::parse(code)
    }
}

impl From<ErrorCode> for String {
    fn from(code: ErrorCode) -> Self {
        match code {
            ErrorCode::Unknown(code) => code,
            known => known.as_str().to_string(),
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for ErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_travel_as_their_strings_and_unknown_ones_survive() {
        let json = serde_json::to_string(&ErrorCode::InputNoVideo).unwrap();
        assert_eq!(json, "\"input_no_video\"");
        let back: ErrorCode = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ErrorCode::InputNoVideo);
        let newer: ErrorCode = serde_json::from_str("\"hdr_metadata_lost\"").unwrap();
        assert_eq!(newer, ErrorCode::Unknown("hdr_metadata_lost".into()));
        assert_eq!(
            serde_json::to_string(&newer).unwrap(),
            "\"hdr_metadata_lost\""
        );
        assert_eq!(ErrorCode::from("qc_failed"), ErrorCode::QcFailed);
        assert_eq!(ErrorCode::SourceCorrupt, "source_corrupt");
    }

    #[test]
    fn classes_and_statuses() {
        assert_eq!(ErrorCode::QcFailed.class(), ErrorClass::Abort);
        assert_eq!(ErrorCode::QcFailed.http_status(), 422);
        assert_eq!(ErrorCode::SourceCorrupt.class(), ErrorClass::Abort);
        assert_eq!(ErrorCode::SourceCorrupt.http_status(), 422);
        assert_eq!(ErrorCode::BucketNotAllowed.http_status(), 403);
        assert_eq!(ErrorCode::StoreUnavailable.http_status(), 503);
        assert_eq!(ErrorCode::GpuNoSession.class(), ErrorClass::Retry);
        assert_eq!(ErrorCode::Unknown("x".into()).http_status(), 500);
    }
}
