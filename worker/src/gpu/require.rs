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
/// when none is usable; with `require`, the cards, each opening a CUDA context in a media
/// child (`probe`), or an error naming why the worker cannot encode on its GPU.
pub async fn for_worker(
    settings: &GpuSettings,
    caps: &HwCapabilities,
    probe: CardProbe,
) -> Result<Option<Arc<Gpus>>, FarmError> {
    if settings.enabled != GpuMode::Require {
        return Ok(Gpus::detect(settings, caps));
    }
    let gpus = Gpus::find(settings, caps).map_err(refused)?;
    let mut usable = 0;
    for ordinal in gpus.ordinals_in_use() {
        if probe(ordinal).await {
            usable += 1;
        } else {
            tracing::error!(
                device = ordinal,
                "TESSERA_GPU=require: the card cannot open a CUDA context"
            );
        }
    }
    if usable == 0 {
        return Err(refused(
            "no card opens a CUDA context in the media child (driver, device plugin or \
             NVIDIA_DRIVER_CAPABILITIES)"
                .to_string(),
        ));
    }
    tracing::info!(cards = usable, "TESSERA_GPU=require: GPU worker");
    Ok(Some(gpus))
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
