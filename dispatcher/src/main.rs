//! `tessera-dispatcher`: parses its settings and serves until SIGTERM, or
//! `tessera-dispatcher health`: asks the running dispatcher's /healthz (container
//! HEALTHCHECKs).

use clap::Parser;
use tessera_dispatcher::{serve, DispatcherArgs, DispatcherCommand, Settings};

fn main() -> anyhow::Result<()> {
    let args = DispatcherArgs::parse();
    if let Some(DispatcherCommand::Health(health)) = &args.command {
        let listen = Settings::resolve_listen(&args).map_err(anyhow::Error::msg)?;
        let url = tessera_farm::health::check(listen, health.timeout())
            .map_err(|e| anyhow::anyhow!("tessera-dispatcher health: {e}"))?;
        println!("healthy: {url}");
        return Ok(());
    }
    tessera_farm::signals::init_logging(&args.log, args.log_format).map_err(anyhow::Error::msg)?;
    let settings = Settings::resolve(&args).map_err(anyhow::Error::msg)?;
    tessera_farm::signals::run_service(|shutdown| serve(settings, shutdown))?;
    Ok(())
}
