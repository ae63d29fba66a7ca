//! `tessera-dispatcher`: parses its settings and serves until SIGTERM.

use clap::Parser;
use tessera_dispatcher::{serve, DispatcherArgs, Settings};

fn main() -> anyhow::Result<()> {
    let args = DispatcherArgs::parse();
    tessera_farm::signals::init_logging(&args.log).map_err(anyhow::Error::msg)?;
    let settings = Settings::resolve(&args).map_err(anyhow::Error::msg)?;
    tessera_farm::signals::run_service(|shutdown| serve(settings, shutdown))?;
    Ok(())
}
