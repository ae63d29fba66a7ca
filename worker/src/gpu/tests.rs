//! Tests of the worker's GPU books without a card.
use super::*;

#[test]
fn source_formats_map_to_nvdec_formats() {
    let f = decode_format("h264", "yuv420p", 8).unwrap();
    assert_eq!(f, DecodeFormat::yuv420_8bit(Codec::H264));
    let f = decode_format("hevc", "yuv420p10le", 10).unwrap();
    assert_eq!((f.chroma, f.bit_depth), (ChromaFormat::Yuv420, 10));
    assert_eq!(decode_format("prores", "yuv422p10le", 10), None);
    assert_eq!(
        decode_format("h264", "yuv444p", 8).unwrap().chroma,
        ChromaFormat::Yuv444
    );
    assert_eq!(decode_format("h264", "rgb24", 8), None);
}

#[test]
fn our_own_pid_is_ours_and_others_are_not() {
    assert!(is_own(std::process::id()));
    let child = std::process::Command::new("sleep")
        .arg("5")
        .spawn()
        .unwrap();
    assert!(is_own(child.id()));
    assert!(!is_own(1));
    let mut child = child;
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn without_nvml_the_worker_is_cpu_only() {
    // This machine has no NVIDIA driver: detection must say so and return None, even with
    // an FFmpeg that has the whole GPU path.
    let caps = tessera_model::capabilities::HwCapabilities {
        cuda_hwaccel: true,
        h264_nvenc: true,
        hevc_nvenc: true,
        av1_nvenc: false,
        scale_cuda: true,
    };
    assert!(Gpus::detect(&GpuSettings::default(), &caps).is_none());
    let off = GpuSettings {
        enabled: GpuMode::Off,
        ..GpuSettings::default()
    };
    assert!(Gpus::detect(&off, &caps).is_none());
}

/// With every card out and nothing running the prefetch is 0: the worker stops
/// consuming the GPU queue (a prefetch of 1 would take a segment only to wait 30 s and
/// give it back, again and again). Segments run on CUDA ordinals, not NVML indexes.
#[tokio::test]
async fn no_card_able_to_start_means_no_prefetch() {
    let mut a = tessera_gpu::CardInfo::simulated(0, "Tesla T4", "GPU-a");
    a.pci_bus_id = Some("00000000:5E:00.0".into());
    let mut b = tessera_gpu::CardInfo::simulated(1, "Tesla T4", "GPU-b");
    b.pci_bus_id = Some("00000000:1A:00.0".into());
    let inv = Inventory::simulated(vec![a, b]);
    let settings = GpuSettings::default();
    let scheduler = SessionScheduler::new(&inv, &settings.budget);
    let ordinals = CudaOrdinals::new(&inv.cards, None);
    let gpus = Gpus::with(scheduler.clone(), inv, &settings, ordinals);
    assert_eq!(gpus.prefetch(), 8);
    let lease = gpus
        .acquire(&SessionNeed::encode(4), Duration::from_millis(10))
        .await
        .unwrap();
    let card = lease.lease.card_index();
    assert_eq!(gpus.hardware(&lease.lease).device, 1 - card, "bus order");
    scheduler.mark_unhealthy(0, "x").unwrap();
    scheduler.mark_unhealthy(1, "x").unwrap();
    assert_eq!(gpus.prefetch(), 1, "the running segment");
    drop(lease);
    assert_eq!(gpus.prefetch(), 0);
    assert!(gpus.could_ever_fit(&SessionNeed::encode(4)));
    assert!(!gpus.could_ever_fit(&SessionNeed::encode(5)));
}

#[test]
fn settings_from_toml() {
    let s: GpuSettings = toml::from_str(
        "enabled = \"auto\"\ndrain_cpu_queue = true\nspatial_aq = true\n[budget]\nconsumer_system_cap = 5\n",
    )
    .unwrap();
    assert!(s.drain_cpu_queue && s.spatial_aq);
    assert_eq!(s.budget.consumer_system_cap, 5);
    assert!(toml::from_str::<GpuSettings>("bogus = 1").is_err());
}

/// Cards without NVENC (an H200) take segments with `software_encode`: one NVDEC session
/// each, sources NVDEC cannot decode refused (their jobs run on the CPU path).
#[tokio::test]
async fn software_encode_uses_cards_without_nvenc() {
    let inv = Inventory::simulated(vec![tessera_gpu::CardInfo::simulated(
        0,
        "NVIDIA H200",
        "GPU-h",
    )]);
    let settings = GpuSettings {
        software_encode: true,
        ..GpuSettings::default()
    };
    let scheduler = SessionScheduler::new(&inv, &settings.budget);
    assert_eq!(
        scheduler.capacity_for(&SessionNeed::encode(1)),
        0,
        "no NVENC"
    );
    let ordinals = CudaOrdinals::new(&inv.cards, None);
    let gpus = Gpus::with(scheduler, inv, &settings, ordinals);
    assert!(gpus.prefetch() > 0);
    let h264 = SessionNeed::encode(0).with_nvdec(DecodeFormat::yuv420_8bit(Codec::H264));
    assert!(gpus.could_ever_fit(&h264));
    assert!(
        !gpus.could_ever_fit(&SessionNeed::encode(0)),
        "NVDEC cannot decode it"
    );
    let lease = gpus
        .acquire(&h264, Duration::from_millis(10))
        .await
        .unwrap();
    let hw = gpus.hardware(&lease.lease);
    assert!(hw.software_encode && hw.nvdec);
}

/// The status report's cards follow the books: a lease shows as sessions in use against the
/// budget, NVML's use is carried, and a card marked unhealthy says why with no budget.
#[tokio::test]
async fn the_status_report_shows_each_cards_sessions_use_and_health() {
    let mut a = tessera_gpu::CardInfo::simulated(0, "Tesla T4", "GPU-a");
    a.encoder_utilization_pct = Some(64);
    let b = tessera_gpu::CardInfo::simulated(1, "NVIDIA L4", "GPU-b");
    let inv = Inventory::simulated(vec![a, b]);
    let settings = GpuSettings::default();
    let scheduler = SessionScheduler::new(&inv, &settings.budget);
    let ordinals = CudaOrdinals::new(&inv.cards, None);
    let gpus = Gpus::with(scheduler.clone(), inv, &settings, ordinals);
    let before = gpus.card_status();
    assert_eq!(before.len(), 2);
    assert!(before.iter().all(|c| c.encode_in_use == 0 && c.healthy));
    let lease = gpus
        .acquire(&SessionNeed::encode(2), Duration::from_millis(10))
        .await
        .unwrap();
    let on = lease.lease.card_index();
    let off = 1 - on;
    scheduler
        .mark_unhealthy(off, "Xid 79: fell off the bus")
        .unwrap();
    let now = gpus.card_status();
    let card = |i: u32| now.iter().find(|c| c.index == i).unwrap();
    assert_eq!(card(on).encode_in_use, 2);
    assert!(card(on).encode_budget >= 2, "{:?}", card(on));
    assert_eq!(card(0).encoder_pct, Some(64));
    assert_eq!(card(0).name, "Tesla T4");
    assert!(!card(off).healthy);
    assert_eq!(card(off).encode_budget, 0);
    assert!(card(off).fault.as_deref().unwrap().contains("Xid 79"));
    drop(lease);
    assert_eq!(gpus.card_status()[on as usize].encode_in_use, 0);
}
