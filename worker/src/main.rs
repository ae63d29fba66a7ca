//! `tessera-worker`: parses its settings and runs the worker service until SIGTERM, or
//! `tessera-worker health`: asks the running worker's /healthz (container HEALTHCHECKs).

use clap::Parser;
use tessera_worker::service::{serve, ServiceSettings, WorkerArgs, WorkerCommand};
use tracing::Instrument;

fn main() -> anyhow::Result<()> {
    let args = WorkerArgs::parse();
    if let Some(WorkerCommand::Health(health)) = &args.command {
        let listen = ServiceSettings::resolve_metrics_listen(&args).map_err(anyhow::Error::msg)?;
        let url = tessera_farm::health::check(listen, health.timeout())
            .map_err(|e| anyhow::anyhow!("tessera-worker health: {e}"))?;
        println!("healthy: {url}");
        return Ok(());
    }
    tessera_farm::signals::init_logging(&args.log, args.log_format).map_err(anyhow::Error::msg)?;
    let settings = ServiceSettings::resolve(&args).map_err(anyhow::Error::msg)?;
    // Every line names the worker (JSON logs); its tasks add their ids (consume.rs).
    let span = tracing::info_span!("worker", worker = %settings.worker.id);
    tessera_farm::signals::run_service(|shutdown| serve(settings, shutdown).instrument(span))?;
    Ok(())
}
