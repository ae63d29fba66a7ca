//! `tessera-worker`: parses its settings and runs the worker service until SIGTERM.

use clap::Parser;
use tessera_worker::service::{serve, ServiceSettings, WorkerArgs};

fn main() -> anyhow::Result<()> {
    let args = WorkerArgs::parse();
    tessera_farm::signals::init_logging(&args.log).map_err(anyhow::Error::msg)?;
    let settings = ServiceSettings::resolve(&args).map_err(anyhow::Error::msg)?;
    tessera_farm::signals::run_service(|shutdown| serve(settings, shutdown))?;
    Ok(())
}
