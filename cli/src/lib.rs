//! tessera-cli: the `tessera` command's logic (the binary's `main` only parses and calls in).
//!
//! Why a library: the command's behaviour (config layering, the one-process farm, progress) is
//! unit-tested here, and other binaries may embed the one-process farm.

pub mod args;
pub mod client;
pub mod config;
pub mod gpu;
pub mod jobview;
mod local_farm;
pub mod package_args;
pub mod probe;
pub mod progress;
pub mod quality;
pub mod remote;
pub mod transcode;

pub use config::Cli;

use std::process::ExitCode;

use config::{Command, TranscodeConfig};
use tokio_util::sync::CancellationToken;

/// Sets up logging and a runtime, runs the command, prints errors; the process exit code.
pub fn main_with(cli: Cli) -> ExitCode {
    if tessera_farm::signals::init_logging(&cli.log, cli.log_format).is_err() {
        let _ = tessera_farm::signals::init_logging("warn", cli.log_format);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    runtime.spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("interrupted: cancelling");
            on_signal.cancel();
        }
    });
    match runtime.block_on(run(cli, shutdown)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a blocking remote command off the async runtime's worker threads.
async fn blocking(f: impl FnOnce() -> anyhow::Result<()> + Send + 'static) -> anyhow::Result<()> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| anyhow::anyhow!("command thread failed: {e}"))?
}

/// Runs a parsed command until done or `shutdown`.
pub async fn run(cli: Cli, shutdown: CancellationToken) -> anyhow::Result<()> {
    let config = cli.config.clone();
    match cli.command {
        Command::Submit(args) => {
            blocking(move || remote::submit(args, config.as_deref(), &shutdown)).await
        }
        Command::Status(args) => blocking(move || remote::status(args, config.as_deref())).await,
        Command::List(args) => blocking(move || remote::list(args, config.as_deref())).await,
        Command::Cancel(args) => blocking(move || remote::cancel(args, config.as_deref())).await,
        Command::Gpu(args) => gpu::run(&args).await,
        Command::Probe(args) => probe::run(&args).await,
        Command::Quality(args) => quality::run(&args).await,
        Command::Transcode(args) => {
            let cfg = TranscodeConfig::resolve(*args, cli.config.as_deref())?;
            let report_path = cfg.report.clone();
            let report = transcode::transcode(cfg, shutdown).await?;
            let json = serde_json::to_string_pretty(&report)?;
            if let Some(path) = report_path {
                std::fs::write(&path, &json)
                    .map_err(|e| anyhow::anyhow!("report {}: {e}", path.display()))?;
            }
            println!(
                "{}: {} frames in {} segments, {:.1} s ({:.1} fps){}",
                report
                    .outputs
                    .first()
                    .map_or("-", |o| o.destination.as_str()),
                report.frames,
                report.segments,
                report.wall_s,
                report.encode_fps,
                report
                    .quality
                    .as_ref()
                    .map(quality::summary)
                    .unwrap_or_default()
            );
            for warning in &report.warnings {
                eprintln!("warning: {warning}");
            }
            Ok(())
        }
    }
}
