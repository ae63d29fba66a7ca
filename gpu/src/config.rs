//! Budget settings the worker reads from its TOML: caps, per-card overrides, penalties.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Per-card budget settings that replace the model defaults.
///
/// Why: datacenter cards are limited by memory and throughput, which depends on the
/// ladder; operators tune a card's budget without a rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CardOverride {
    /// Concurrent encode sessions this worker may run on the card (before foreign sessions
    /// are subtracted). Ignored on cards without NVENC.
    pub encode_sessions: Option<u32>,
    /// Concurrent NVDEC decode sessions this worker may run on the card.
    pub decode_sessions: Option<u32>,
}

/// How many encode/decode sessions each card may hold, and how failures lower that.
///
/// Why: one deserialisable block (`[gpu.budget]` in the worker's TOML) for every knob of
/// the session budget, with defaults that work out of the box.
///
/// ```toml
/// consumer_system_cap = 8
/// penalty_secs = 60
/// [overrides."GPU-5f3c0b1e-0000-0000-0000-000000000000"]
/// encode_sessions = 6
/// [overrides."1"]          # by NVML index
/// decode_sessions = 2
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    /// The GeForce driver's system-wide limit on concurrent encode sessions, shared by all
    /// consumer cards and all processes (8 on current drivers, fewer on old ones).
    pub consumer_system_cap: u32,
    /// NVDEC decode sessions per NVDEC engine (the default decode budget is this times the
    /// card's engine count).
    pub decode_sessions_per_engine: u32,
    /// Encode sessions for cards the built-in model table does not know.
    pub unknown_card_encode_sessions: u32,
    /// How long a card's budget stays lowered after an encoder failed to open a session.
    pub penalty_secs: u64,
    /// How many encode sessions each penalty takes off (penalties stack while active).
    pub penalty_step: u32,
    /// How long a card marked unhealthy (a driver fault) stays out before a probe may bring
    /// it back: NVML must show no fault and a new CUDA context must open on it.
    pub probation_secs: u64,
    /// Per-card overrides keyed by UUID ("GPU-...") or by NVML index ("0"); a UUID entry
    /// wins over an index entry for the same card.
    pub overrides: BTreeMap<String, CardOverride>,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            consumer_system_cap: 8,
            decode_sessions_per_engine: 4,
            unknown_card_encode_sessions: 2,
            penalty_secs: 60,
            penalty_step: 1,
            probation_secs: 300,
            overrides: BTreeMap::new(),
        }
    }
}

impl BudgetConfig {
    /// The penalty duration as a `Duration`.
    pub fn penalty_duration(&self) -> Duration {
        Duration::from_secs(self.penalty_secs)
    }

    /// The override for the card with this index and UUID (UUID first, case-insensitive).
    pub fn override_for(&self, index: u32, uuid: Option<&str>) -> Option<CardOverride> {
        let by_uuid = uuid.and_then(|u| {
            self.overrides
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(u))
                .map(|(_, v)| *v)
        });
        by_uuid.or_else(|| self.overrides.get(&index.to_string()).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_toml() {
        let cfg: BudgetConfig = toml::from_str(
            r#"
            consumer_system_cap = 5
            [overrides."GPU-abc"]
            encode_sessions = 6
            [overrides."1"]
            decode_sessions = 2
            "#,
        )
        .unwrap();
        assert_eq!(cfg.consumer_system_cap, 5);
        assert_eq!(cfg.decode_sessions_per_engine, 4);
        assert_eq!(cfg.penalty_duration(), Duration::from_secs(60));
        assert_eq!(
            cfg.override_for(0, Some("gpu-ABC"))
                .unwrap()
                .encode_sessions,
            Some(6)
        );
        assert_eq!(
            cfg.override_for(1, Some("GPU-x")).unwrap().decode_sessions,
            Some(2)
        );
        assert_eq!(cfg.override_for(2, None), None);
        assert!(toml::from_str::<BudgetConfig>("consumer_cap = 3").is_err());
        assert_eq!(
            toml::from_str::<BudgetConfig>("").unwrap(),
            BudgetConfig::default()
        );
    }
}
