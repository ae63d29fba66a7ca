//! The API's error answer: a JSON body with the catalog's stable code, sent with the code's
//! HTTP status.
//!
//! Why a file of its own: every handler (jobs, uploads, the auth layer) answers errors the
//! same way; here they share it without importing the router.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use tessera_model::error_code::ErrorCode;

/// Why an action was refused: the catalog's code and a sentence for the caller (the API
/// answers it as JSON, the dashboard as a page).
pub type Refusal = (ErrorCode, String);

/// The HTTP status of an error code (the catalog's, as axum's type).
pub fn status(code: &ErrorCode) -> StatusCode {
    StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// A JSON error with a stable code, answered with the code's HTTP status.
pub fn error(code: ErrorCode, message: impl Into<String>) -> Response {
    (
        status(&code),
        Json(json!({"error": {"code": code, "message": message.into()}})),
    )
        .into_response()
}
