//! The card probe a GPU worker runs in a media child (`tessera_media::probe_card`): on every
//! card at its start, and on a card whose probation is over.
//!
//! Why apart from gpu.rs: the probe is one media operation and its logging; the scheduling
//! of cards, which decides when to probe, stays in gpu.rs and require.rs.

use std::sync::Arc;
use std::time::Duration;

/// Probes a card (by CUDA ordinal) in a media child: whether it passed.
pub type CardProbe = Arc<
    dyn Fn(u32) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> + Send + Sync,
>;

/// The card probe in a media child of `sandbox` (no address-space limit, a minute at most):
/// a CUDA context on card `device`, an NVENC session unless the worker `encode`s in software,
/// and an NVDEC decode (`tessera_media::probe_card`). Why here: the worker's probation and
/// start, and `tessera gpu --probe`, run the same probe.
pub async fn probe_card(
    sandbox: &tessera_farm::sandbox::Sandbox,
    device: u32,
    encode: bool,
) -> Result<tessera_model::capabilities::CardProbeReport, tessera_farm::FarmError> {
    let limits = tessera_farm::sandbox::Limits {
        timeout: Duration::from_secs(60),
        ..tessera_farm::sandbox::Limits::default()
    }
    .for_gpu();
    let op = tessera_farm::sandbox::MediaOp::GpuProbe { device, encode };
    let (report, _) = sandbox.run(&op, limits, &mut |_| {}).await?;
    Ok(report)
}

/// [`probe_card`] as the worker's [`CardProbe`]: passed or not, logged either way.
pub fn probe_in_child(sandbox: tessera_farm::sandbox::Sandbox, encode: bool) -> CardProbe {
    Arc::new(move |device| {
        let sandbox = sandbox.clone();
        Box::pin(async move {
            match probe_card(&sandbox, device, encode).await {
                Ok(r) => {
                    tracing::info!(device, encoder = %r.encoder, decoder = %r.decoder,
                        frames = r.frames, pci = r.pci_bus_id.as_deref().unwrap_or("?"),
                        "GPU probe passed");
                    true
                }
                Err(e) => {
                    tracing::warn!(device, error = %e, "GPU probe failed");
                    false
                }
            }
        })
    })
}
