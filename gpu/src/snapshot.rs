//! A point-in-time copy of every card's budget and usage, for metrics and logs.

use crate::models::ModelSpec;
use crate::state::State;
use std::time::Instant;

/// One card's budget and usage at the moment of the snapshot.
///
/// Why: exported as metrics (in use vs budget per card) and logged when a card turns
/// unhealthy or penalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardSnapshot {
    /// NVML index.
    pub index: u32,
    /// Card UUID, when known.
    pub uuid: Option<String>,
    /// NVML name.
    pub name: String,
    /// The model facts the budget came from.
    pub spec: ModelSpec,
    /// Encode sessions this worker may hold now (base minus foreign minus penalty; 0 when
    /// unhealthy). The consumer cap is not folded in here; see `encode_free`.
    pub encode_budget: u32,
    /// Encode sessions this worker holds.
    pub encode_in_use: u32,
    /// Encode sessions a new lease could take now, the shared consumer cap included.
    pub encode_free: u32,
    /// NVDEC sessions this worker may hold (0 when unhealthy).
    pub decode_budget: u32,
    /// NVDEC sessions this worker holds.
    pub decode_in_use: u32,
    /// Encode sessions other processes hold (latest inventory).
    pub foreign_encode: u32,
    /// Whether the card may get work.
    pub healthy: bool,
    /// Why not, when unhealthy.
    pub fault: Option<String>,
    /// When the active penalty ends, if one is active.
    pub penalized_until: Option<Instant>,
    /// How many penalties are stacked (0 when none is active).
    pub penalty_level: u32,
}

/// All cards, plus the consumer cap they share.
///
/// Why: one consistent view (taken under one lock) for metrics and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerSnapshot {
    /// Per card, in index order.
    pub cards: Vec<CardSnapshot>,
    /// The system-wide consumer encode-session cap.
    pub consumer_cap: u32,
    /// Encode sessions on consumer cards, ours and foreign.
    pub consumer_in_use: u32,
}

impl SchedulerSnapshot {
    pub(crate) fn of(state: &State, now: Instant) -> SchedulerSnapshot {
        let cards = state
            .cards
            .iter()
            .enumerate()
            .map(|(pos, c)| {
                let penalty = c.active_penalty(now);
                CardSnapshot {
                    index: c.index,
                    uuid: c.uuid.clone(),
                    name: c.name.clone(),
                    spec: c.spec,
                    encode_budget: c.encode_budget(now, state.penalty_step),
                    encode_in_use: c.in_use_encode,
                    encode_free: state.free_encode(pos, now),
                    decode_budget: c.decode_budget(),
                    decode_in_use: c.in_use_decode,
                    foreign_encode: c.foreign_encode,
                    healthy: c.healthy(),
                    fault: c.fault().map(str::to_string),
                    penalized_until: penalty.map(|p| p.until),
                    penalty_level: penalty.map_or(0, |p| p.level),
                }
            })
            .collect();
        SchedulerSnapshot {
            cards,
            consumer_cap: state.consumer_cap,
            consumer_in_use: state.consumer_used(),
        }
    }

    /// The card with NVML index `index`.
    pub fn card(&self, index: u32) -> Option<&CardSnapshot> {
        self.cards.iter().find(|c| c.index == index)
    }
}
