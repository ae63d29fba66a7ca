//! The only code that talks to NVML: turn nvml-wrapper's answers into [`Inventory`].
//!
//! nvml-wrapper loads `libnvidia-ml.so.1` at run time, so a machine without the NVIDIA
//! driver builds and runs this crate fine: [`probe`] then returns
//! [`GpuError::NvmlUnavailable`]. Every per-card query is independent: one that fails is
//! recorded in [`CardInfo::failed_queries`] and its field left `None`.

use crate::error::GpuError;
use crate::inventory::{CardInfo, EncoderSessions, Inventory, MemoryUsage, QueryFailure};
use std::sync::OnceLock;

use nvml_wrapper::enum_wrappers::device::{ComputeMode, EncoderType};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

/// The process's NVML handle, initialised once. Why: `nvmlInit`/`nvmlShutdown` on every
/// refresh (every 5 s) is slow without persistence mode; a failed init is tried again later.
fn nvml() -> Result<&'static Nvml, NvmlError> {
    static NVML: OnceLock<Nvml> = OnceLock::new();
    if let Some(n) = NVML.get() {
        return Ok(n);
    }
    let n = Nvml::init()?;
    Ok(NVML.get_or_init(|| n))
}

/// Probes every card through NVML, with `is_own(pid)` deciding which encoder sessions are
/// ours. The worker encodes in sandbox child processes, so it passes a predicate that
/// recognises their pids; sessions it does not recognise count against the budget as
/// foreign (a one-process caller passes `|pid| pid == std::process::id()`).
///
/// No NVML library or no driver gives [`GpuError::NvmlUnavailable`] (never a panic); a
/// machine with a driver but no cards gives an empty inventory.
pub fn probe(is_own: &dyn Fn(u32) -> bool) -> Result<Inventory, GpuError> {
    let nvml = nvml().map_err(|e| GpuError::NvmlUnavailable {
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
        compute_mode: None,
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
    let listed = device
        .encoder_sessions()
        .map(|sessions| sessions.iter().map(|s| s.pid).collect::<Vec<_>>());
    let encoder_sessions = sessions_from(
        &mut r,
        listed,
        || device.encoder_stats().map(|s| s.session_count),
        is_own,
    );
    let compute_mode = r
        .take("compute_mode", device.compute_mode())
        .and_then(|m| match m {
            ComputeMode::Default => None,
            ComputeMode::ExclusiveThread => Some("exclusive_thread".to_string()),
            ComputeMode::ExclusiveProcess => Some("exclusive_process".to_string()),
            ComputeMode::Prohibited => Some("prohibited".to_string()),
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
        compute_mode,
        failed_queries: r.failed,
    }
}

/// The card's encoder sessions: from the session list (pids tell ours from others'), or,
/// when listing fails, from the session count alone, all taken as foreign until the
/// scheduler subtracts its own. Why the fallback: nvml-wrapper knows only H.264 and HEVC
/// sessions, so one AV1 session anywhere on an L4 makes the whole list fail
/// (`UnexpectedVariant`), and foreign sessions would go uncounted.
fn sessions_from(
    r: &mut Recorder,
    listed: Result<Vec<u32>, NvmlError>,
    count: impl FnOnce() -> Result<u32, NvmlError>,
    is_own: &dyn Fn(u32) -> bool,
) -> Option<EncoderSessions> {
    match r.take("encoder_sessions", listed) {
        Some(pids) => Some(EncoderSessions {
            total: pids.len() as u32,
            foreign: pids.iter().filter(|&&pid| !is_own(pid)).count() as u32,
        }),
        None => r
            .take("encoder_stats", count())
            .map(|total| EncoderSessions {
                total,
                foreign: total,
            }),
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
    fn an_unreadable_session_list_falls_back_to_the_count() {
        let mut r = Recorder {
            failed: Vec::new(),
            fault: None,
        };
        let own = |pid: u32| pid == 7;
        let listed = sessions_from(&mut r, Ok(vec![7, 8, 9]), || Ok(99), &own);
        assert_eq!(
            listed,
            Some(EncoderSessions {
                total: 3,
                foreign: 2
            })
        );
        // An AV1 session makes nvml-wrapper's list fail: the count still counts.
        let av1 = sessions_from(&mut r, Err(NvmlError::UnexpectedVariant(2)), || Ok(4), &own);
        assert_eq!(
            av1,
            Some(EncoderSessions {
                total: 4,
                foreign: 4
            })
        );
        assert_eq!(r.failed[0].query, "encoder_sessions");
        let none = sessions_from(
            &mut r,
            Err(NvmlError::NotSupported),
            || Err(NvmlError::NotSupported),
            &own,
        );
        assert_eq!(none, None);
        assert_eq!(r.fault, None);
    }

    #[test]
    fn unopenable_card_is_recorded_as_faulty() {
        let card = unreachable_card(2, &NvmlError::GpuLost);
        assert_eq!(card.index, 2);
        assert!(card.fault.is_some());
        assert_eq!(card.failed_queries[0].query, "device_by_index");
    }
}
