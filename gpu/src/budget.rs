//! One card's session budget: base budgets from model and config, foreign sessions,
//! penalties and health, and what is free now.

use crate::config::BudgetConfig;
use crate::inventory::CardInfo;
use crate::models::ModelSpec;
use std::time::Instant;

/// An active budget reduction after an encoder failed to open a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Penalty {
    /// How many penalties stacked while active.
    pub level: u32,
    /// When it expires.
    pub until: Instant,
}

/// The scheduler's book-keeping for one card.
#[derive(Debug, Clone)]
pub(crate) struct CardState {
    pub index: u32,
    pub uuid: Option<String>,
    pub name: String,
    pub spec: ModelSpec,
    /// Encode sessions allowed before foreign sessions and penalties.
    pub base_encode: u32,
    /// Decode sessions allowed.
    pub base_decode: u32,
    /// Encode sessions other processes hold (last inventory that knew).
    pub foreign_encode: u32,
    pub in_use_encode: u32,
    pub in_use_decode: u32,
    pub penalty: Option<Penalty>,
    /// Set by `mark_unhealthy` with when; lifted by `mark_healthy` (after a probation probe).
    pub manual_fault: Option<(String, Instant)>,
    /// From the latest inventory (driver fault, card missing); refreshed by each update.
    pub inventory_fault: Option<String>,
}

impl CardState {
    /// The state for a freshly inventoried card.
    pub fn new(info: &CardInfo, cfg: &BudgetConfig) -> CardState {
        let spec = ModelSpec::lookup(info.display_name());
        let over = cfg.override_for(info.index, info.uuid.as_deref());
        let default_encode = if spec.nvenc_engines == 0 {
            0
        } else if spec.is_consumer() {
            cfg.consumer_system_cap
        } else {
            spec.default_encode_sessions
                .unwrap_or(cfg.unknown_card_encode_sessions)
        };
        let base_encode = match over.and_then(|o| o.encode_sessions) {
            Some(n) if spec.nvenc_engines == 0 && n > 0 => {
                tracing::warn!(
                    card = info.index,
                    name = info.display_name(),
                    "encode_sessions override ignored: this model has no NVENC"
                );
                0
            }
            Some(n) => n,
            None => default_encode,
        };
        let base_decode = over.and_then(|o| o.decode_sessions).unwrap_or(
            spec.nvdec_engines
                .saturating_mul(cfg.decode_sessions_per_engine),
        );
        CardState {
            index: info.index,
            uuid: info.uuid.clone(),
            name: info.display_name().to_string(),
            spec,
            base_encode,
            base_decode,
            foreign_encode: info.encoder_sessions.map_or(0, |s| counted_foreign(s, 0)),
            in_use_encode: 0,
            in_use_decode: 0,
            penalty: None,
            manual_fault: None,
            inventory_fault: info.fault.clone(),
        }
    }

    /// Whether the card may get work.
    pub fn healthy(&self) -> bool {
        self.manual_fault.is_none() && self.inventory_fault.is_none()
    }

    /// Why the card gets no work, if it does not.
    pub fn fault(&self) -> Option<&str> {
        self.manual_fault
            .as_ref()
            .map(|(why, _)| why.as_str())
            .or(self.inventory_fault.as_deref())
    }

    /// The active penalty at `now`, if any.
    pub fn active_penalty(&self, now: Instant) -> Option<Penalty> {
        self.penalty.filter(|p| now < p.until)
    }

    /// Encode sessions this worker may hold on the card at `now`: base, minus foreign
    /// sessions, minus active penalties; 0 when unhealthy.
    pub fn encode_budget(&self, now: Instant, step: u32) -> u32 {
        if !self.healthy() {
            return 0;
        }
        let penalty = self
            .active_penalty(now)
            .map_or(0, |p| p.level.saturating_mul(step));
        self.base_encode
            .saturating_sub(self.foreign_encode)
            .saturating_sub(penalty)
    }

    /// Decode sessions this worker may hold on the card; 0 when unhealthy.
    pub fn decode_budget(&self) -> u32 {
        if self.healthy() {
            self.base_decode
        } else {
            0
        }
    }

    /// Encode sessions free on the card alone (the consumer cap is applied by the caller).
    pub fn free_encode(&self, now: Instant, step: u32) -> u32 {
        self.encode_budget(now, step)
            .saturating_sub(self.in_use_encode)
    }

    /// Decode sessions free on the card.
    pub fn free_decode(&self) -> u32 {
        self.decode_budget().saturating_sub(self.in_use_decode)
    }

    /// Lower the budget by one more step until `now + duration` (stacks while active).
    pub fn penalize(&mut self, now: Instant, duration: std::time::Duration) {
        let level = self.active_penalty(now).map_or(0, |p| p.level);
        self.penalty = Some(Penalty {
            level: level.saturating_add(1),
            until: now + duration,
        });
    }
}

/// Sessions of other processes on a card: those NVML lists under other pids, but never more
/// than all sessions less the `own` ones this worker holds. Why both: in a container NVML
/// reports host pids, so every own session looks foreign and would be subtracted twice
/// (a T4 settling at 2 segments instead of 4); outside one the pid count is exact, and
/// the smaller figure is right in both.
pub(crate) fn counted_foreign(sessions: crate::inventory::EncoderSessions, own: u32) -> u32 {
    sessions.foreign.min(sessions.total.saturating_sub(own))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CardOverride;
    use std::time::Duration;

    #[test]
    fn base_budgets_from_model_config_and_overrides() {
        let mut cfg = BudgetConfig::default();
        let t4 = CardState::new(&CardInfo::simulated(0, "Tesla T4", "GPU-t4"), &cfg);
        assert_eq!((t4.base_encode, t4.base_decode), (4, 8));
        let h200 = CardState::new(&CardInfo::simulated(0, "NVIDIA H200", "GPU-h"), &cfg);
        assert_eq!((h200.base_encode, h200.base_decode), (0, 28));
        let g = CardState::new(
            &CardInfo::simulated(0, "NVIDIA GeForce RTX 3080", "GPU-g"),
            &cfg,
        );
        assert_eq!(g.base_encode, 8);
        let u = CardState::new(&CardInfo::simulated(0, "Mystery", "GPU-u"), &cfg);
        assert_eq!((u.base_encode, u.base_decode), (2, 4));

        cfg.overrides.insert(
            "GPU-t4".into(),
            CardOverride {
                encode_sessions: Some(6),
                decode_sessions: Some(1),
            },
        );
        cfg.overrides.insert(
            "0".into(),
            CardOverride {
                encode_sessions: Some(9),
                decode_sessions: None,
            },
        );
        let t4 = CardState::new(&CardInfo::simulated(0, "Tesla T4", "GPU-t4"), &cfg);
        assert_eq!((t4.base_encode, t4.base_decode), (6, 1));
        let h200 = CardState::new(&CardInfo::simulated(0, "NVIDIA H200", "GPU-h"), &cfg);
        assert_eq!(h200.base_encode, 0, "no NVENC, override ignored");
    }

    #[test]
    fn foreign_sessions_penalties_and_faults_lower_the_budget() {
        let cfg = BudgetConfig::default();
        let info = CardInfo::simulated(0, "NVIDIA L4", "GPU-l4").with_foreign_sessions(3);
        let mut c = CardState::new(&info, &cfg);
        let t0 = Instant::now();
        assert_eq!(c.encode_budget(t0, 1), 5);
        c.penalize(t0, Duration::from_secs(10));
        c.penalize(t0 + Duration::from_secs(5), Duration::from_secs(10));
        assert_eq!(c.encode_budget(t0 + Duration::from_secs(6), 1), 3);
        assert_eq!(c.encode_budget(t0 + Duration::from_secs(15), 1), 5);
        c.in_use_encode = 7;
        assert_eq!(c.free_encode(t0, 1), 0, "never below zero");
        c.inventory_fault = Some("GPU lost".into());
        assert_eq!(counted_foreign(info.encoder_sessions.unwrap(), 0), 3);
        assert_eq!((c.encode_budget(t0, 1), c.decode_budget()), (0, 0));
        assert_eq!(c.fault(), Some("GPU lost"));
    }

    #[test]
    fn own_sessions_are_never_counted_as_foreign() {
        use crate::inventory::EncoderSessions;
        // In a container: NVML's pids are host pids, so all 4 look foreign; 3 are ours.
        let blind = EncoderSessions {
            total: 4,
            foreign: 4,
        };
        assert_eq!(counted_foreign(blind, 3), 1);
        // On the host: the pid count is exact, and a session still closing stays ours.
        let exact = EncoderSessions {
            total: 4,
            foreign: 1,
        };
        assert_eq!(counted_foreign(exact, 2), 1);
        assert_eq!(counted_foreign(exact, 4), 0);
        assert_eq!(counted_foreign(EncoderSessions::default(), 3), 0);
    }
}
