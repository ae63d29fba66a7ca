//! The session scheduler: which card a segment runs on, if any card can take it now.

use crate::budget::CardState;
use crate::clock::{Clock, SystemClock};
use crate::config::BudgetConfig;
use crate::decode::DecodeFormat;
use crate::error::GpuError;
use crate::inventory::Inventory;
use crate::lease::SessionLease;
use crate::need::SessionNeed;
use crate::snapshot::SchedulerSnapshot;
use crate::state::{Shared, State};
use std::sync::Arc;

/// Every card's encode/decode session budget and what this worker holds of it.
///
/// Why: the worker asks it for a card before starting each segment and sets its queue
/// prefetch from [`SessionScheduler::capacity_for`], so segments never start on a card that
/// cannot open their sessions. Cheap to clone (shared state); safe to use from threads.
#[derive(Debug, Clone)]
pub struct SessionScheduler {
    shared: Arc<Shared>,
}

impl SessionScheduler {
    /// A scheduler for `inventory`'s cards with `config`'s budgets, on the system clock.
    pub fn new(inventory: &Inventory, config: &BudgetConfig) -> Self {
        SessionScheduler::with_clock(inventory, config, Arc::new(SystemClock))
    }

    /// The same, with an injected clock (tests advance a [`crate::ManualClock`]).
    pub fn with_clock(inventory: &Inventory, config: &BudgetConfig, clock: Arc<dyn Clock>) -> Self {
        let cards: Vec<CardState> = inventory
            .cards
            .iter()
            .map(|info| CardState::new(info, config))
            .collect();
        for key in config.overrides.keys() {
            let matched = cards.iter().any(|c| {
                c.index.to_string() == *key
                    || c.uuid
                        .as_deref()
                        .is_some_and(|u| u.eq_ignore_ascii_case(key))
            });
            if !matched {
                tracing::warn!(key = key.as_str(), "GPU budget override matches no card");
            }
        }
        for c in &cards {
            tracing::info!(
                card = c.index,
                name = c.name.as_str(),
                model = c.spec.model,
                encode_sessions = c.base_encode,
                decode_sessions = c.base_decode,
                foreign_encode = c.foreign_encode,
                fault = c.fault(),
                "GPU session budget"
            );
        }
        let state = State {
            cards,
            consumer_cap: config.consumer_system_cap,
            penalty_step: config.penalty_step,
            penalty_duration: config.penalty_duration(),
            probation: std::time::Duration::from_secs(config.probation_secs),
        };
        SessionScheduler {
            shared: Arc::new(Shared::new(state, clock)),
        }
    }

    /// Take all of `need`'s sessions on one card, or nothing. The card is the one with the
    /// most free encode headroom (then decode headroom, then lowest index) among the
    /// healthy cards that can hold the whole need, so load spreads and no card starves.
    /// `None` when no card can take it now (or the need is empty).
    pub fn try_acquire(&self, need: &SessionNeed) -> Option<SessionLease> {
        let now = self.shared.clock.now();
        let mut state = self.shared.lock();
        let pos = state.pick(need, now)?;
        state.reserve(pos, need);
        let card = &state.cards[pos];
        Some(SessionLease {
            shared: Arc::clone(&self.shared),
            pos,
            card_index: card.index,
            card_uuid: card.uuid.clone(),
            encode_sessions: need.encode_sessions,
            nvdec: need.nvdec.is_some(),
        })
    }

    /// How many segments with this `need` could start right now, across all cards: exactly
    /// how many successive `try_acquire(need)` calls would succeed. The worker sets its
    /// queue prefetch to this.
    pub fn capacity_for(&self, need: &SessionNeed) -> u32 {
        let now = self.shared.clock.now();
        let mut state: State = self.shared.lock().clone();
        let mut count = 0;
        // Every grant takes at least one session, so this ends.
        while let Some(pos) = state.pick(need, now) {
            state.reserve(pos, need);
            count += 1;
        }
        count
    }

    /// Whether any healthy card with decode budget can decode `format` on NVDEC; when none
    /// can, the worker plans a software decode (and a need without `nvdec`).
    pub fn nvdec_decodes(&self, format: &DecodeFormat) -> bool {
        let state = self.shared.lock();
        state
            .cards
            .iter()
            .any(|c| c.decode_budget() > 0 && c.spec.nvdec_decodes(format))
    }

    /// Every card's budget, usage, health and penalty, for metrics.
    pub fn snapshot(&self) -> SchedulerSnapshot {
        let now = self.shared.clock.now();
        SchedulerSnapshot::of(&self.shared.lock(), now)
    }

    /// Refresh from a new inventory (the worker re-probes periodically): foreign encode
    /// sessions (kept when the new inventory could not count them) and driver faults. A
    /// card missing from the new inventory is unhealthy until it comes back. Cards that
    /// appear after start are ignored until the worker restarts.
    pub fn update_inventory(&self, inventory: &Inventory) {
        let mut state = self.shared.lock();
        for card in &mut state.cards {
            let found = inventory
                .cards
                .iter()
                .find(|info| match (&card.uuid, &info.uuid) {
                    (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                    _ => info.index == card.index,
                });
            let (foreign, fault) = match found {
                Some(info) => (
                    info.encoder_sessions.map_or(card.foreign_encode, |s| {
                        crate::budget::counted_foreign(s, card.in_use_encode)
                    }),
                    info.fault.clone(),
                ),
                None => (
                    card.foreign_encode,
                    Some("missing from the latest GPU inventory".to_string()),
                ),
            };
            if foreign != card.foreign_encode {
                tracing::debug!(
                    card = card.index,
                    foreign,
                    "foreign encoder sessions changed"
                );
            }
            if fault != card.inventory_fault {
                match &fault {
                    Some(f) => tracing::error!(card = card.index, fault = f.as_str(), "GPU fault"),
                    None => tracing::info!(card = card.index, "GPU fault cleared"),
                }
            }
            card.foreign_encode = foreign;
            card.inventory_fault = fault;
        }
        for info in &inventory.cards {
            let known = state.cards.iter().any(|c| match (&c.uuid, &info.uuid) {
                (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                _ => info.index == c.index,
            });
            if !known {
                tracing::warn!(
                    card = info.index,
                    "new GPU ignored until the worker restarts"
                );
            }
        }
    }

    /// An encoder on card `index` failed to open a session (`NV_ENC_ERR_OUT_OF_MEMORY`):
    /// lower its encode budget by `penalty_step` until `penalty_secs` from now. Penalties
    /// stack while active (never below zero) and all expire together, so the card recovers.
    pub fn penalize(&self, index: u32) -> Result<(), GpuError> {
        let pos = self.position(index)?;
        self.shared.penalize(pos);
        Ok(())
    }

    /// Card `index` hit a driver fault (Xid, CUDA context lost): give it no more work until
    /// [`SessionScheduler::mark_healthy`]. Leases already on it still release normally.
    pub fn mark_unhealthy(&self, index: u32, reason: &str) -> Result<(), GpuError> {
        let pos = self.position(index)?;
        self.shared.mark_unhealthy(pos, reason);
        Ok(())
    }

    /// Cards marked unhealthy for at least the probation time whose latest inventory shows
    /// no fault: the worker probes each (a new CUDA context) and reports with
    /// [`SessionScheduler::probation_result`]. Why: a fault may pass (a reset, a recovered
    /// Xid), and a card kept out until the worker restarts wastes the node.
    pub fn due_for_probation(&self) -> Vec<u32> {
        let now = self.shared.clock.now();
        let state = self.shared.lock();
        state
            .cards
            .iter()
            .filter(|c| c.inventory_fault.is_none())
            .filter(|c| {
                c.manual_fault.as_ref().is_some_and(|(_, since)| {
                    now.saturating_duration_since(*since) >= state.probation
                })
            })
            .map(|c| c.index)
            .collect()
    }

    /// The probation probe of card `index`: passed, the card takes work again; failed, it
    /// stays out for another probation time.
    pub fn probation_result(&self, index: u32, passed: bool) -> Result<(), GpuError> {
        if passed {
            return self.mark_healthy(index);
        }
        let pos = self.position(index)?;
        let now = self.shared.clock.now();
        let mut state = self.shared.lock();
        if let Some((why, since)) = state.cards[pos].manual_fault.as_mut() {
            *since = now;
            tracing::warn!(
                card = index,
                fault = why.as_str(),
                "GPU failed its probation probe"
            );
        }
        Ok(())
    }

    /// Whether some card could ever take `need` (its base budgets and features, ignoring
    /// what is in use, foreign sessions, penalties and health). Why: a need above every
    /// card's budget (more renditions than a T4 has sessions, AV1 on cards without AV1
    /// NVENC) would wait and be given back until its bounces ran out; it is refused at once
    /// so its job can run on the CPU.
    pub fn could_ever_fit(&self, need: &SessionNeed) -> bool {
        let state = self.shared.lock();
        state.cards.iter().any(|c| {
            let encode = need.encode_sessions == 0
                || (c.base_encode >= need.encode_sessions
                    && (!need.needs_av1_encode || c.spec.av1_encode)
                    && (!c.spec.is_consumer() || state.consumer_cap >= need.encode_sessions));
            let decode = match &need.nvdec {
                Some(f) => c.spec.nvdec_decodes(f) && c.base_decode >= 1,
                None => true,
            };
            encode && decode
        })
    }

    /// Undo [`SessionScheduler::mark_unhealthy`] (e.g. after the card was reset). Faults
    /// seen in the inventory clear on their own with the next clean inventory.
    pub fn mark_healthy(&self, index: u32) -> Result<(), GpuError> {
        let pos = self.position(index)?;
        let mut state = self.shared.lock();
        state.cards[pos].manual_fault = None;
        tracing::info!(card = index, "GPU marked healthy");
        Ok(())
    }

    fn position(&self, index: u32) -> Result<usize, GpuError> {
        self.shared
            .lock()
            .position(index)
            .ok_or(GpuError::UnknownCard { index })
    }
}

#[cfg(test)]
mod tests;
