//! The worker's GPUs: the NVML inventory at start and every few seconds, the encoder-session
//! scheduler, and what a GPU segment needs from it (sessions on one card, NVDEC or not).
//!
//! Why in the worker: the budget is per machine (sessions of every process on a card count),
//! so the process that opens the sessions keeps the books; the scheduler itself is the pure
//! `tessera-gpu` crate.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use tessera_gpu::{
    BudgetConfig, ChromaFormat, Codec, DecodeFormat, Inventory, SessionLease, SessionNeed,
    SessionScheduler,
};
use tessera_model::encode::{HardwareEncode, VideoCodec};
use tessera_model::wire::SegmentTask;

use crate::cuda_ordinal::CudaOrdinals;

mod probe;
mod render;
mod require;
pub use probe::{probe_card, probe_in_child, CardProbe};
pub use require::for_worker;
use tokio_util::sync::CancellationToken;

/// Whether the worker uses its GPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuMode {
    /// Use NVENC cards when NVML finds some; else run CPU-only.
    #[default]
    Auto,
    /// Never touch the GPUs.
    Off,
    /// Use NVENC cards, and refuse to start without one that works (require.rs): a GPU pod
    /// must not quietly become a CPU worker.
    Require,
}

/// The `[worker.gpu]` settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSettings {
    /// auto (default), off or require.
    #[serde(default)]
    pub enabled: GpuMode,
    /// Also take segments from the CPU queue (software encode) with the CPU slots.
    #[serde(default)]
    pub drain_cpu_queue: bool,
    /// NVENC spatial adaptive quantisation for every GPU encode.
    #[serde(default)]
    pub spatial_aq: bool,
    /// NVENC temporal adaptive quantisation.
    #[serde(default)]
    pub temporal_aq: bool,
    /// Decode and scale on the cards (NVDEC, scale_cuda), encode with the software
    /// encoders: for cards without NVENC (A100, H100, H200). Sources NVDEC cannot decode
    /// are refused (their jobs run on the CPU path).
    #[serde(default)]
    pub software_encode: bool,
    /// Per-card session budgets.
    #[serde(default)]
    pub budget: BudgetConfig,
}

/// The cards of this worker and their session books.
pub struct Gpus {
    scheduler: SessionScheduler,
    inventory: Mutex<Inventory>,
    settings: GpuSettings,
    in_flight: Arc<AtomicUsize>,
    ordinals: CudaOrdinals,
}

impl std::fmt::Debug for Gpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpus")
            .field("cards", &self.scheduler.snapshot().cards.len())
            .finish_non_exhaustive()
    }
}

/// A lease plus the in-flight count it keeps (for the consumer prefetch).
pub struct GpuLease {
    /// The sessions.
    pub lease: SessionLease,
    in_flight: Arc<AtomicUsize>,
}

impl Drop for GpuLease {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether `pid` is this process or one of its children (the sandboxed encoders): their
/// NVENC sessions are ours, not another process's.
fn is_own(pid: u32) -> bool {
    let me = std::process::id();
    if pid == me {
        return true;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which may hold spaces) start after the last ')'.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) == Some(me)
}

impl Gpus {
    /// Finds the cards; `None`, said in one log line, when the media child's FFmpeg (`caps`)
    /// lacks the GPU path, or there is no NVIDIA driver, no card, or no card with NVENC: the
    /// worker then runs CPU-only.
    pub fn detect(
        settings: &GpuSettings,
        caps: &tessera_model::capabilities::HwCapabilities,
    ) -> Option<Arc<Gpus>> {
        if settings.enabled == GpuMode::Off {
            tracing::info!("GPU use is off: CPU-only worker");
            return None;
        }
        match Self::find(settings, caps) {
            Ok(gpus) => Some(gpus),
            Err(reason) => {
                tracing::info!(%reason, "no usable GPU: CPU-only worker");
                None
            }
        }
    }

    /// The cards, or why the worker has none it can encode on (what `detect` logs and
    /// `require` exits with).
    pub fn find(
        settings: &GpuSettings,
        caps: &tessera_model::capabilities::HwCapabilities,
    ) -> Result<Arc<Gpus>, String> {
        let encoders = settings.software_encode || caps.h264_nvenc || caps.hevc_nvenc;
        if !caps.gpu_path() || !encoders {
            return Err(format!(
                "this FFmpeg build lacks the CUDA path or NVENC ({caps:?})"
            ));
        }
        let all = tessera_gpu::probe(&is_own).map_err(|e| format!("no NVIDIA GPU usable: {e}"))?;
        let ordinals = CudaOrdinals::from_env(&all.cards);
        let inventory = ordinals.visible(&all);
        if inventory.cards.len() < all.cards.len() {
            tracing::info!(
                visible = inventory.cards.len(),
                cards = all.cards.len(),
                "CUDA_VISIBLE_DEVICES hides some cards: they get no work"
            );
        }
        for card in inventory.cards.iter().filter(|c| c.compute_mode.is_some()) {
            tracing::warn!(
                card = card.index,
                mode = card.compute_mode.as_deref(),
                "card not in the default compute mode: an exclusive card takes one CUDA \
                 context, so one segment at a time; set it with nvidia-smi -c DEFAULT"
            );
        }
        let scheduler = SessionScheduler::new(&inventory, &settings.budget);
        let snapshot = scheduler.snapshot();
        for card in &snapshot.cards {
            tracing::info!(
                card = card.index, name = %card.name, encode_budget = card.encode_budget,
                decode_budget = card.decode_budget, foreign = card.foreign_encode,
                healthy = card.healthy, "GPU session budget"
            );
        }
        if scheduler.capacity_for(&unit_need(settings)) == 0 {
            return Err(format!(
                "no GPU with a free NVENC session (or NVDEC, with software_encode) on {} \
                 card(s)",
                snapshot.cards.len()
            ));
        }
        Ok(Arc::new(Gpus::with(
            scheduler, inventory, settings, ordinals,
        )))
    }

    /// The CUDA ordinal of the card at NVML index `index` (what a child opens).
    fn ordinal(&self, index: u32) -> u32 {
        self.ordinals.ordinal(index).unwrap_or(index)
    }

    /// NVML's PCI bus id of the card at CUDA ordinal `ordinal`, when NVML gave one.
    pub fn pci_bus_id_of(&self, ordinal: u32) -> Option<String> {
        let inventory = self.inventory.lock().unwrap_or_else(|p| p.into_inner());
        (inventory.cards.iter())
            .find(|c| self.ordinal(c.index) == ordinal)
            .and_then(|c| c.pci_bus_id.clone())
    }

    /// The cards this worker uses: (NVML index, CUDA ordinal, what a probe opens).
    pub fn cards_in_use(&self) -> Vec<(u32, u32)> {
        let inventory = self.inventory.lock().unwrap_or_else(|p| p.into_inner());
        (inventory.cards.iter())
            .map(|c| (c.index, self.ordinal(c.index)))
            .collect()
    }

    fn with(
        scheduler: SessionScheduler,
        inventory: Inventory,
        settings: &GpuSettings,
        ordinals: CudaOrdinals,
    ) -> Gpus {
        Gpus {
            scheduler,
            inventory: Mutex::new(inventory),
            settings: settings.clone(),
            in_flight: Arc::new(AtomicUsize::new(0)),
            ordinals,
        }
    }

    /// Whether the CPU queue is drained too.
    pub fn drains_cpu_queue(&self) -> bool {
        self.settings.drain_cpu_queue
    }

    /// The consumer prefetch: segments running now plus one-session segments that could
    /// start now. It follows penalties, foreign sessions and card health; 0 (nothing running,
    /// no card able to start anything) means the worker stops consuming the GPU queue until
    /// a card recovers, so other workers take its segments.
    pub fn prefetch(&self) -> u16 {
        let free = self.scheduler.capacity_for(&unit_need(&self.settings)) as usize;
        let n = self.in_flight.load(Ordering::SeqCst) + free;
        u16::try_from(n).unwrap_or(u16::MAX)
    }

    /// Whether some card could ever hold `need` (see `SessionScheduler::could_ever_fit`);
    /// with software encode, only sources NVDEC decodes use the cards.
    pub fn could_ever_fit(&self, need: &SessionNeed) -> bool {
        if self.settings.software_encode && need.nvdec.is_none() {
            return false;
        }
        self.scheduler.could_ever_fit(need)
    }

    /// What a segment needs: one encode session per rendition on one card, and an NVDEC
    /// session when some card can decode the source.
    pub fn need_for(&self, task: &SegmentTask) -> SessionNeed {
        let encode = if self.settings.software_encode {
            0
        } else {
            task.renditions.len() as u32
        };
        let mut need = SessionNeed::encode(encode);
        if encode > 0
            && task
                .renditions
                .iter()
                .any(|(r, _)| r.codec == VideoCodec::Av1)
        {
            need = need.with_av1_encode();
        }
        if let Some(format) = decode_format(
            &task.encode.source_codec,
            &task.encode.source_pix_fmt,
            task.encode.source.source_bit_depth,
        ) {
            if self.scheduler.nvdec_decodes(&format) {
                need = need.with_nvdec(format);
            }
        }
        need
    }

    /// Waits up to `max_wait` for the sessions of `need` on one card.
    pub async fn acquire(&self, need: &SessionNeed, max_wait: Duration) -> Option<GpuLease> {
        let deadline = tokio::time::Instant::now() + max_wait;
        loop {
            if let Some(lease) = self.scheduler.try_acquire(need) {
                self.in_flight.fetch_add(1, Ordering::SeqCst);
                return Some(GpuLease {
                    lease,
                    in_flight: self.in_flight.clone(),
                });
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// NVENC sessions this worker holds on `card` now (for logs and the smoke test).
    pub fn sessions_in_use(&self, card: u32) -> u32 {
        self.scheduler
            .snapshot()
            .card(card)
            .map_or(0, |c| c.encode_in_use)
    }

    /// The media layer's hardware settings for a segment on `lease`'s card.
    pub fn hardware(&self, lease: &SessionLease) -> HardwareEncode {
        let index = lease.card_index();
        HardwareEncode {
            // CUDA ordinal, not the NVML index; detection kept only cards CUDA sees.
            device: self.ordinal(index),
            nvdec: lease.nvdec(),
            spatial_aq: self.settings.spatial_aq,
            temporal_aq: self.settings.temporal_aq,
            software_encode: self.settings.software_encode,
            ..HardwareEncode::default()
        }
    }

    /// Re-reads the inventory every `every` until `stop` (foreign sessions, faults, lost
    /// cards; a failed read keeps the last one), and probes cards whose probation is over
    /// with `probe`: passed, they take work again.
    pub fn spawn_refresh(
        self: &Arc<Self>,
        every: Duration,
        stop: CancellationToken,
        probe: CardProbe,
    ) {
        let gpus = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                }
                for index in gpus.scheduler.due_for_probation() {
                    let ordinal = gpus.ordinal(index);
                    let passed = probe(ordinal).await;
                    let _ = gpus.scheduler.probation_result(index, passed);
                }
                let probed = tokio::task::spawn_blocking(|| tessera_gpu::probe(&is_own)).await;
                match probed {
                    Ok(Ok(inv)) => {
                        let inv = gpus.ordinals.visible(&inv);
                        gpus.scheduler.update_inventory(&inv);
                        *gpus.inventory.lock().unwrap_or_else(|p| p.into_inner()) = inv;
                    }
                    Ok(Err(e)) => tracing::warn!(error = %e, "GPU inventory refresh failed"),
                    Err(e) => tracing::warn!(error = %e, "GPU inventory refresh panicked"),
                }
            }
        });
    }
}

/// What one segment at least takes: an NVENC session, or with software encode an NVDEC
/// session (for the prefetch and the "any card usable" check).
fn unit_need(settings: &GpuSettings) -> SessionNeed {
    if settings.software_encode {
        SessionNeed::encode(0).with_nvdec(DecodeFormat::yuv420_8bit(Codec::H264))
    } else {
        SessionNeed::encode(1)
    }
}

/// The NVDEC format of a source from its FFmpeg codec and pixel format names; `None` for
/// codecs NVDEC never decodes here.
pub fn decode_format(codec: &str, pix_fmt: &str, bit_depth: u8) -> Option<DecodeFormat> {
    let codec = match codec {
        "h264" => Codec::H264,
        "hevc" => Codec::Hevc,
        "vp9" => Codec::Vp9,
        "vp8" => Codec::Vp8,
        "av1" => Codec::Av1,
        "mpeg2video" => Codec::Mpeg2,
        _ => return None,
    };
    let chroma = if pix_fmt.contains("444") || pix_fmt.starts_with("gbr") {
        ChromaFormat::Yuv444
    } else if pix_fmt.contains("422") {
        ChromaFormat::Yuv422
    } else if pix_fmt.contains("420") || pix_fmt.starts_with("nv12") || pix_fmt.starts_with("p010")
    {
        ChromaFormat::Yuv420
    } else {
        return None;
    };
    Some(DecodeFormat::new(codec, chroma, bit_depth.max(8)))
}

#[cfg(test)]
mod tests;
