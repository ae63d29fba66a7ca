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

/// The prefix of a tenant's uploads: a tenant's URLs write only under it, so an upload can
/// overwrite neither an output, nor another job's input, nor a watched prefix's files.
pub(super) fn upload_prefix(tenant: &str) -> String {
    format!("uploads/{tenant}/")
}

/// The body of `POST /v1/uploads`: an explicit object, or a file name placed in the upload bucket.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UploadRequest {
    bucket: Option<String>,
    key: Option<String>,
    filename: Option<String>,
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
}

/// Where an upload of `who` goes (bucket allowed, key valid and, for a tenant, under its
/// upload prefix), or (code, message).
fn upload_target(state: &Uploads, who: &Principal, body: &[u8]) -> Result<S3Uri, Invalid> {
    let invalid = |m: String| (ErrorCode::InvalidUpload, m);
    let req: UploadRequest = serde_json::from_slice(body).map_err(|e| {
        let msg = format!("invalid upload JSON: {e}");
        (ErrorCode::BadRequest, msg)
    })?;
    let (bucket, key) = match (req.bucket, req.key, req.filename) {
        (Some(b), Some(k), None) => (b, k),
        (None, None, Some(f)) => {
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
    if !who.admin && !key.starts_with(&upload_prefix(&who.tenant)) {
        return Err(invalid(format!(
            "upload key '{key}': a tenant uploads under {} only (or give \"filename\")",
            upload_prefix(&who.tenant)
        )));
    }
    S3Uri::parse(&format!("s3://{bucket}/{key}")).map_err(|e| invalid(format!("upload: {e}")))
}

/// Answers a presigned PUT URL (valid 15 min) so a client uploads its input straight to S3.
pub(crate) async fn create_upload(
    State(state): State<Uploads>,
    Extension(who): Extension<Principal>,
    body: axum::body::Bytes,
) -> Response {
    let uri = match upload_target(&state, &who, &body) {
        Ok(u) => u,
        Err((code, msg)) => return error(code, msg),
    };
    let store = state.s3.store(&uri.bucket);
    match store.presign_put(&uri.key, UPLOAD_EXPIRES).await {
        // The URL is a credential for one object: it goes to the caller, never to the log.
        Ok(url) => {
            tracing::info!(input = %uri, "upload URL issued");
            let expires_in = UPLOAD_EXPIRES.as_secs();
            let body = json!({"url": url, "input": uri.to_string(), "expires_in": expires_in});
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
    use super::sanitise_filename;

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
