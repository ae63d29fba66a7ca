//! `POST /v1/uploads`: presigned URLs so clients upload inputs straight to S3.
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;
use tessera_model::error_code::ErrorCode;

use crate::auth::Principal;
use crate::error::error;
use crate::job_plan::S3Uri;
use crate::jobspec::Invalid;

/// How long an upload URL stays valid: long enough to start a large upload, short enough
/// that a leaked URL is soon worthless.
const UPLOAD_EXPIRES: std::time::Duration = std::time::Duration::from_secs(900);

/// The limits on upload URLs (review H7): without them a tenant could upload objects of any
/// size, and ask for URLs without end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadLimits {
    /// Largest upload: a request's `size` above it is refused, and the URL carries the size
    /// as its signed Content-Length, so the store refuses any other length.
    pub max_bytes: u64,
    /// URLs one tenant (not an admin) may be given per [`UPLOAD_EXPIRES`]: the most it can
    /// hold valid at once.
    pub urls_per_window: u32,
}

/// When each tenant was given its upload URLs in the last [`UPLOAD_EXPIRES`].
///
/// Why in memory: the limit bounds URLs valid at once, and a restart does not make the ones
/// already given any more numerous than a tenant could have had anyway (one window's worth).
#[derive(Debug, Default)]
pub struct UrlLedger(
    std::sync::Mutex<
        std::collections::HashMap<String, std::collections::VecDeque<std::time::Instant>>,
    >,
);

impl UrlLedger {
    /// Takes one of `tenant`'s `limit` URLs in the window ending `now`; `false` when all are
    /// taken (nothing is recorded then).
    pub fn take(&self, tenant: &str, limit: u32, now: std::time::Instant) -> bool {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let given = map.entry(tenant.to_string()).or_default();
        while given
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= UPLOAD_EXPIRES)
        {
            given.pop_front();
        }
        if given.len() >= limit as usize {
            return false;
        }
        given.push_back(now);
        true
    }
}

/// The prefix of a tenant's uploads: a tenant's URLs write only under it, so an upload can
/// overwrite neither an output, nor another job's input, nor a watched prefix's files.
pub(crate) fn upload_prefix(tenant: &str) -> String {
    format!("uploads/{tenant}/")
}

/// The longest file name `POST /v1/uploads` takes (it keeps at most 100 bytes of it): the
/// schema states it, so a longer one is refused rather than cut.
pub(crate) const MAX_FILENAME_CHARS: usize = 1024;

/// The body of `POST /v1/uploads`: an explicit object, or a file name placed in the upload bucket.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UploadRequest {
    bucket: Option<String>,
    key: Option<String>,
    filename: Option<String>,
    /// The upload's length in bytes: signed into the URL as its Content-Length. Required of
    /// tenants; an admin without it gets a URL of any length, as before.
    size: Option<u64>,
}

/// Reduces a client's file name to a safe last key segment: its base name, with every
/// character outside `[A-Za-z0-9._-]` replaced by `_`, no leading dots, at most 100 bytes.
/// Why: the name comes from the user's machine and ends up inside an object key.
fn sanitise_filename(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let safe = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    let clean: String = base
        .chars()
        .map(|c| if safe(c) { c } else { '_' })
        .collect();
    let clean: String = clean.trim_start_matches('.').chars().take(100).collect();
    if clean.is_empty() {
        "upload".into()
    } else {
        clean
    }
}

/// What `POST /v1/uploads` needs of the service: the handler's narrow state.
#[derive(Clone)]
pub struct Uploads {
    /// Buckets jobs may read from and write to.
    pub buckets: Vec<String>,
    /// Bucket a filename-only upload goes to ("": none set).
    pub upload_bucket: String,
    /// Presigns the upload URL.
    pub s3: tessera_farm::store::S3Client,
    /// Size and count limits.
    pub limits: UploadLimits,
    /// URLs given per tenant.
    pub ledger: std::sync::Arc<UrlLedger>,
}

/// Where an upload of `who` goes (bucket allowed, key valid and, for a tenant, under its
/// upload prefix) and its signed length, or (code, message).
fn upload_target(
    state: &Uploads,
    who: &Principal,
    body: &[u8],
) -> Result<(S3Uri, Option<u64>), Invalid> {
    let invalid = |m: String| (ErrorCode::InvalidUpload, m);
    let req: UploadRequest = serde_json::from_slice(body).map_err(|e| {
        let msg = format!("invalid upload JSON: {e}");
        (ErrorCode::BadRequest, msg)
    })?;
    let size = upload_size(state, who, req.size)?;
    let (bucket, key) = match (req.bucket, req.key, req.filename) {
        (Some(b), Some(k), None) => (b, k),
        (None, None, Some(f)) => {
            let most = MAX_FILENAME_CHARS;
            if f.chars().count() > most {
                return Err(invalid(format!("filename: more than {most} characters")));
            }
            let id = uuid::Uuid::new_v4().simple();
            let key = format!(
                "{}{id}/{}",
                upload_prefix(&who.tenant),
                sanitise_filename(&f)
            );
            (state.upload_bucket.clone(), key)
        }
        _ => {
            return Err(invalid(
                "give \"bucket\" and \"key\", or \"filename\"".into(),
            ))
        }
    };
    if !state.buckets.contains(&bucket) {
        let msg = format!("upload bucket '{bucket}' is not one this farm may use");
        return Err((ErrorCode::BucketNotAllowed, msg));
    }
    // An object the tenant may not write: 403 naming the object and the tenant, as a job's
    // input or destination outside its scopes is answered.
    if !who.admin && !key.starts_with(&upload_prefix(&who.tenant)) {
        return Err((
            ErrorCode::ObjectNotAllowed,
            format!(
                "upload s3://{bucket}/{key} is outside what tenant '{}' may upload \
                 (s3://{bucket}/{}; or give \"filename\")",
                who.tenant,
                upload_prefix(&who.tenant)
            ),
        ));
    }
    let uri = S3Uri::parse(&format!("s3://{bucket}/{key}"))
        .map_err(|e| invalid(format!("upload: {e}")))?;
    Ok((uri, size))
}

/// The upload's signed length: required of a tenant, at most `max_bytes`.
fn upload_size(
    state: &Uploads,
    who: &Principal,
    size: Option<u64>,
) -> Result<Option<u64>, Invalid> {
    let max = state.limits.max_bytes;
    match size {
        None if !who.admin => Err((
            ErrorCode::InvalidUpload,
            format!("give \"size\": the upload's length in bytes (at most {max})"),
        )),
        Some(n) if n > max => Err((
            ErrorCode::InvalidUpload,
            format!("upload size {n} bytes is over this farm's limit of {max} bytes"),
        )),
        other => Ok(other),
    }
}

/// Answers a presigned PUT URL (valid 15 min) so a client uploads its input straight to S3.
pub(crate) async fn create_upload(
    State(state): State<Uploads>,
    Extension(who): Extension<Principal>,
    body: axum::body::Bytes,
) -> Response {
    let (uri, size) = match upload_target(&state, &who, &body) {
        Ok(u) => u,
        Err((code, msg)) => return error(code, msg),
    };
    let limit = state.limits.urls_per_window;
    if !who.admin
        && !state
            .ledger
            .take(&who.tenant, limit, std::time::Instant::now())
    {
        let window = UPLOAD_EXPIRES.as_secs() / 60;
        let msg = format!(
            "tenant {} was given {limit} upload URLs in the last {window} minutes, the most \
             this farm allows: wait for some to expire",
            who.tenant
        );
        return error(ErrorCode::TooManyUploads, msg);
    }
    let store = state.s3.store(&uri.bucket);
    match store
        .presign_put_sized(&uri.key, UPLOAD_EXPIRES, size)
        .await
    {
        // The URL is a credential for one object: it goes to the caller, never to the log.
        Ok(url) => {
            tracing::info!(input = %uri, "upload URL issued");
            let expires_in = UPLOAD_EXPIRES.as_secs();
            let mut body = json!({"url": url, "input": uri.to_string(), "expires_in": expires_in});
            if let Some(n) = size {
                // The PUT must carry exactly this length: it is part of the signature.
                body["size"] = json!(n);
            }
            (StatusCode::CREATED, Json(body)).into_response()
        }
        Err(e) => {
            let msg = format!("{uri}: {e}");
            error(ErrorCode::StoreUnavailable, msg)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{sanitise_filename, UrlLedger, UPLOAD_EXPIRES};
    use std::time::{Duration, Instant};

    #[test]
    fn a_tenant_gets_its_urls_per_window_and_others_theirs() {
        let ledger = UrlLedger::default();
        let t0 = Instant::now();
        assert!((0..3).all(|i| ledger.take("acme", 3, t0 + Duration::from_secs(i))));
        assert!(!ledger.take("acme", 3, t0 + Duration::from_secs(10)));
        assert!(ledger.take("beta", 3, t0 + Duration::from_secs(10)));
        // The first URL has expired: one place is free again, not more.
        let later = t0 + UPLOAD_EXPIRES;
        assert!(ledger.take("acme", 3, later));
        assert!(!ledger.take("acme", 3, later));
    }

    #[test]
    fn upload_filenames_are_sanitised() {
        assert_eq!(sanitise_filename("My Video (1).mp4"), "My_Video__1_.mp4");
        assert_eq!(sanitise_filename("../../etc/passwd"), "passwd");
        assert_eq!(sanitise_filename("C:\\Users\\a\\clip.mov"), "clip.mov");
        assert_eq!(sanitise_filename(".."), "upload");
        assert_eq!(sanitise_filename("..hidden.mp4"), "hidden.mp4");
        assert_eq!(sanitise_filename(""), "upload");
        assert_eq!(sanitise_filename(&"x".repeat(300)).len(), 100);
    }
}
