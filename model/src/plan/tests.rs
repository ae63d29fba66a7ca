//! Unit tests of the planner over synthetic packet indices.
use super::*;

const TB: Rational = Rational { num: 1, den: 30 };

/// CFR stream in decode order with one keyframe every `gop` frames and B-frame reordering
/// (I P B B pattern: decode order I0 P3 B1 B2 P6 B4 B5 ...).
fn stream(frames: i64, gop: i64, open_gop: bool) -> Vec<PacketEntry> {
    let mut out = Vec::new();
    let mut pts_order: Vec<i64> = Vec::new();
    let mut g0 = 0;
    while g0 < frames {
        let gend = (g0 + gop).min(frames);
        pts_order.push(g0);
        let mut j = g0 + 1;
        while j < gend {
            let anchor = (j + 2).min(gend - 1);
            pts_order.push(anchor);
            pts_order.extend(j..anchor);
            j = anchor + 1;
        }
        g0 = gend;
    }
    for (d, &p) in pts_order.iter().enumerate() {
        out.push(PacketEntry {
            pts: p,
            dts: d as i64 - 2,
            key: p % gop == 0,
            discard: false,
            recovery: None,
        });
    }
    if open_gop {
        // Move the two frames before every keyframe (after the first) behind it in decode
        // order: leading pictures of an open GOP.
        let mut reordered = Vec::new();
        let mut held: Vec<PacketEntry> = Vec::new();
        for p in out {
            if p.pts % gop >= gop - 2 && p.pts > 0 && p.pts + 2 < frames {
                held.push(p);
            } else {
                reordered.push(p);
                if p.key {
                    reordered.append(&mut held);
                }
            }
        }
        reordered.append(&mut held);
        return reordered;
    }
    out
}

fn check_partition(packets: &[PacketEntry], plans: &[SegmentPlan]) {
    for p in packets.iter().filter(|p| !p.discard) {
        let owners: Vec<_> = plans
            .iter()
            .filter(|s| p.pts >= s.start_pts && p.pts < s.end_pts)
            .collect();
        assert_eq!(
            owners.len(),
            1,
            "frame pts {} owned by {}",
            p.pts,
            owners.len()
        );
        let seg = owners[0];
        let idx = packets.iter().position(|q| q == p).unwrap();
        assert!(idx >= seg.first_packet && idx <= seg.last_packet);
        let fp = &packets[seg.first_packet];
        assert!(fp.key || fp.recovery.is_some() || seg.first_packet == 0);
        // A leading picture of an open GOP (shown before the keyframe it is decoded after)
        // refers to the GOP before: decoding must start before that keyframe.
        if let Some(key) = packets[..=idx].iter().rposition(|q| q.key) {
            if p.pts < packets[key].pts && packets[..key].iter().any(|q| q.key) {
                assert!(
                    seg.first_packet < key,
                    "frame pts {} leads keyframe pts {} but segment {} decodes from packet {}",
                    p.pts,
                    packets[key].pts,
                    seg.index,
                    seg.first_packet
                );
            }
        }
    }
    let shown = packets.iter().filter(|p| !p.discard).count() as u64;
    assert_eq!(plans.iter().map(|s| s.frames).sum::<u64>(), shown);
    for w in plans.windows(2) {
        assert_eq!(w[0].end_pts, w[1].start_pts);
    }
}

#[test]
fn closed_gop_cuts_on_keyframes() {
    let pk = stream(300, 30, false);
    let plans = plan_segments(&pk, TB, 2.0, 1);
    check_partition(&pk, &plans);
    assert_eq!(plans.len(), 5);
    assert!(plans.iter().all(|s| s.starts_on_keyframe));
    assert!(plans.iter().all(|s| s.start_pts % 30 == 0));
}

#[test]
fn open_gop_leading_frames_belong_to_previous_segment() {
    let pk = stream(300, 30, true);
    let plans = plan_segments(&pk, TB, 2.0, 1);
    check_partition(&pk, &plans);
    // the leading frames of keyframe 60 (pts 58, 59) are decoded after it: segment 0's
    // chunk must extend past the keyframe.
    let s0 = &plans[0];
    assert_eq!(s0.end_pts, 60);
    assert!(pk[s0.last_packet].pts < 60);
    let key60 = pk.iter().position(|p| p.pts == 60).unwrap();
    assert!(s0.last_packet > key60);
}

#[test]
fn sparse_keyframes_cut_between_keyframes_with_preroll() {
    let pk = stream(600, 600, false); // one keyframe in 20 s
    let plans = plan_segments(&pk, TB, 5.0, 1);
    check_partition(&pk, &plans);
    assert_eq!(plans.len(), 4);
    assert!(plans[1..]
        .iter()
        .all(|s| s.first_packet == 0 && !s.starts_on_keyframe));
}

#[test]
fn edit_list_discard_packets_are_never_owned() {
    let mut pk = stream(120, 30, false);
    for p in pk.iter_mut() {
        p.pts -= 10;
        p.dts -= 10;
        p.discard = p.pts < 0;
    }
    let plans = plan_segments(&pk, TB, 1.0, 1);
    check_partition(&pk, &plans);
    assert_eq!(plans[0].start_pts, 0);
    assert_eq!(
        plans[0].first_packet, 0,
        "decoding starts at the discarded keyframe"
    );
}

#[test]
fn short_tail_merges_and_vfr_is_fine() {
    let mut pk = stream(100, 30, false);
    // variable frame rate: stretch the second half
    for p in pk.iter_mut() {
        if p.pts > 50 {
            p.pts = 50 + (p.pts - 50) * 3;
        }
    }
    let plans = plan_segments(&pk, TB, 1.0, 1);
    check_partition(&pk, &plans);
    let last = plans.last().unwrap();
    assert!(last.end_pts - last.start_pts >= 15);
    assert!(plan_segments(&[], TB, 1.0, 2).is_empty());
}

#[test]
fn tail_segments_are_halved_when_rounds_are_uneven() {
    let pk = stream(420, 60, false); // 14 s, keyframes every 2 s: 7 segments
    let whole = plan_segments(&pk, TB, 2.0, 1);
    assert_eq!(whole.len(), 7);
    let split = plan_segments(&pk, TB, 2.0, 2);
    check_partition(&pk, &split);
    assert_eq!(split.len(), 9);
    assert_eq!(&split[..5], &whole[..5]);
    // Each halved segment's second piece first decodes the first one as its lead-in, so it
    // is a little shorter: 60 frames cut 32 + 28 (lead-in weight 0.11).
    for pair in split[5..].chunks(2) {
        let (a, b) = (pair[0].frames, pair[1].frames);
        assert_eq!(a + b, 60);
        let cost = b as f64 + balance::LEAD_IN_WEIGHT * a as f64;
        assert!((a as f64 - cost).abs() <= 1.0, "{a} {b}");
    }
    // an even count is left alone
    assert_eq!(plan_segments(&pk, TB, 2.0, 7), whole);
}

#[test]
fn intra_refresh_starts_decoding_a_refresh_period_early() {
    // x264 intra-refresh: one IDR, then recovery points every 25 frames that are whole
    // again 24 frames later; no B-frames.
    let pk: Vec<PacketEntry> = (0..250)
        .map(|i| PacketEntry {
            pts: i,
            dts: i,
            key: i == 0,
            discard: false,
            recovery: (i > 0 && i % 25 == 0).then_some(24),
        })
        .collect();
    let plans = plan_segments(&pk, TB, 2.0, 1);
    check_partition(&pk, &plans);
    for s in &plans[1..] {
        let fp = &pk[s.first_packet];
        let first_in_range = pk.iter().position(|p| p.pts == s.start_pts).unwrap();
        let ready = s.first_packet + fp.recovery.unwrap_or(0) as usize + 1;
        assert!(fp.key || ready <= first_in_range, "{s:?}");
        assert!(
            s.first_packet > 0,
            "decodes from a recent point, not the start"
        );
        assert!(!s.starts_on_keyframe);
    }
}

#[test]
fn short_inputs_give_every_worker_a_segment() {
    let pk = stream(150, 250, false); // 5 s, one keyframe
    assert_eq!(plan_segments(&pk, TB, 10.0, 1).len(), 1);
    let plans = plan_segments(&pk, TB, 10.0, 2);
    check_partition(&pk, &plans);
    assert_eq!(plans.len(), 2);
    let plans = plan_segments(&pk, TB, 10.0, 3);
    check_partition(&pk, &plans);
    assert_eq!(plans.len(), 3);
    // One keyframe: the second segment decodes the first one's frames as its lead-in, so it
    // gets fewer frames of its own (74 lead-in frames cost about 8 frames of work).
    let plans = plan_segments(&pk, TB, 10.0, 2);
    assert!(
        plans[0].frames > plans[1].frames && plans[0].frames <= 83,
        "{:?}",
        plans.iter().map(|p| p.frames).collect::<Vec<_>>()
    );
    // A keyframe in the middle: even halves, no lead-in.
    let pk2 = stream(150, 75, false);
    let plans = plan_segments(&pk2, TB, 10.0, 2);
    assert_eq!(
        plans.iter().map(|p| p.frames).collect::<Vec<_>>(),
        vec![75, 75]
    );
    // Too short to share: a quarter second at least per segment.
    let tiny = stream(9, 30, false);
    assert_eq!(plan_segments(&tiny, TB, 10.0, 4).len(), 1);
}

#[test]
fn work_before_the_last_segment_shortens_it() {
    let pk = stream(150, 250, false); // 5 s, one keyframe
    let even = plan_segments(&pk, TB, 10.0, 2);
    let busy = plan_segments_busy(&pk, TB, 10.0, 2, 12.0);
    check_partition(&pk, &busy);
    assert_eq!(busy.len(), 2);
    // 12 frames of work move the cut by about 12 / (2 + lead-in weight) frames.
    let moved = even[1].frames - busy[1].frames;
    assert!((4..=8).contains(&moved), "moved {moved}");
    // An estimate far off costs at most one segment's share: both segments stay.
    let huge = plan_segments_busy(&pk, TB, 10.0, 2, 1e9);
    check_partition(&pk, &huge);
    assert_eq!(huge.len(), 2);
    assert!(huge[1].frames >= 20, "{:?}", huge[1]);
    // No work: the plan is the plain one.
    assert_eq!(plan_segments_busy(&pk, TB, 10.0, 2, 0.0), even);
    // A long input is cut as without it.
    let long = stream(1800, 250, false);
    assert_eq!(
        plan_segments_busy(&long, TB, 10.0, 2, 46.0),
        plan_segments(&long, TB, 10.0, 2)
    );
    // Rounds that come out even are cut as without it.
    let even_rounds = stream(1200, 300, false);
    assert_eq!(
        plan_segments_busy(&even_rounds, TB, 10.0, 2, 46.0),
        plan_segments(&even_rounds, TB, 10.0, 2)
    );
}

proptest::proptest! {
    #[test]
    fn fuzz_planning_plans_every_frame_once(
        frames in 1i64..400,
        gop in 1i64..120,
        open in proptest::bool::ANY,
        target in 1u32..40,
        parallelism in 1usize..6,
        busy in 0.0f64..300.0,
    ) {
        let pk = stream(frames, gop, open);
        let plans = plan_segments_busy(&pk, TB, f64::from(target) / 10.0, parallelism, busy);
        check_partition(&pk, &plans);
    }
}

#[test]
fn cuts_go_to_scene_changes_near_the_target_length() {
    // 12 s at 30 fps, a keyframe every second; scenes change at 2.5 s, 4.2 s and 9.9 s.
    let pk = stream(360, 30, false);
    let scenes = shown_pts(&pk, &[75, 126, 297, 5000]);
    assert_eq!(scenes, [75, 126, 297], "frames past the end are left out");
    let plans = plan_segments_at_scenes(&pk, TB, (3.0, 1, 0.0), &scenes);
    check_partition(&pk, &plans);
    let starts: Vec<i64> = plans.iter().map(|p| p.start_pts).collect();
    // Each cut looks within ±50 % of 3 s (90 ticks) past the last one: 45..=135 holds 75
    // (and 126, farther from 90); 120..=210 holds 126; 171..=261 holds no scene, so the
    // keyframe nearest 216 (210); 255..=345 holds 297.
    assert_eq!(starts, [0, 75, 126, 210, 297]);
    assert!(
        !plans[1].starts_on_keyframe,
        "a scene cut between keyframes decodes a lead-in"
    );
    // Without scenes, the keyframes.
    let plain: Vec<i64> = (plan_segments(&pk, TB, 3.0, 1).iter())
        .map(|p| p.start_pts)
        .collect();
    assert_eq!(plain, [0, 90, 180, 270]);
}

proptest::proptest! {
    #[test]
    fn fuzz_scene_cuts_plan_every_frame_once_and_cut_at_scenes(
        frames in 1i64..400,
        gop in 1i64..120,
        open in proptest::bool::ANY,
        target in 5u32..40,
        scenes in proptest::collection::btree_set(0u64..420, 0..12),
    ) {
        let pk = stream(frames, gop, open);
        let list: Vec<u64> = scenes.into_iter().collect();
        let cuts = shown_pts(&pk, &list);
        let plans = plan_segments_at_scenes(&pk, TB, (f64::from(target) / 10.0, 1, 0.0), &cuts);
        check_partition(&pk, &plans);
        // A cut with a scene change in its window is at one.
        let t = TB.ticks(f64::from(target) / 10.0).max(1);
        for w in plans.windows(2) {
            let (start, cut) = (w[0].start_pts, w[1].start_pts);
            let window = (start + 1).max(start + t / 2)..=start + t + t / 2;
            if cuts.iter().any(|c| window.contains(c)) {
                proptest::prop_assert!(cuts.contains(&cut), "cut {} with scenes {:?}", cut, cuts);
            }
        }
    }
}

#[test]
fn bias_makes_timestamps_non_negative() {
    let pk = [PacketEntry {
        pts: -5,
        dts: -7,
        key: true,
        discard: true,
        recovery: None,
    }];
    assert_eq!(timestamp_bias(&pk, TB), 7 + 300);
}
