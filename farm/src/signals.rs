//! Shutdown on SIGTERM or SIGINT, for the service binaries.

use tokio_util::sync::CancellationToken;

/// A token cancelled at the first SIGTERM (Kubernetes, Docker, spot notices relayed by the node)
/// or SIGINT. Must be called inside a tokio runtime.
///
/// Why shared: the worker and the dispatcher drain the same way; one place decides which
/// signals mean "stop taking work".
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            tracing::error!("cannot watch SIGTERM");
            return;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: shutting down"),
        }
        trigger.cancel();
    });
    token
}
