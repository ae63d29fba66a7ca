//! Process setup shared by the binaries: logging, the runtime, shutdown on SIGTERM or SIGINT.

mod json_log;
pub use json_log::{json_subscriber, FlatJson, LogFormat};

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

/// Logs to stderr through `tracing` with `filter` (e.g. `info`, `tessera=debug`) in `format`:
/// text with colour codes only on a terminal, so log files and collectors get plain text, or
/// one JSON object a line carrying the ids of the enclosing spans (json_log.rs).
///
/// Why shared: every tessera binary logs the same way.
pub fn init_logging(filter: &str, format: LogFormat) -> Result<(), String> {
    match format {
        LogFormat::Text => {
            let filter = tracing_subscriber::EnvFilter::try_new(filter)
                .map_err(|e| format!("log filter '{filter}': {e}"))?;
            tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .init();
        }
        LogFormat::Json => {
            let subscriber = json_subscriber(filter, std::io::stderr)?;
            tracing::subscriber::set_global_default(subscriber).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Runs a service on a multi-threaded runtime until it returns; `serve` gets the token
/// [`shutdown_on_signals`] cancels.
///
/// Why shared: the worker and the dispatcher start and stop the same way.
pub fn run_service<F>(serve: impl FnOnce(CancellationToken) -> F) -> Result<(), crate::FarmError>
where
    F: std::future::Future<Output = Result<(), crate::FarmError>>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| crate::FarmError::Io {
            path: "(tokio runtime)".into(),
            reason: e.to_string(),
        })?;
    runtime.block_on(async { serve(shutdown_on_signals()).await })
}
