//! Scenario tests of the scheduler over simulated inventories.

use super::*;
use crate::clock::ManualClock;
use crate::config::CardOverride;
use crate::decode::{Codec, DecodeFormat};
use crate::inventory::CardInfo;
use std::time::Duration;

fn sched(names: &[&str]) -> (SessionScheduler, ManualClock) {
    sched_with(names, &BudgetConfig::default())
}

fn sched_with(names: &[&str], cfg: &BudgetConfig) -> (SessionScheduler, ManualClock) {
    let cards = names
        .iter()
        .enumerate()
        .map(|(i, n)| CardInfo::simulated(i as u32, n, &format!("GPU-{i}")))
        .collect();
    let clock = ManualClock::new();
    let s =
        SessionScheduler::with_clock(&Inventory::simulated(cards), cfg, Arc::new(clock.clone()));
    (s, clock)
}

fn in_use(s: &SessionScheduler) -> Vec<u32> {
    s.snapshot().cards.iter().map(|c| c.encode_in_use).collect()
}

#[test]
fn one_t4_holds_four_sessions() {
    let (s, _) = sched(&["Tesla T4"]);
    let one = SessionNeed::encode(1);
    assert_eq!(s.capacity_for(&one), 4);
    let leases: Vec<_> = (0..4).map(|_| s.try_acquire(&one).unwrap()).collect();
    assert!(s.try_acquire(&one).is_none());
    assert!(s.try_acquire(&one.with_av1_encode()).is_none());
    drop(leases);
    assert!(
        s.try_acquire(&SessionNeed::encode(1).with_av1_encode())
            .is_none(),
        "T4: no AV1"
    );
    let av1 = DecodeFormat::yuv420_8bit(Codec::Av1);
    assert!(!s.nvdec_decodes(&av1));
    assert!(s
        .try_acquire(&SessionNeed::encode(1).with_nvdec(av1))
        .is_none());
    assert_eq!(s.capacity_for(&one), 4);
}

#[test]
fn one_l4_does_av1_and_eight_sessions() {
    let (s, _) = sched(&["NVIDIA L4"]);
    let av1 = SessionNeed::encode(1)
        .with_av1_encode()
        .with_nvdec(DecodeFormat::yuv420_8bit(Codec::Av1));
    assert_eq!(s.capacity_for(&av1), 8);
    let lease = s.try_acquire(&av1).unwrap();
    assert!(lease.nvdec());
    assert_eq!(lease.card_uuid(), Some("GPU-0"));
    let snap = s.snapshot();
    assert_eq!(
        (snap.cards[0].encode_in_use, snap.cards[0].decode_in_use),
        (1, 1)
    );
    drop(lease);
    assert_eq!(s.snapshot().cards[0].decode_in_use, 0);
}

#[test]
fn two_l4s_share_the_load_evenly() {
    let (s, _) = sched(&["NVIDIA L4", "NVIDIA L4"]);
    let one = SessionNeed::encode(1);
    assert_eq!(s.capacity_for(&one), 16);
    let a = s.try_acquire(&one).unwrap();
    let b = s.try_acquire(&one).unwrap();
    assert_eq!((a.card_index(), b.card_index()), (0, 1));
    let mut held = vec![a, b];
    for _ in 0..10 {
        held.push(s.try_acquire(&one).unwrap());
        let u = in_use(&s);
        assert!(u[0].abs_diff(u[1]) <= 1, "{u:?}");
    }
    held.retain(|l| l.card_index() != 0);
    let next = s.try_acquire(&one).unwrap();
    assert_eq!(
        next.card_index(),
        0,
        "the emptier card gets the next segment"
    );
}

#[test]
fn two_geforce_cards_share_the_system_cap() {
    let (s, _) = sched(&["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090"]);
    let one = SessionNeed::encode(1);
    assert_eq!(s.capacity_for(&one), 8, "cap 8 shared, not 8 per card");
    let held: Vec<_> = (0..8).map(|_| s.try_acquire(&one).unwrap()).collect();
    assert!(s.try_acquire(&one).is_none());
    assert_eq!(in_use(&s), vec![4, 4]);
    let snap = s.snapshot();
    assert_eq!(snap.consumer_in_use, 8);
    assert!(snap.cards.iter().all(|c| c.encode_free == 0));
    drop(held);
    assert_eq!(s.capacity_for(&SessionNeed::encode(3)), 2);
}

#[test]
fn foreign_sessions_reduce_the_budget() {
    let cards = vec![
        CardInfo::simulated(0, "NVIDIA L4", "GPU-0").with_foreign_sessions(5),
        CardInfo::simulated(1, "NVIDIA GeForce RTX 4080", "GPU-1").with_foreign_sessions(6),
    ];
    let s = SessionScheduler::new(
        &Inventory::simulated(cards.clone()),
        &BudgetConfig::default(),
    );
    let snap = s.snapshot();
    assert_eq!(snap.cards[0].encode_budget, 3);
    assert_eq!(
        snap.cards[1].encode_free, 2,
        "8 system-wide minus 6 foreign"
    );
    assert_eq!(s.capacity_for(&SessionNeed::encode(1)), 5);

    let mut later = Inventory::simulated(cards);
    later.cards[0] = later.cards[0].clone().with_foreign_sessions(0);
    later.cards[1].encoder_sessions = None; // count unknown: keep the last one
    s.update_inventory(&later);
    assert_eq!(s.capacity_for(&SessionNeed::encode(1)), 10);
}

#[test]
fn h200_decodes_but_never_encodes() {
    let (s, _) = sched(&["NVIDIA H200"]);
    assert_eq!(s.capacity_for(&SessionNeed::encode(1)), 0);
    let hevc = DecodeFormat::yuv420_8bit(Codec::Hevc);
    let decode_only = SessionNeed::default().with_nvdec(hevc);
    assert_eq!(s.capacity_for(&decode_only), 28, "7 NVDEC x 4");
    let lease = s.try_acquire(&decode_only).unwrap();
    assert_eq!((lease.encode_sessions(), lease.nvdec()), (0, true));
    assert!(s
        .try_acquire(&SessionNeed::encode(1).with_nvdec(hevc))
        .is_none());
    assert!(
        s.try_acquire(&SessionNeed::default()).is_none(),
        "empty need"
    );
    assert_eq!(s.capacity_for(&SessionNeed::default()), 0);
}

#[test]
fn three_renditions_go_on_one_card_or_nowhere() {
    let (s, _) = sched(&["Tesla T4", "Tesla T4"]);
    let one = SessionNeed::encode(1);
    let three = SessionNeed::encode(3);
    let _a = s.try_acquire(&one).unwrap();
    let _b = s.try_acquire(&one).unwrap();
    // 3 free on each card: two ladders fit, one per card.
    assert_eq!(s.capacity_for(&three), 2);
    let x = s.try_acquire(&three).unwrap();
    assert_eq!(x.encode_sessions(), 3);
    let _y = s.try_acquire(&three).unwrap();
    assert_eq!(in_use(&s), vec![4, 4]);
    drop(x);
    let _c = s.try_acquire(&one).unwrap();
    // 2 free on one card, 0 on the other: 2 free sessions in total but no card holds 3.
    assert!(s.try_acquire(&three).is_none());
    assert_eq!(s.capacity_for(&three), 0);
    assert_eq!(
        in_use(&s).iter().sum::<u32>(),
        6,
        "nothing taken by the failed acquire"
    );
}

#[test]
fn penalty_lowers_the_budget_then_expires() {
    let cfg = BudgetConfig {
        penalty_secs: 30,
        ..BudgetConfig::default()
    };
    let (s, clock) = sched_with(&["Tesla T4"], &cfg);
    let one = SessionNeed::encode(1);
    let lease = s.try_acquire(&one).unwrap();
    lease.penalize();
    s.penalize(0).unwrap();
    let snap = s.snapshot();
    assert_eq!(snap.cards[0].encode_budget, 2);
    assert_eq!(snap.cards[0].penalty_level, 2);
    assert!(snap.cards[0].penalized_until.is_some());
    assert_eq!(s.capacity_for(&one), 1);
    for _ in 0..5 {
        s.penalize(0).unwrap();
    }
    assert_eq!(s.snapshot().cards[0].encode_budget, 0, "never below zero");
    drop(lease);
    clock.advance(Duration::from_secs(29));
    assert_eq!(s.capacity_for(&one), 0);
    clock.advance(Duration::from_secs(1));
    assert_eq!(s.capacity_for(&one), 4, "recovers fully on expiry");
    assert_eq!(s.snapshot().cards[0].penalized_until, None);
    assert_eq!(s.penalize(9), Err(GpuError::UnknownCard { index: 9 }));
}

#[test]
fn unhealthy_card_gets_no_work() {
    let (s, _) = sched(&["NVIDIA L4", "NVIDIA L4"]);
    let one = SessionNeed::encode(1);
    let lease = s.try_acquire(&one).unwrap();
    assert_eq!(lease.card_index(), 0);
    s.mark_unhealthy(0, "Xid 79: GPU has fallen off the bus")
        .unwrap();
    for _ in 0..8 {
        assert_eq!(s.try_acquire(&one).unwrap().card_index(), 1);
    }
    assert_eq!(s.capacity_for(&one), 8);
    let snap = s.snapshot();
    assert!(!snap.cards[0].healthy);
    assert_eq!(
        snap.cards[0].fault.as_deref(),
        Some("Xid 79: GPU has fallen off the bus")
    );
    drop(lease);
    assert_eq!(
        s.snapshot().cards[0].encode_in_use,
        0,
        "leases still release"
    );
    s.mark_healthy(0).unwrap();
    assert_eq!(s.capacity_for(&one), 16);
}

#[test]
fn inventory_faults_and_missing_cards_come_and_go() {
    let (s, _) = sched(&["NVIDIA L4", "Tesla T4"]);
    let mut faulty = CardInfo::simulated(0, "NVIDIA L4", "GPU-0");
    faulty.fault = Some("memory_info: GPU is lost".into());
    s.update_inventory(&Inventory::simulated(vec![faulty]));
    let snap = s.snapshot();
    assert!(!snap.cards[0].healthy && !snap.cards[1].healthy);
    assert_eq!(s.capacity_for(&SessionNeed::encode(1)), 0);
    s.update_inventory(&Inventory::simulated(vec![
        CardInfo::simulated(0, "NVIDIA L4", "GPU-0"),
        CardInfo::simulated(1, "Tesla T4", "GPU-1"),
        CardInfo::simulated(2, "Tesla T4", "GPU-new"),
    ]));
    assert_eq!(s.capacity_for(&SessionNeed::encode(1)), 12);
}

#[test]
fn overrides_by_uuid_and_index() {
    let mut cfg = BudgetConfig::default();
    let set = |n| CardOverride {
        encode_sessions: Some(n),
        decode_sessions: None,
    };
    cfg.overrides.insert("GPU-0".into(), set(2));
    cfg.overrides.insert("1".into(), set(1));
    cfg.overrides.insert("GPU-nowhere".into(), set(5));
    let (s, _) = sched_with(&["NVIDIA L40S", "NVIDIA L40S"], &cfg);
    let snap = s.snapshot();
    assert_eq!(
        (snap.cards[0].encode_budget, snap.cards[1].encode_budget),
        (2, 1)
    );
}

#[test]
fn leases_from_many_threads_never_overbook_or_leak() {
    let (s, _) = sched(&["NVIDIA L4", "Tesla T4", "NVIDIA GeForce RTX 4090"]);
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..300 {
                    let need = SessionNeed::encode(1 + (t + i) % 3);
                    if let Some(lease) = s.try_acquire(&need) {
                        let snap = s.snapshot();
                        assert!(snap
                            .cards
                            .iter()
                            .all(|c| c.encode_in_use <= c.encode_budget));
                        assert!(snap.consumer_in_use <= snap.consumer_cap);
                        drop(lease);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(in_use(&s), vec![0, 0, 0]);
    assert_eq!(s.capacity_for(&SessionNeed::encode(1)), 8 + 4 + 8);
}

/// Review H1: in a container NVML lists the worker's own sessions under host pids, so all
/// look foreign; the count-based figure keeps a T4 at 4 segments, not 2.
#[test]
fn own_sessions_seen_as_foreign_do_not_halve_a_card() {
    let (s, _) = sched(&["Tesla T4"]);
    let one = SessionNeed::encode(1);
    let held: Vec<_> = (0..2).map(|_| s.try_acquire(&one).unwrap()).collect();
    let mut card = CardInfo::simulated(0, "Tesla T4", "GPU-0");
    card.encoder_sessions = Some(crate::inventory::EncoderSessions {
        total: 2,
        foreign: 2,
    });
    s.update_inventory(&Inventory::simulated(vec![card.clone()]));
    assert_eq!(s.snapshot().cards[0].foreign_encode, 0);
    assert_eq!(s.capacity_for(&one), 2, "two more, as without containers");
    // One real foreign session on top of ours still counts.
    card.encoder_sessions = Some(crate::inventory::EncoderSessions {
        total: 3,
        foreign: 3,
    });
    s.update_inventory(&Inventory::simulated(vec![card]));
    assert_eq!(s.snapshot().cards[0].foreign_encode, 1);
    assert_eq!(s.capacity_for(&one), 1);
    drop(held);
}

/// Review H2: a card marked unhealthy comes back after probation when its probe passes,
/// stays out another period when it fails, and is never probed while NVML shows a fault.
#[test]
fn unhealthy_cards_return_after_a_probation_probe() {
    let (s, clock) = sched(&["NVIDIA L4", "NVIDIA L4"]);
    let one = SessionNeed::encode(1);
    s.mark_unhealthy(1, "CUDA_ERROR_ILLEGAL_ADDRESS").unwrap();
    assert_eq!(s.capacity_for(&one), 8);
    assert!(s.due_for_probation().is_empty());
    clock.advance(Duration::from_secs(299));
    assert!(s.due_for_probation().is_empty());
    clock.advance(Duration::from_secs(1));
    assert_eq!(s.due_for_probation(), vec![1]);
    s.probation_result(1, false).unwrap();
    assert!(s.due_for_probation().is_empty(), "another period");
    assert_eq!(s.capacity_for(&one), 8);
    clock.advance(Duration::from_secs(300));
    // A fault in the inventory holds the probe back.
    let mut lost = CardInfo::simulated(1, "NVIDIA L4", "GPU-1");
    lost.fault = Some("GPU is lost".into());
    let ok0 = CardInfo::simulated(0, "NVIDIA L4", "GPU-0");
    s.update_inventory(&Inventory::simulated(vec![ok0.clone(), lost]));
    assert!(s.due_for_probation().is_empty());
    let ok1 = CardInfo::simulated(1, "NVIDIA L4", "GPU-1");
    s.update_inventory(&Inventory::simulated(vec![ok0, ok1]));
    assert_eq!(s.due_for_probation(), vec![1]);
    s.probation_result(1, true).unwrap();
    assert_eq!(s.capacity_for(&one), 16);
    assert!(s.snapshot().cards[1].healthy);
}

/// A need no card could ever hold is told apart from one that must wait.
#[test]
fn needs_above_every_cards_budget_are_recognised() {
    let (s, _) = sched(&["Tesla T4"]);
    assert!(s.could_ever_fit(&SessionNeed::encode(4)));
    assert!(!s.could_ever_fit(&SessionNeed::encode(5)));
    assert!(!s.could_ever_fit(&SessionNeed::encode(1).with_av1_encode()));
    // Busy or unhealthy is not "never".
    let _all = s.try_acquire(&SessionNeed::encode(4)).unwrap();
    s.mark_unhealthy(0, "x").unwrap();
    assert!(s.could_ever_fit(&SessionNeed::encode(2)));
    let (l4, _) = sched(&["NVIDIA L4"]);
    assert!(l4.could_ever_fit(&SessionNeed::encode(1).with_av1_encode()));
    let (h200, _) = sched(&["NVIDIA H200"]);
    assert!(!h200.could_ever_fit(&SessionNeed::encode(1)));
}
