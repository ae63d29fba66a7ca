//! Plain-data GPU inventory: what NVML said about each card, with unknowns as `None`.
//!
//! Everything past [`crate::nvml`] works on these structs, so the budget and scheduler logic
//! is tested with simulated inventories and never needs a GPU.

use serde::{Deserialize, Serialize};

/// A card's memory, in bytes.
///
/// Why: reported for metrics and for operators sizing the encode budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryUsage {
    /// Total framebuffer memory.
    pub total_bytes: u64,
    /// Memory in use (by anyone).
    pub used_bytes: u64,
}

/// Encoder sessions open on a card, as NVML counts them.
///
/// Why: sessions other processes hold eat the same NVENC budget ours do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EncoderSessions {
    /// All sessions on the card.
    pub total: u32,
    /// Sessions held by processes that are not ours.
    pub foreign: u32,
}

/// A query that failed for one card (recorded, not fatal).
///
/// Why: one card's unsupported or failing query must not hide the rest of the inventory,
/// but operators still want to know what is missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryFailure {
    /// The NVML query, e.g. `encoder_sessions`.
    pub query: String,
    /// What NVML said.
    pub reason: String,
}

/// Everything known about one card; `None` where NVML could not say.
///
/// Why: the unit both the scheduler and the worker's startup log consume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardInfo {
    /// NVML device index (stable for the life of the driver; what `CUDA_VISIBLE_DEVICES`
    /// and `-hwaccel_device` use with `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    pub index: u32,
    /// Marketing name, e.g. "NVIDIA L4".
    pub name: Option<String>,
    /// Card UUID, e.g. "GPU-5f3c...": the stable key for per-card overrides.
    pub uuid: Option<String>,
    /// PCI bus id, e.g. "00000000:3B:00.0".
    pub pci_bus_id: Option<String>,
    /// Framebuffer memory.
    pub memory: Option<MemoryUsage>,
    /// NVENC utilization over NVML's last sample period, in percent.
    pub encoder_utilization_pct: Option<u32>,
    /// NVDEC utilization over NVML's last sample period, in percent.
    pub decoder_utilization_pct: Option<u32>,
    /// Open encoder sessions, ours and foreign.
    pub encoder_sessions: Option<EncoderSessions>,
    /// NVML's remaining H.264 encoder capacity, in percent of the card's total.
    pub encoder_capacity_h264_pct: Option<u32>,
    /// NVML's remaining HEVC encoder capacity, in percent of the card's total.
    pub encoder_capacity_hevc_pct: Option<u32>,
    /// A driver fault seen while probing (GPU lost, reset required): the card gets no work.
    pub fault: Option<String>,
    /// The compute mode when it is not the default ("exclusive_process", "prohibited"):
    /// an exclusive card allows one CUDA context, so one segment at a time.
    #[serde(default)]
    pub compute_mode: Option<String>,
    /// Queries that failed for this card, for the log.
    pub failed_queries: Vec<QueryFailure>,
}

impl CardInfo {
    /// A card with only index, name and UUID known: for simulated inventories in tests,
    /// dry runs and the worker's own tests.
    pub fn simulated(index: u32, name: &str, uuid: &str) -> Self {
        CardInfo {
            index,
            name: Some(name.to_string()),
            uuid: Some(uuid.to_string()),
            pci_bus_id: None,
            memory: None,
            encoder_utilization_pct: None,
            decoder_utilization_pct: None,
            encoder_sessions: Some(EncoderSessions::default()),
            encoder_capacity_h264_pct: None,
            encoder_capacity_hevc_pct: None,
            fault: None,
            compute_mode: None,
            failed_queries: Vec::new(),
        }
    }

    /// This card with `foreign` sessions held by other processes (builder for tests).
    pub fn with_foreign_sessions(mut self, foreign: u32) -> Self {
        self.encoder_sessions = Some(EncoderSessions {
            total: foreign,
            foreign,
        });
        self
    }

    /// The name for logs and model lookup ("unknown" when NVML could not say).
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or("unknown")
    }
}

/// All cards NVML sees on this machine.
///
/// Why: the worker probes once at start (and periodically after) and feeds this to the
/// [`crate::SessionScheduler`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Inventory {
    /// The NVIDIA driver version, e.g. "550.54.15".
    pub driver_version: Option<String>,
    /// One entry per NVML device index, in index order.
    pub cards: Vec<CardInfo>,
}

impl Inventory {
    /// A simulated inventory of `cards` (no driver version), for tests and dry runs.
    pub fn simulated(cards: Vec<CardInfo>) -> Inventory {
        Inventory {
            driver_version: None,
            cards,
        }
    }

    /// Whether there are no cards (the worker runs CPU-only).
    pub fn is_empty(&self) -> bool {
        self.cards.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_cards_round_trip_through_toml() {
        let inv = Inventory::simulated(vec![
            CardInfo::simulated(0, "NVIDIA L4", "GPU-a").with_foreign_sessions(2)
        ]);
        assert_eq!(inv.cards[0].encoder_sessions.unwrap().foreign, 2);
        assert_eq!(inv.cards[0].display_name(), "NVIDIA L4");
        assert!(!inv.is_empty());
        let text = toml::to_string(&inv).expect("inventory serialises");
        assert!(text.contains("NVIDIA L4"));
        let back: Inventory = toml::from_str(&text).expect("inventory deserialises");
        assert_eq!(back, inv);
    }
}
