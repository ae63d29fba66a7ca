//! Errors of S3 calls, readable: the service's code and message or the transport's cause
//! chain, and whether the store is unavailable (retry later) or refused the request.
//!
//! Why a module of its own: every S3 operation (reads, uploads, copies, aborts) reports
//! through these, so they live apart from any one of them.

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

use crate::FarmError;

/// A store error for `key`.
pub(super) fn store_err(key: &str, reason: impl Into<String>) -> FarmError {
    let (key, reason) = (key.to_string(), reason.into());
    FarmError::Store { key, reason }
}

/// A store error for `key` from a failed SDK call of operation `op`, with a readable reason:
/// the service's error code and message (or the HTTP status), else the transport error's
/// chain (timeout, connection refused, ...). Never a Debug dump.
pub(super) fn sdk_err<E>(key: &str, op: &str, err: &SdkError<E, HttpResponse>) -> FarmError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let unavailable = match err {
        SdkError::ServiceError(se) => se.raw().status().as_u16() >= 500,
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        _ => false,
    };
    let reason = match err {
        SdkError::ServiceError(se) => {
            let status = se.raw().status().as_u16();
            let e = se.err();
            match (e.code(), e.message()) {
                (Some(code), Some(msg)) => format!("{op}: {code} (HTTP {status}): {msg}"),
                (Some(code), None) => format!("{op}: {code} (HTTP {status})"),
                _ => format!("{op}: HTTP {status}"),
            }
        }
        SdkError::TimeoutError(_) => format!("{op}: timed out"),
        other => format!("{op}: {}", error_chain(other)),
    };
    if unavailable {
        FarmError::StoreUnavailable {
            key: key.to_string(),
            reason,
        }
    } else {
        store_err(key, reason)
    }
}

/// An error and its sources, each by its `Display`, joined with `: ` (DisplayErrorContext
/// would append a Debug dump).
pub(super) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}
