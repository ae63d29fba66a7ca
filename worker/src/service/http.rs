//! The worker service's HTTP endpoint: `/metrics`, `/healthz` and `/readyz`.
//!
//! Why apart from the counters (crate::metrics): only the `tessera-worker` service serves
//! HTTP; the one-process CLI runs the same workers without it, and without axum.

use std::net::SocketAddr;
use std::sync::Arc;

use tessera_farm::FarmError;
use tokio_util::sync::CancellationToken;

use crate::drain::Drain;
use crate::gpu::Gpus;
use crate::metrics::WorkerMetrics;

fn listen_err(addr: SocketAddr, e: std::io::Error) -> FarmError {
    FarmError::Io {
        path: addr.to_string(),
        reason: format!("metrics listener: {e}"),
    }
}

/// Serves `/metrics`, `/healthz` and `/readyz` (503 with the reason while draining) on `addr`
/// until `shutdown`; returns once bound.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<WorkerMetrics>,
    gpus: Option<Arc<Gpus>>,
    drain: Arc<Drain>,
    shutdown: CancellationToken,
) -> Result<(), FarmError> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| listen_err(addr, e))?;
    let bound = listener.local_addr().map_err(|e| listen_err(addr, e))?;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let (m, g) = (metrics.clone(), gpus.clone());
                async move {
                    (
                        [("content-type", "text/plain; version=0.0.4")],
                        m.render(g.as_deref()),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let reason = drain.reason();
                async move {
                    match reason {
                        None => (axum::http::StatusCode::OK, "ready".to_string()),
                        Some(r) => (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            format!("draining: {}", r.as_str()),
                        ),
                    }
                }
            }),
        );
    // Scripts read the bound address from this line (port 0 picks a free one).
    println!("tessera-worker metrics on http://{bound}");
    tracing::info!(%bound, "metrics endpoint listening");
    tokio::spawn(async move {
        let stop = shutdown.clone();
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "metrics endpoint stopped");
        }
    });
    Ok(())
}
