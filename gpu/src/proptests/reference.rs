//! The property tests' reference model: each card's budget computed independently of the
//! scheduler's own code, from the generated cards and configuration.

use super::{CardGen, MODELS};
use crate::*;
use std::time::Instant;

/// The reference model: what each card's budget should be, computed independently.
pub(super) struct Model {
    pub(super) specs: Vec<ModelSpec>,
    pub(super) base_encode: Vec<u32>,
    pub(super) base_decode: Vec<u32>,
    pub(super) foreign: Vec<u32>,
    pub(super) manual_fault: Vec<bool>,
    pub(super) inventory_fault: Vec<bool>,
    pub(super) penalty: Vec<Option<(u32, Instant)>>,
    pub(super) cfg: BudgetConfig,
}

impl Model {
    pub(super) fn new(cards: &[CardGen], cfg: &BudgetConfig) -> Model {
        let specs: Vec<ModelSpec> = cards
            .iter()
            .map(|c| ModelSpec::lookup(MODELS[c.model]))
            .collect();
        let base_encode = cards
            .iter()
            .zip(&specs)
            .map(|(c, s)| match (s.nvenc_engines, c.encode_override) {
                (0, _) => 0,
                (_, Some(n)) => n,
                _ if s.is_consumer() => cfg.consumer_system_cap,
                _ => s
                    .default_encode_sessions
                    .unwrap_or(cfg.unknown_card_encode_sessions),
            })
            .collect();
        let base_decode = cards
            .iter()
            .zip(&specs)
            .map(|(c, s)| {
                c.decode_override
                    .unwrap_or(s.nvdec_engines * cfg.decode_sessions_per_engine)
            })
            .collect();
        Model {
            specs,
            base_encode,
            base_decode,
            foreign: cards.iter().map(|c| c.foreign).collect(),
            manual_fault: vec![false; cards.len()],
            inventory_fault: vec![false; cards.len()],
            penalty: vec![None; cards.len()],
            cfg: cfg.clone(),
        }
    }

    pub(super) fn healthy(&self, i: usize) -> bool {
        !self.manual_fault[i] && !self.inventory_fault[i]
    }

    pub(super) fn level(&self, i: usize, now: Instant) -> u32 {
        self.penalty[i].filter(|p| now < p.1).map_or(0, |p| p.0)
    }

    pub(super) fn encode_budget(&self, i: usize, now: Instant) -> u32 {
        if !self.healthy(i) {
            return 0;
        }
        let cut = self.level(i, now) * self.cfg.penalty_step;
        self.base_encode[i]
            .saturating_sub(self.foreign[i])
            .saturating_sub(cut)
    }

    pub(super) fn decode_budget(&self, i: usize) -> u32 {
        if self.healthy(i) {
            self.base_decode[i]
        } else {
            0
        }
    }

    pub(super) fn consumer_used(&self, enc: &[u32]) -> u32 {
        (0..enc.len())
            .filter(|&i| self.specs[i].is_consumer())
            .map(|i| enc[i] + self.foreign[i])
            .sum()
    }

    pub(super) fn free_encode(&self, i: usize, now: Instant, enc: &[u32]) -> u32 {
        let free = self.encode_budget(i, now).saturating_sub(enc[i]);
        if self.specs[i].is_consumer() {
            free.min(
                self.cfg
                    .consumer_system_cap
                    .saturating_sub(self.consumer_used(enc)),
            )
        } else {
            free
        }
    }

    /// Cards that can hold the whole need, each with its (encode, decode) headroom.
    pub(super) fn fitting(
        &self,
        need: &SessionNeed,
        now: Instant,
        enc: &[u32],
        dec: &[u32],
    ) -> Vec<(usize, (u32, u32, u32))> {
        (0..enc.len())
            .filter(|&i| {
                let encode_ok = need.encode_sessions == 0
                    || ((!need.needs_av1_encode || self.specs[i].av1_encode)
                        && self.free_encode(i, now, enc) >= need.encode_sessions);
                let decode_ok = match need.nvdec {
                    Some(f) => self.specs[i].nvdec_decodes(&f) && self.decode_budget(i) > dec[i],
                    None => true,
                };
                !need.is_empty() && self.healthy(i) && encode_ok && decode_ok
            })
            .map(|i| {
                let own = self.encode_budget(i, now).saturating_sub(enc[i]);
                let free = self.free_encode(i, now, enc);
                (i, (free, own, self.decode_budget(i) - dec[i]))
            })
            .collect()
    }
}
