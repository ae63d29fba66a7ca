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
        SdkError::ServiceError(se) => {
            unavailable_answer(se.raw().status().as_u16(), se.err().code())
        }
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

/// Error codes by which S3-compatible stores say "too many requests, slow down", whatever
/// the status they send them with (AWS: `SlowDown` with 503; others use 429 or 400).
const THROTTLING_CODES: [&str; 5] = [
    "SlowDown",
    "TooManyRequests",
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
];

/// Whether a service answer of HTTP `status` with error `code` means "the store cannot serve
/// now, try later": any 5xx (503 SlowDown included), 429 Too Many Requests, or a throttling
/// code. Why 429 too: a throttled delivery that fails for good fails a job that would succeed
/// seconds later; retried, it waits like any outage (with jitter, so a fleet spreads out).
fn unavailable_answer(status: u16, code: Option<&str>) -> bool {
    status >= 500 || status == 429 || code.is_some_and(|c| THROTTLING_CODES.contains(&c))
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

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_s3::error::ErrorMetadata;
    use aws_sdk_s3::operation::head_object::HeadObjectError;
    use aws_sdk_s3::primitives::SdkBody;

    /// `sdk_err` of a service answer with HTTP `status` and error `code`.
    fn answered(status: u16, code: &str) -> FarmError {
        let meta = ErrorMetadata::builder().code(code).message("m").build();
        let raw = HttpResponse::new(status.try_into().unwrap(), SdkBody::empty());
        let err = SdkError::service_error(HeadObjectError::generic(meta), raw);
        sdk_err("k", "head", &err)
    }

    #[test]
    fn throttling_is_retryable_and_refusals_are_not() {
        for (status, code) in [
            (429, "TooManyRequests"),
            (503, "SlowDown"),
            (400, "SlowDown"),
            (400, "RequestLimitExceeded"),
            (500, "InternalError"),
        ] {
            let e = answered(status, code);
            assert!(
                matches!(e, FarmError::StoreUnavailable { .. }),
                "HTTP {status} {code}: {e:?}"
            );
            assert!(
                e.to_string().contains(&format!("{code} (HTTP {status})")),
                "{e}"
            );
        }
        for (status, code) in [
            (403, "AccessDenied"),
            (404, "NoSuchKey"),
            (400, "InvalidRequest"),
        ] {
            let e = answered(status, code);
            assert!(
                matches!(e, FarmError::Store { .. }),
                "HTTP {status} {code}: {e:?}"
            );
        }
    }
}
