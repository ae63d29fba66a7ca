//! The scheduler's shared state: every card's budget and in-use counts, the consumer cap,
//! and the one card-picking rule that both `try_acquire` and `capacity_for` use.

use crate::budget::CardState;
use crate::clock::Clock;
use crate::need::SessionNeed;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Budgets and counts for all cards; guarded by the mutex in [`Shared`].
#[derive(Debug, Clone)]
pub(crate) struct State {
    pub cards: Vec<CardState>,
    pub consumer_cap: u32,
    pub penalty_step: u32,
    pub penalty_duration: Duration,
    /// How long a card marked unhealthy waits before its probation probe.
    pub probation: Duration,
}

impl State {
    /// Encode sessions held on consumer cards by anyone (us and other processes): what
    /// counts against the driver's system-wide cap.
    pub fn consumer_used(&self) -> u32 {
        self.cards
            .iter()
            .filter(|c| c.spec.is_consumer())
            .map(|c| c.in_use_encode.saturating_add(c.foreign_encode))
            .fold(0u32, u32::saturating_add)
    }

    /// Encode sessions free on the card at `pos`, the shared consumer cap included.
    pub fn free_encode(&self, pos: usize, now: Instant) -> u32 {
        let card = &self.cards[pos];
        let free = card.free_encode(now, self.penalty_step);
        if card.spec.is_consumer() {
            free.min(self.consumer_cap.saturating_sub(self.consumer_used()))
        } else {
            free
        }
    }

    /// Whether the card at `pos` can take the whole `need` now.
    pub fn fits(&self, pos: usize, need: &SessionNeed, now: Instant) -> bool {
        let card = &self.cards[pos];
        if need.is_empty() || !card.healthy() {
            return false;
        }
        if need.encode_sessions > 0 {
            if need.needs_av1_encode && !card.spec.av1_encode {
                return false;
            }
            if self.free_encode(pos, now) < need.encode_sessions {
                return false;
            }
        }
        match &need.nvdec {
            Some(format) => card.spec.nvdec_decodes(format) && card.free_decode() >= 1,
            None => true,
        }
    }

    /// The card for `need`: among those that fit, the most free encode headroom; then the
    /// most free on the card itself (consumer cards all see the same shared headroom, and
    /// this spreads them too); then the most free decode headroom; then the lowest index.
    pub fn pick(&self, need: &SessionNeed, now: Instant) -> Option<usize> {
        (0..self.cards.len())
            .filter(|&pos| self.fits(pos, need, now))
            .max_by(|&a, &b| {
                let key = |p: usize| {
                    let card = &self.cards[p];
                    (
                        self.free_encode(p, now),
                        card.free_encode(now, self.penalty_step),
                        card.free_decode(),
                    )
                };
                key(a)
                    .cmp(&key(b))
                    .then_with(|| self.cards[b].index.cmp(&self.cards[a].index))
            })
    }

    /// Take `need`'s sessions on the card at `pos` (the caller checked it fits).
    pub fn reserve(&mut self, pos: usize, need: &SessionNeed) {
        let card = &mut self.cards[pos];
        card.in_use_encode += need.encode_sessions;
        if need.nvdec.is_some() {
            card.in_use_decode += 1;
        }
    }

    /// Give back sessions taken by `reserve`.
    pub fn release(&mut self, pos: usize, encode: u32, decode: u32) {
        let card = &mut self.cards[pos];
        card.in_use_encode = card.in_use_encode.saturating_sub(encode);
        card.in_use_decode = card.in_use_decode.saturating_sub(decode);
    }

    /// The position of the card with NVML index `index`.
    pub fn position(&self, index: u32) -> Option<usize> {
        self.cards.iter().position(|c| c.index == index)
    }
}

/// The state plus the clock, shared by the scheduler and its leases.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    pub clock: Arc<dyn Clock>,
}

impl Shared {
    pub fn new(state: State, clock: Arc<dyn Clock>) -> Shared {
        Shared {
            state: Mutex::new(state),
            clock,
        }
    }

    /// Lock the state. Nothing panics while holding it, but a poisoned lock still holds
    /// consistent counts, so it is used rather than propagated.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lower the budget of the card at `pos` for the configured penalty duration.
    pub fn penalize(&self, pos: usize) {
        let now = self.clock.now();
        let mut state = self.lock();
        let duration = state.penalty_duration;
        let step = state.penalty_step;
        let card = &mut state.cards[pos];
        card.penalize(now, duration);
        tracing::warn!(
            card = card.index,
            level = card.penalty.map_or(0, |p| p.level),
            encode_budget = card.encode_budget(now, step),
            penalty_secs = duration.as_secs(),
            "encoder session failed to open: card budget lowered"
        );
    }

    /// Take the card at `pos` out of scheduling until `mark_healthy` (after probation).
    pub fn mark_unhealthy(&self, pos: usize, reason: &str) {
        let now = self.clock.now();
        let mut state = self.lock();
        let card = &mut state.cards[pos];
        card.manual_fault = Some((reason.to_string(), now));
        tracing::error!(
            card = card.index,
            reason,
            "GPU marked unhealthy: no more work for it"
        );
    }
}
