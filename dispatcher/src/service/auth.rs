//! Who is calling: bearer tokens checked in constant time.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tessera_farm::ErrorCode;

use super::api::{error, AppState};

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(super) async fn auth(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::as_bytes);
    let ok = presented.is_some_and(|p| {
        // Check every token so the time taken does not tell which one nearly matched.
        state
            .tokens
            .iter()
            .fold(false, |acc, t| acc | constant_time_eq(p, t.as_bytes()))
    });
    if ok {
        next.run(req).await
    } else {
        error(ErrorCode::Unauthorized, "a valid bearer token is required")
    }
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
