//! Property tests: random mixes of cards and random operation sequences, checked against
//! an independent reference model of the budgets.
//!
//! Properties:
//! (a) a grant never takes a card past its encode or decode budget, nor the consumer
//!     cards past the shared system cap;
//! (b) no deadlock or leak: `try_acquire` returns `None` only when no healthy card can hold
//!     the whole need, and once every lease is dropped the full capacity is back;
//! (c) no starvation: each grant goes to a fitting card with the most free headroom (ties:
//!     lowest index), so with equal cards a stream of one-session needs reaches every card
//!     before any card holds two more than another (in-use counts differ by at most one);
//! (d) `capacity_for(need)` equals the number of successive `try_acquire(need)` successes.

use crate::*;
use proptest::prelude::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod reference;
use reference::Model;

pub(super) const MODELS: &[&str] = &[
    "Tesla T4",
    "NVIDIA L4",
    "NVIDIA A10",
    "NVIDIA L40S",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA H200",
    "NVIDIA GeForce RTX 4090",
    "NVIDIA GeForce RTX 3060",
    "NVIDIA RTX A4000",
    "Mystery GPU",
];

fn formats() -> [DecodeFormat; 4] {
    [
        DecodeFormat::yuv420_8bit(Codec::H264),
        DecodeFormat::new(Codec::Hevc, ChromaFormat::Yuv420, 10),
        DecodeFormat::yuv420_8bit(Codec::Av1),
        DecodeFormat::new(Codec::H264, ChromaFormat::Yuv422, 8),
    ]
}

#[derive(Debug, Clone)]
pub(super) struct CardGen {
    pub(super) model: usize,
    pub(super) foreign: u32,
    pub(super) encode_override: Option<u32>,
    pub(super) decode_override: Option<u32>,
}

#[derive(Debug, Clone)]
enum Op {
    Acquire(SessionNeed),
    Release(usize),
    Penalize(u32),
    Advance(u64),
    /// Per card: (foreign sessions if counted, driver fault, present in the inventory).
    Update(Vec<(Option<u32>, bool, bool)>),
    MarkUnhealthy(u32),
    MarkHealthy(u32),
    CheckCapacity(SessionNeed),
}

fn card_gen() -> impl Strategy<Value = CardGen> {
    (
        0..MODELS.len(),
        prop_oneof![3 => Just(0u32), 1 => 0u32..6],
        prop::option::weighted(0.2, 0u32..10),
        prop::option::weighted(0.2, 0u32..4),
    )
        .prop_map(
            |(model, foreign, encode_override, decode_override)| CardGen {
                model,
                foreign,
                encode_override,
                decode_override,
            },
        )
}

fn need() -> impl Strategy<Value = SessionNeed> {
    (
        0u32..4,
        prop::bool::weighted(0.2),
        prop::option::weighted(0.4, 0usize..4),
    )
        .prop_map(|(encode_sessions, needs_av1_encode, fmt)| SessionNeed {
            encode_sessions,
            needs_av1_encode,
            nvdec: fmt.map(|f| formats()[f]),
        })
}

fn op(cards: usize) -> impl Strategy<Value = Op> {
    let card = 0..cards as u32 + 1; // one past the end: an unknown card
    prop_oneof![
        6 => need().prop_map(Op::Acquire),
        4 => (0usize..64).prop_map(Op::Release),
        1 => card.clone().prop_map(Op::Penalize),
        1 => (0u64..90).prop_map(Op::Advance),
        1 => prop::collection::vec(
            (prop::option::weighted(0.8, 0u32..6), prop::bool::weighted(0.1), prop::bool::weighted(0.95)),
            cards,
        )
        .prop_map(Op::Update),
        1 => card.clone().prop_map(Op::MarkUnhealthy),
        1 => card.prop_map(Op::MarkHealthy),
        1 => need().prop_map(Op::CheckCapacity),
    ]
}

fn held_counts(held: &[SessionLease], cards: usize) -> (Vec<u32>, Vec<u32>) {
    let (mut enc, mut dec) = (vec![0; cards], vec![0; cards]);
    for l in held {
        enc[l.card_index() as usize] += l.encode_sessions();
        dec[l.card_index() as usize] += u32::from(l.nvdec());
    }
    (enc, dec)
}

fn build(cards: &[CardGen], cfg: &mut BudgetConfig) -> (SessionScheduler, ManualClock) {
    let infos = cards
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let uuid = format!("GPU-{i}");
            let key = if i % 2 == 0 {
                uuid.clone()
            } else {
                i.to_string()
            };
            if c.encode_override.is_some() || c.decode_override.is_some() {
                let o = CardOverride {
                    encode_sessions: c.encode_override,
                    decode_sessions: c.decode_override,
                };
                cfg.overrides.insert(key, o);
            }
            CardInfo::simulated(i as u32, MODELS[c.model], &uuid).with_foreign_sessions(c.foreign)
        })
        .collect();
    let clock = ManualClock::new();
    let s =
        SessionScheduler::with_clock(&Inventory::simulated(infos), cfg, Arc::new(clock.clone()));
    (s, clock)
}

fn check_against_model(s: &SessionScheduler, m: &Model, now: Instant, held: &[SessionLease]) {
    let snap = s.snapshot();
    let (enc, dec) = held_counts(held, snap.cards.len());
    for (i, c) in snap.cards.iter().enumerate() {
        assert_eq!(
            (c.encode_in_use, c.decode_in_use),
            (enc[i], dec[i]),
            "card {i} counts"
        );
        assert_eq!(
            c.encode_budget,
            m.encode_budget(i, now),
            "card {i} encode budget"
        );
        assert_eq!(
            c.decode_budget,
            m.decode_budget(i),
            "card {i} decode budget"
        );
        assert_eq!(c.encode_free, m.free_encode(i, now, &enc), "card {i} free");
        assert_eq!(c.healthy, m.healthy(i));
    }
}

fn run_ops(cards: Vec<CardGen>, mut cfg: BudgetConfig, ops: Vec<Op>) {
    let (s, clock) = build(&cards, &mut cfg);
    let mut m = Model::new(&cards, &cfg);
    let n = cards.len();
    let mut held: Vec<SessionLease> = Vec::new();
    for op in ops {
        let now = clock.now();
        match op {
            Op::Acquire(need) => {
                let (enc, dec) = held_counts(&held, n);
                let fitting = m.fitting(&need, now, &enc, &dec);
                match s.try_acquire(&need) {
                    None => assert!(
                        fitting.is_empty(),
                        "(b) refused {need:?} though {fitting:?} fit"
                    ),
                    Some(lease) => {
                        let i = lease.card_index() as usize;
                        let best = fitting
                            .iter()
                            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
                        assert_eq!(Some(i), best.map(|b| b.0), "(c) not the roomiest card");
                        held.push(lease);
                        let (enc, dec) = held_counts(&held, n);
                        // Budgets may drop below what is already held (penalty, new
                        // foreign sessions); a grant must never be what takes a count over.
                        if need.encode_sessions > 0 {
                            assert!(enc[i] <= m.encode_budget(i, now), "(a) encode over budget");
                        }
                        if need.nvdec.is_some() {
                            assert!(dec[i] <= m.decode_budget(i), "(a) decode over budget");
                        }
                        if m.specs[i].is_consumer() && need.encode_sessions > 0 {
                            assert!(m.consumer_used(&enc) <= cfg.consumer_system_cap, "(a) cap");
                        }
                    }
                }
            }
            Op::Release(k) if !held.is_empty() => drop(held.swap_remove(k % held.len())),
            Op::Release(_) => {}
            Op::Penalize(c) => {
                let r = s.penalize(c);
                if (c as usize) < n {
                    assert!(r.is_ok());
                    let level = m.level(c as usize, now) + 1;
                    m.penalty[c as usize] = Some((level, now + cfg.penalty_duration()));
                } else {
                    assert_eq!(r, Err(GpuError::UnknownCard { index: c }));
                }
            }
            Op::Advance(secs) => clock.advance(Duration::from_secs(secs)),
            Op::Update(per_card) => {
                let mut infos = Vec::new();
                for (i, (foreign, fault, present)) in per_card.into_iter().enumerate() {
                    m.inventory_fault[i] = fault || !present;
                    if !present {
                        continue;
                    }
                    let mut info =
                        CardInfo::simulated(i as u32, MODELS[cards[i].model], &format!("GPU-{i}"));
                    // NVML's total includes this worker's own open sessions.
                    let own = s.snapshot().card(i as u32).map_or(0, |c| c.encode_in_use);
                    info.encoder_sessions = foreign.map(|f| EncoderSessions {
                        total: f + own,
                        foreign: f,
                    });
                    info.fault = fault.then(|| "GPU is lost".to_string());
                    m.foreign[i] = foreign.unwrap_or(m.foreign[i]);
                    infos.push(info);
                }
                s.update_inventory(&Inventory::simulated(infos));
            }
            Op::MarkUnhealthy(c) => {
                assert_eq!(s.mark_unhealthy(c, "Xid 79").is_ok(), (c as usize) < n);
                if (c as usize) < n {
                    m.manual_fault[c as usize] = true;
                }
            }
            Op::MarkHealthy(c) => {
                assert_eq!(s.mark_healthy(c).is_ok(), (c as usize) < n);
                if (c as usize) < n {
                    m.manual_fault[c as usize] = false;
                }
            }
            Op::CheckCapacity(need) => {
                let before = s.snapshot();
                let cap = s.capacity_for(&need);
                let mut extra = Vec::new();
                while let Some(l) = s.try_acquire(&need) {
                    extra.push(l);
                    assert!(extra.len() <= 1000, "runaway grants");
                }
                assert_eq!(
                    cap as usize,
                    extra.len(),
                    "(d) capacity_for vs grants for {need:?}"
                );
                drop(extra);
                assert_eq!(s.snapshot(), before, "(b) state restored after release");
            }
        }
        check_against_model(&s, &m, clock.now(), &held);
    }
    // (b) everything released: the full capacity is back.
    drop(held);
    let now = clock.now();
    let zero = vec![0; n];
    check_against_model(&s, &m, now, &[]);
    let dc: u32 = (0..n)
        .filter(|&i| !m.specs[i].is_consumer())
        .map(|i| m.encode_budget(i, now))
        .sum();
    let consumer: u32 = (0..n)
        .filter(|&i| m.specs[i].is_consumer())
        .map(|i| m.encode_budget(i, now))
        .sum();
    let shared = cfg
        .consumer_system_cap
        .saturating_sub(m.consumer_used(&zero));
    assert_eq!(
        s.capacity_for(&SessionNeed::encode(1)),
        dc + consumer.min(shared)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_cards_and_operations_keep_the_budget(
        (cards, ops) in prop::collection::vec(card_gen(), 1..5)
            .prop_flat_map(|cards| { let n = cards.len(); (Just(cards), prop::collection::vec(op(n), 1..60)) }),
        cap in 0u32..10,
        decode_per_engine in 0u32..5,
        step in 1u32..3,
        unknown in 0u32..4,
    ) {
        let cfg = BudgetConfig {
            consumer_system_cap: cap,
            decode_sessions_per_engine: decode_per_engine,
            unknown_card_encode_sessions: unknown,
            penalty_secs: 60,
            penalty_step: step,
            ..BudgetConfig::default()
        };
        run_ops(cards, cfg, ops);
    }

    #[test]
    fn equal_cards_all_get_work_before_any_gets_two_more(
        model in prop::sample::select(vec!["Tesla T4", "NVIDIA L4", "NVIDIA A10", "NVIDIA L40S", "NVIDIA RTX A4000"]),
        n in 1usize..6,
    ) {
        let infos = (0..n).map(|i| CardInfo::simulated(i as u32, model, &format!("GPU-{i}"))).collect();
        let s = SessionScheduler::new(&Inventory::simulated(infos), &BudgetConfig::default());
        let one = SessionNeed::encode(1);
        let mut held = Vec::new();
        let mut first_round = std::collections::BTreeSet::new();
        while let Some(l) = s.try_acquire(&one) {
            if held.len() < n {
                prop_assert!(first_round.insert(l.card_index()), "a card got a second before all got one");
            }
            held.push(l);
            let snap = s.snapshot();
            let used: Vec<u32> = snap.cards.iter().map(|c| c.encode_in_use).collect();
            prop_assert!(used.iter().max().unwrap() - used.iter().min().unwrap() <= 1, "{used:?}");
        }
        let budget = ModelSpec::lookup(model).default_encode_sessions.unwrap();
        prop_assert_eq!(held.len() as u32, budget * n as u32);
    }
}
