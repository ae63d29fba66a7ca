//! `tessera-dispatcher`: parses its settings and serves until SIGTERM.

use clap::Parser;
use tessera_dispatcher::service::{serve, DispatcherArgs, Settings};

fn main() -> anyhow::Result<()> {
    // Media children (probe, split, audio, stitch) are this same binary.
    tessera_farm::sandbox::run_child_if_requested();
    let args = DispatcherArgs::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&args.log)?)
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: log files and collectors get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let settings = Settings::resolve(&args).map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime
        .block_on(async { serve(settings, tessera_farm::signals::shutdown_on_signals()).await })?;
    Ok(())
}
