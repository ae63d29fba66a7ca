//! `tessera-worker`: parses its settings and runs the worker service until SIGTERM.

use clap::Parser;
use tessera_worker::service::{serve, ServiceSettings, WorkerArgs};

fn main() -> anyhow::Result<()> {
    // Media children are this same binary started with a hidden argument.
    tessera_farm::sandbox::run_child_if_requested();
    let args = WorkerArgs::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&args.log)?)
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: log files and collectors get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let settings = ServiceSettings::resolve(&args).map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime
        .block_on(async { serve(settings, tessera_farm::signals::shutdown_on_signals()).await })?;
    Ok(())
}
