//! The API's HTTP/1.1 server: a bounded number of connections, a deadline for each
//! request's headers and for each whole request, and a graceful stop.
//!
//! Why not `axum::serve`: it reads headers without a deadline and takes every connection,
//! so a few hundred clients that send a byte a second (slow loris) hold the dispatcher's
//! sockets and memory for as long as they like. Here a client gets `header_timeout` to send
//! its headers (then the connection is closed), `request_timeout` for the whole request,
//! body included (then 408), and at most `max_connections` are served at once (later ones
//! wait in the kernel's accept queue, which the client's own timeout bounds).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long connections may take to finish their request once the server stops.
const DRAIN: Duration = Duration::from_secs(10);

/// The server's limits against slow and numerous clients.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Time to send a request's headers, from the first byte (or from the end of the last
    /// response on a kept-alive connection).
    pub header_timeout: Duration,
    /// Time for a whole request, body included, until the response starts.
    pub request_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            max_connections: 1024,
        }
    }
}

/// Answers 408 when the request (reading its body included) takes longer than `limit`.
pub async fn request_deadline(limit: Duration, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => {
            let body = axum::Json(serde_json::json!({"error": {
                "code": "request_timeout",
                "message": format!("the request took longer than {} s", limit.as_secs()),
            }}));
            let mut resp = (StatusCode::REQUEST_TIMEOUT, body).into_response();
            resp.headers_mut()
                .insert("connection", axum::http::HeaderValue::from_static("close"));
            resp
        }
    }
}

/// Gives every error answer the API's JSON shape: the framework's own refusals (an
/// unreadable query, a body over the limit, an unknown path or method) come as plain text,
/// and a client that parses `{"error": {"code", "message"}}` must not meet another shape.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/html"));
    // The dashboard's (ui/) error pages are HTML meant for a person: they stay as they are.
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let code = match status {
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::REQUEST_TIMEOUT => "request_timeout",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
    };
    let mut message = String::from_utf8_lossy(&text).trim().to_string();
    if message.is_empty() {
        message = status.canonical_reason().unwrap_or("error").to_string();
    }
    let body = serde_json::json!({"error": {"code": code, "message": message}});
    let mut out = (status, axum::Json(body)).into_response();
    for (name, value) in &parts.headers {
        if name != axum::http::header::CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// Serves `app` on `listener` until `shutdown`, then lets open requests finish for a while.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: HttpLimits,
    shutdown: CancellationToken,
) {
    let places = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let tracker = TaskTracker::new();
    loop {
        let place = tokio::select! {
            _ = shutdown.cancelled() => break,
            p = places.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, a reset before accept: wait, do not spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let service = TowerToHyperService::new(app.clone());
        let stop = shutdown.clone();
        tracker.spawn(async move {
            let _place = place;
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            let done = tokio::select! {
                r = conn.as_mut() => r,
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    tokio::time::timeout(DRAIN, conn.as_mut()).await.unwrap_or(Ok(()))
                }
            };
            if let Err(e) = done {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    tracker.close();
    let _ = tokio::time::timeout(DRAIN, tracker.wait()).await;
}
