//! The only code that talks to NVML: turn nvml-wrapper's answers into [`Inventory`].
//!
//! nvml-wrapper loads `libnvidia-ml.so.1` at run time, so a machine without the NVIDIA
//! driver builds and runs this crate fine: [`probe`] then returns
//! [`GpuError::NvmlUnavailable`]. Every per-card query is independent: one that fails is
//! recorded in [`CardInfo::failed_queries`] and its field left `None`.

use crate::error::GpuError;
use crate::inventory::{CardInfo, EncoderSessions, Inventory, MemoryUsage, QueryFailure};
use nvml_wrapper::enum_wrappers::device::EncoderType;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

/// Probes every card through NVML, with `is_own(pid)` deciding which encoder sessions are
/// ours. The worker encodes in sandbox child processes, so it passes a predicate that
/// recognises their pids; sessions it does not recognise count against the budget as
/// foreign (a one-process caller passes `|pid| pid == std::process::id()`).
///
/// No NVML library or no driver gives [`GpuError::NvmlUnavailable`] (never a panic); a
/// machine with a driver but no cards gives an empty inventory.
pub fn probe(is_own: &dyn Fn(u32) -> bool) -> Result<Inventory, GpuError> {
    let nvml = Nvml::init().map_err(|e| GpuError::NvmlUnavailable {
        reason: describe(&e),
    })?;
    let count = nvml.device_count().map_err(|e| GpuError::Nvml {
        query: "device_count".into(),
        reason: describe(&e),
    })?;
    let driver_version = nvml.sys_driver_version().ok();
    let cards = (0..count)
        .map(|index| match nvml.device_by_index(index) {
            Ok(device) => card_info(index, &device, is_own),
            Err(e) => unreachable_card(index, &e),
        })
        .collect();
    Ok(Inventory {
        driver_version,
        cards,
    })
}

/// A card NVML lists but will not open: no work for it, and say why.
fn unreachable_card(index: u32, err: &NvmlError) -> CardInfo {
    let mut card = CardInfo {
        index,
        name: None,
        uuid: None,
        pci_bus_id: None,
        memory: None,
        encoder_utilization_pct: None,
        decoder_utilization_pct: None,
        encoder_sessions: None,
        encoder_capacity_h264_pct: None,
        encoder_capacity_hevc_pct: None,
        fault: Some(format!("cannot open device: {}", describe(err))),
        failed_queries: Vec::new(),
    };
    card.failed_queries.push(QueryFailure {
        query: "device_by_index".into(),
        reason: describe(err),
    });
    card
}

/// Collects per-card query results, recording failures and driver faults.
struct Recorder {
    failed: Vec<QueryFailure>,
    fault: Option<String>,
}

impl Recorder {
    fn take<T>(&mut self, query: &str, result: Result<T, NvmlError>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                if is_fault(&e) && self.fault.is_none() {
                    self.fault = Some(format!("{query}: {}", describe(&e)));
                }
                self.failed.push(QueryFailure {
                    query: query.to_string(),
                    reason: describe(&e),
                });
                None
            }
        }
    }
}

fn card_info(index: u32, device: &Device<'_>, is_own: &dyn Fn(u32) -> bool) -> CardInfo {
    let mut r = Recorder {
        failed: Vec::new(),
        fault: None,
    };
    let name = r.take("name", device.name());
    let uuid = r.take("uuid", device.uuid());
    let pci_bus_id = r.take("pci_info", device.pci_info()).map(|p| p.bus_id);
    let memory = r
        .take("memory_info", device.memory_info())
        .map(|m| MemoryUsage {
            total_bytes: m.total,
            used_bytes: m.used,
        });
    let encoder_utilization_pct = r
        .take("encoder_utilization", device.encoder_utilization())
        .map(|u| u.utilization);
    let decoder_utilization_pct = r
        .take("decoder_utilization", device.decoder_utilization())
        .map(|u| u.utilization);
    let encoder_sessions = r
        .take("encoder_sessions", device.encoder_sessions())
        .map(|sessions| EncoderSessions {
            total: sessions.len() as u32,
            foreign: sessions.iter().filter(|s| !is_own(s.pid)).count() as u32,
        });
    let encoder_capacity_h264_pct = r.take(
        "encoder_capacity_h264",
        device.encoder_capacity(EncoderType::H264),
    );
    let encoder_capacity_hevc_pct = r.take(
        "encoder_capacity_hevc",
        device.encoder_capacity(EncoderType::HEVC),
    );
    CardInfo {
        index,
        name,
        uuid,
        pci_bus_id,
        memory,
        encoder_utilization_pct,
        decoder_utilization_pct,
        encoder_sessions,
        encoder_capacity_h264_pct,
        encoder_capacity_hevc_pct,
        fault: r.fault,
        failed_queries: r.failed,
    }
}

/// NVML errors that mean the card itself is in trouble, not just that a query is
/// unsupported: such a card gets no more work.
fn is_fault(err: &NvmlError) -> bool {
    matches!(err, NvmlError::GpuLost | NvmlError::ResetRequired)
}

/// NVML errors in words (nvml-wrapper's Display, plus the variant for the unhelpful ones).
fn describe(err: &NvmlError) -> String {
    let text = err.to_string();
    if text.trim().is_empty() {
        format!("{err:?}")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine has no NVIDIA driver: probing must say so as an error, not panic.
    /// (On a machine with a driver, it must list the cards with their indices in order.)
    #[test]
    fn probe_without_driver_is_an_error_not_a_panic() {
        match probe(&|pid| pid == std::process::id()) {
            Err(e) => {
                assert_eq!(e.code(), "gpu_nvml_unavailable", "{e}");
                assert!(!e.to_string().is_empty());
            }
            Ok(inv) => {
                for (i, card) in inv.cards.iter().enumerate() {
                    assert_eq!(card.index as usize, i);
                }
            }
        }
    }

    #[test]
    fn faults_are_told_apart_from_unsupported_queries() {
        assert!(is_fault(&NvmlError::GpuLost));
        assert!(is_fault(&NvmlError::ResetRequired));
        assert!(!is_fault(&NvmlError::NotSupported));
        let mut r = Recorder {
            failed: Vec::new(),
            fault: None,
        };
        assert_eq!(
            r.take::<u32>("encoder_sessions", Err(NvmlError::NotSupported)),
            None
        );
        assert_eq!(r.fault, None);
        assert_eq!(r.take::<u32>("memory_info", Err(NvmlError::GpuLost)), None);
        assert_eq!(r.take("name", Ok(3u32)), Some(3));
        assert_eq!(r.failed.len(), 2);
        assert!(r.fault.as_deref().unwrap().starts_with("memory_info"));
    }

    #[test]
    fn unopenable_card_is_recorded_as_faulty() {
        let card = unreachable_card(2, &NvmlError::GpuLost);
        assert_eq!(card.index, 2);
        assert!(card.fault.is_some());
        assert_eq!(card.failed_queries[0].query, "device_by_index");
    }
}
