//! `tessera gpu`: what this machine's NVIDIA cards offer the farm (NVML inventory, the
//! session budget per card, the FFmpeg build's NVENC/NVDEC support) and, on request, an
//! NVDEC decode of a file with its speed.
//!
//! Why: the first question on a new GPU node is "what will tessera do here"; this answers
//! it with the same code the worker uses, and scripts/gpu-smoke.sh builds on it.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use tessera_farm::sandbox::{Confinement, Limits, MediaOp, Sandbox};
use tessera_gpu::{BudgetConfig, SessionNeed, SessionScheduler};
use tessera_model::capabilities::{CardProbeReport, NvdecReport};

/// `tessera gpu` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct GpuArgs {
    /// Also decode this file on NVDEC (no copy to host memory) and report frames and fps.
    #[arg(long)]
    pub nvdec_check: Option<PathBuf>,
    /// Also probe the card as a GPU worker does at its start and after a probation: a CUDA
    /// context, an NVENC session encoding two pictures, NVDEC decoding them on the card.
    /// Fails (exit 1) when any part fails.
    #[arg(long)]
    pub probe: bool,
    /// With --probe: no NVENC (cards without it; the pictures come from libx264).
    #[arg(long)]
    pub decode_only: bool,
    /// The card (CUDA ordinal) for --nvdec-check and --probe.
    #[arg(long, default_value_t = 0)]
    pub device: u32,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `tessera gpu`; fails (exit 1) only when a requested NVDEC check or probe fails. What FFmpeg
/// offers and the NVDEC decode come from the media child, as in the worker.
pub async fn run(args: &GpuArgs) -> anyhow::Result<()> {
    // Children read the file of --nvdec-check, if any, and write nowhere.
    let confinement = (args.nvdec_check.iter()).fold(Confinement::default(), |c, p| c.reading(p));
    let sandbox = Sandbox::current()?.confined(confinement);
    let caps = sandbox.capabilities().await?.hw;
    let ffmpeg = json!({
        "cuda_hwaccel": caps.cuda_hwaccel, "scale_cuda": caps.scale_cuda,
        "h264_nvenc": caps.h264_nvenc, "hevc_nvenc": caps.hevc_nvenc, "av1_nvenc": caps.av1_nvenc,
    });
    let (cards, nvml_error, nvenc_sessions) = inventory();
    let nvdec = match &args.nvdec_check {
        Some(path) => {
            let op = MediaOp::NvdecCheck {
                input: path.clone(),
                device: args.device,
            };
            let limits = Limits {
                timeout: Duration::from_secs(1800),
                ..Limits::default()
            }
            .for_gpu();
            let (report, _): (NvdecReport, _) = sandbox
                .run(&op, limits, &mut |_| {})
                .await
                .map_err(|e| anyhow::anyhow!("NVDEC check of {}: {e}", path.display()))?;
            Some(report)
        }
        None => None,
    };
    let probe = match args.probe {
        true => Some(card_probe(&sandbox, args.device, !args.decode_only).await?),
        false => None,
    };
    let report = json!({
        "probe": probe,
        "ffmpeg": ffmpeg,
        "nvml_error": nvml_error,
        "cards": cards,
        "nvenc_sessions_available": nvenc_sessions,
        "nvdec_check": nvdec,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "FFmpeg: cuda hwaccel {}, scale_cuda {}, h264_nvenc {}, hevc_nvenc {}, av1_nvenc {}",
        caps.cuda_hwaccel, caps.scale_cuda, caps.h264_nvenc, caps.hevc_nvenc, caps.av1_nvenc
    );
    if let Some(e) = &report["nvml_error"].as_str() {
        println!("NVML: {e}: a worker here runs CPU-only");
    }
    for c in &cards {
        println!(
            "card {}: {} ({}) NVENC x{} NVDEC x{}: encode sessions {} (other processes hold {}), decode sessions {}, healthy {}",
            c["index"], c["name"].as_str().unwrap_or("?"), c["model"].as_str().unwrap_or("?"),
            c["nvenc_engines"], c["nvdec_engines"], c["encode_budget"],
            c["foreign_encode_sessions"], c["decode_budget"], c["healthy"]
        );
    }
    println!("NVENC sessions available to a worker now: {nvenc_sessions}");
    if let Some(r) = &report["nvdec_check"].as_object() {
        println!(
            "NVDEC decode: {} frames {}x{} in {:.2} s = {:.1} fps ({}, frames as {})",
            r["frames"],
            r["width"],
            r["height"],
            r["seconds"].as_f64().unwrap_or(0.0),
            r["fps"].as_f64().unwrap_or(0.0),
            r["decoder"].as_str().unwrap_or("?"),
            r["gpu_format"].as_str().unwrap_or("?")
        );
    }
    if let Some(r) = &probe {
        println!(
            "card probe of card {} (PCI {}): passed: CUDA context, {} encoded, {} decoded {} pictures on the card",
            r.device, r.pci_bus_id.as_deref().unwrap_or("?"), r.encoder, r.decoder, r.frames
        );
    }
    Ok(())
}

/// The cards NVML sees, each as JSON with its session budget; NVML's error when it cannot be
/// read; the NVENC sessions a worker could start now.
fn inventory() -> (Vec<serde_json::Value>, Option<String>, u32) {
    match tessera_gpu::probe(&|pid| pid == std::process::id()) {
        Ok(inv) => {
            let scheduler = SessionScheduler::new(&inv, &BudgetConfig::default());
            let snap = scheduler.snapshot();
            let cards: Vec<_> = snap
                .cards
                .iter()
                .map(|c| {
                    let info = inv.cards.iter().find(|i| i.index == c.index);
                    json!({
                        "index": c.index, "name": c.name, "uuid": c.uuid, "model": c.spec.model,
                        "nvenc_engines": c.spec.nvenc_engines, "nvdec_engines": c.spec.nvdec_engines,
                        "encode_budget": c.encode_budget, "decode_budget": c.decode_budget,
                        "foreign_encode_sessions": c.foreign_encode, "healthy": c.healthy,
                        "fault": c.fault,
                        "av1_nvdec": c.spec.generation.nvdec_decodes(
                            &tessera_gpu::DecodeFormat::yuv420_8bit(tessera_gpu::Codec::Av1)
                        ),
                        "encoder_utilization_pct": info.and_then(|i| i.encoder_utilization_pct),
                        "decoder_utilization_pct": info.and_then(|i| i.decoder_utilization_pct),
                        "memory_total_bytes": info.and_then(|i| i.memory.as_ref()).map(|m| m.total_bytes),
                    })
                })
                .collect();
            (cards, None, scheduler.capacity_for(&SessionNeed::encode(1)))
        }
        Err(e) => (Vec::new(), Some(e.to_string()), 0),
    }
}

/// The card probe of `device` in a media child, as the worker runs it.
async fn card_probe(
    sandbox: &Sandbox,
    device: u32,
    encode: bool,
) -> anyhow::Result<CardProbeReport> {
    (tessera_worker::gpu::probe_card(sandbox, device, encode).await)
        .map_err(|e| anyhow::anyhow!("card probe of card {device} failed: {e}"))
}
