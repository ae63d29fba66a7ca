//! `TESSERA_GPU=require`: a GPU worker that cannot encode on its card exits with an error
//! instead of becoming a CPU worker.
//!
//! Why: with `auto`, a GPU pod whose card cannot be used (the `video` driver capability
//! missing, an old driver, a device-plugin fault, an FFmpeg without NVENC) runs CPU-only and
//! consumes the CPU queue, while the GPU queue stays full and KEDA's `eager` ScaledJob keeps
//! starting GPU nodes that encode x264. Failing the pod makes the fault visible (a failed Job,
//! its reason in the log) and leaves the GPU work queued for a pod that can do it.

use std::sync::Arc;

use tessera_farm::FarmError;
use tessera_model::capabilities::HwCapabilities;

use super::{CardProbe, GpuMode, GpuSettings, Gpus};

/// The worker's cards for `settings`: `None` (CPU-only) when they are off, or with `auto`
/// when none is usable; with `require`, the cards or an error naming why the worker cannot
/// encode on its GPU. Either way each card is probed first (`probe`: a CUDA context, an NVENC
/// session unless the worker encodes in software, an NVDEC decode); one that fails starts
/// out of scheduling, on probation, and none passing is the same as no card.
pub async fn for_worker(
    settings: &GpuSettings,
    caps: &HwCapabilities,
    probe: CardProbe,
) -> Result<Option<Arc<Gpus>>, FarmError> {
    let gpus = match settings.enabled {
        GpuMode::Require => Gpus::find(settings, caps).map_err(refused)?,
        _ => match Gpus::detect(settings, caps) {
            Some(gpus) => gpus,
            None => return Ok(None),
        },
    };
    let usable = probe_all(&gpus, &probe).await;
    if usable > 0 {
        tracing::info!(cards = usable, mode = ?settings.enabled, "GPU worker");
        return Ok(Some(gpus));
    }
    let why = "no card passed its probe in the media child (CUDA context, NVENC session, NVDEC \
               decode: the driver, the device plugin or NVIDIA_DRIVER_CAPABILITIES without \
               `video`)";
    if settings.enabled == GpuMode::Require {
        return Err(refused(why.to_string()));
    }
    tracing::warn!(reason = why, "no usable GPU: CPU-only worker");
    Ok(None)
}

/// Probes every card of `gpus`; one that fails is taken out of scheduling (its probation
/// probe may bring it back). Returns how many passed.
async fn probe_all(gpus: &Gpus, probe: &CardProbe) -> usize {
    let mut usable = 0;
    for (index, ordinal) in gpus.cards_in_use() {
        if probe(ordinal).await {
            usable += 1;
        } else {
            tracing::error!(card = index, device = ordinal, "the card failed its probe");
            let _ = gpus
                .scheduler
                .mark_unhealthy(index, "failed its probe at start");
        }
    }
    usable
}

/// The error a required GPU that is not usable ends the worker with.
fn refused(why: String) -> FarmError {
    let reason = format!("TESSERA_GPU=require, but this worker cannot encode on a GPU: {why}");
    tracing::error!(%reason, "exiting");
    FarmError::WorkerUnfit {
        reason,
        pause: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_probe() -> CardProbe {
        Arc::new(|_| Box::pin(async { panic!("no card to probe") }))
    }

    /// A card that fails its probe starts on probation; the others take work.
    #[tokio::test]
    async fn a_card_failing_its_probe_starts_out_of_scheduling() {
        use tessera_gpu::{CardInfo, Inventory, SessionScheduler};
        let cards = vec![
            CardInfo::simulated(0, "Tesla T4", "GPU-a"),
            CardInfo::simulated(1, "Tesla T4", "GPU-b"),
        ];
        let inv = Inventory::simulated(cards);
        let settings = GpuSettings::default();
        let scheduler = SessionScheduler::new(&inv, &settings.budget);
        let ordinals = crate::cuda_ordinal::CudaOrdinals::new(&inv.cards, None);
        let gpus = Gpus::with(scheduler.clone(), inv, &settings, ordinals);
        let second_fails: CardProbe = Arc::new(|ordinal| Box::pin(async move { ordinal != 1 }));
        assert_eq!(probe_all(&gpus, &second_fails).await, 1);
        let health: Vec<bool> = (scheduler.snapshot().cards.iter())
            .map(|c| c.healthy)
            .collect();
        assert_eq!(health, [true, false]);
        let none_pass: CardProbe = Arc::new(|_| Box::pin(async { false }));
        assert_eq!(probe_all(&gpus, &none_pass).await, 0);
    }

    #[tokio::test]
    async fn require_without_a_usable_gpu_is_an_error_and_auto_runs_cpu_only() {
        // An FFmpeg without the CUDA path: nothing to encode on, whatever the machine has.
        let caps = HwCapabilities::default();
        let mut settings = GpuSettings {
            enabled: GpuMode::Require,
            ..GpuSettings::default()
        };
        let err = for_worker(&settings, &caps, no_probe()).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("TESSERA_GPU=require"), "{text}");
        assert!(text.contains("CUDA path or NVENC"), "{text}");
        settings.enabled = GpuMode::Auto;
        assert!(for_worker(&settings, &caps, no_probe())
            .await
            .unwrap()
            .is_none());
        settings.enabled = GpuMode::Off;
        assert!(for_worker(&settings, &caps, no_probe())
            .await
            .unwrap()
            .is_none());
    }
}
