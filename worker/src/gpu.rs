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
use tessera_farm::model::SegmentTask;
use tessera_gpu::{
    BudgetConfig, ChromaFormat, Codec, DecodeFormat, Inventory, SessionLease, SessionNeed,
    SessionScheduler,
};
use tessera_media::{HardwareEncode, VideoCodec};
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
}

/// The `[worker.gpu]` settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSettings {
    /// auto (default) or off.
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
    /// Finds the cards; `None`, said in one log line, when there is no NVIDIA driver, no
    /// card, or no card with NVENC: the worker then runs CPU-only.
    pub fn detect(settings: &GpuSettings) -> Option<Arc<Gpus>> {
        if settings.enabled == GpuMode::Off {
            tracing::info!("GPU use is off: CPU-only worker");
            return None;
        }
        let inventory = match tessera_gpu::probe(&is_own) {
            Ok(inv) => inv,
            Err(e) => {
                tracing::info!(reason = %e, "no NVIDIA GPU usable: CPU-only worker");
                return None;
            }
        };
        let scheduler = SessionScheduler::new(&inventory, &settings.budget);
        let snapshot = scheduler.snapshot();
        for card in &snapshot.cards {
            tracing::info!(
                card = card.index, name = %card.name, encode_budget = card.encode_budget,
                decode_budget = card.decode_budget, foreign = card.foreign_encode,
                healthy = card.healthy, "GPU session budget"
            );
        }
        if scheduler.capacity_for(&SessionNeed::encode(1)) == 0 {
            tracing::info!(
                cards = snapshot.cards.len(),
                "no GPU with a free NVENC session (decode-only cards?): CPU-only worker"
            );
            return None;
        }
        Some(Arc::new(Gpus {
            scheduler,
            inventory: Mutex::new(inventory),
            settings: settings.clone(),
            in_flight: Arc::new(AtomicUsize::new(0)),
        }))
    }

    /// Whether the CPU queue is drained too.
    pub fn drains_cpu_queue(&self) -> bool {
        self.settings.drain_cpu_queue
    }

    /// The consumer prefetch: segments running now plus one-session segments that could
    /// start now. It follows penalties, foreign sessions and card health.
    pub fn prefetch(&self) -> u16 {
        let free = self.scheduler.capacity_for(&SessionNeed::encode(1)) as usize;
        let n = self.in_flight.load(Ordering::SeqCst) + free;
        u16::try_from(n.max(1)).unwrap_or(u16::MAX)
    }

    /// What a segment needs: one encode session per rendition on one card, and an NVDEC
    /// session when some card can decode the source.
    pub fn need_for(&self, task: &SegmentTask) -> SessionNeed {
        let mut need = SessionNeed::encode(task.renditions.len() as u32);
        if task
            .renditions
            .iter()
            .any(|(r, _)| r.codec == VideoCodec::Av1)
        {
            need = need.with_av1_encode();
        }
        if let Some(format) = decode_format(
            &task.encode.source_codec,
            &task.encode.source_pix_fmt,
            task.encode.source_bit_depth,
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
        HardwareEncode {
            device: lease.card_index(),
            nvdec: lease.nvdec(),
            spatial_aq: self.settings.spatial_aq,
            temporal_aq: self.settings.temporal_aq,
            ..HardwareEncode::default()
        }
    }

    /// Re-reads the inventory every `every` until `stop` (foreign sessions, faults, lost
    /// cards); a failed read keeps the last one.
    pub fn spawn_refresh(self: &Arc<Self>, every: Duration, stop: CancellationToken) {
        let gpus = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                }
                let probed = tokio::task::spawn_blocking(|| tessera_gpu::probe(&is_own)).await;
                match probed {
                    Ok(Ok(inv)) => {
                        gpus.scheduler.update_inventory(&inv);
                        *gpus.inventory.lock().unwrap_or_else(|p| p.into_inner()) = inv;
                    }
                    Ok(Err(e)) => tracing::warn!(error = %e, "GPU inventory refresh failed"),
                    Err(e) => tracing::warn!(error = %e, "GPU inventory refresh panicked"),
                }
            }
        });
    }

    /// Prometheus lines for every card: sessions in use and budget, utilization, health.
    pub fn render_metrics(&self, out: &mut String) {
        let snap = self.scheduler.snapshot();
        let inv = self.inventory.lock().unwrap_or_else(|p| p.into_inner());
        let gauge = |out: &mut String, name: &str, help: &str| {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
        };
        let label = |c: &tessera_gpu::CardSnapshot| {
            format!(
                "card=\"{}\",name=\"{}\"",
                c.index,
                c.name.replace('\\', "\\\\").replace('"', "\\\"")
            )
        };
        type Field = fn(&tessera_gpu::CardSnapshot) -> u32;
        let per_card: [(&str, &str, Field); 5] = [
            (
                "tessera_gpu_encode_sessions_in_use",
                "NVENC sessions this worker holds.",
                |c| c.encode_in_use,
            ),
            (
                "tessera_gpu_encode_session_budget",
                "NVENC sessions this worker may hold now.",
                |c| c.encode_budget,
            ),
            (
                "tessera_gpu_decode_sessions_in_use",
                "NVDEC sessions this worker holds.",
                |c| c.decode_in_use,
            ),
            (
                "tessera_gpu_foreign_encode_sessions",
                "NVENC sessions other processes hold.",
                |c| c.foreign_encode,
            ),
            ("tessera_gpu_healthy", "1 when the card takes work.", |c| {
                u32::from(c.healthy)
            }),
        ];
        for (name, help, f) in per_card {
            gauge(out, name, help);
            for c in &snap.cards {
                out.push_str(&format!("{name}{{{}}} {}\n", label(c), f(c)));
            }
        }
        type Util = fn(&tessera_gpu::CardInfo) -> Option<u32>;
        let utilization: [(&str, &str, Util); 2] = [
            (
                "tessera_gpu_encoder_utilization_ratio",
                "NVENC utilization (NVML), 0-1.",
                |i| i.encoder_utilization_pct,
            ),
            (
                "tessera_gpu_decoder_utilization_ratio",
                "NVDEC utilization (NVML), 0-1.",
                |i| i.decoder_utilization_pct,
            ),
        ];
        for (name, help, util) in utilization {
            gauge(out, name, help);
            for c in &snap.cards {
                let pct = inv.cards.iter().find(|i| i.index == c.index).and_then(util);
                if let Some(p) = pct {
                    out.push_str(&format!(
                        "{name}{{{}}} {}\n",
                        label(c),
                        f64::from(p) / 100.0
                    ));
                }
            }
        }
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
mod tests {
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
        // This machine has no NVIDIA driver: detection must say so and return None.
        assert!(Gpus::detect(&GpuSettings::default()).is_none());
        let off = GpuSettings {
            enabled: GpuMode::Off,
            ..GpuSettings::default()
        };
        assert!(Gpus::detect(&off).is_none());
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
}
