//! The search against generated rate-quality curves: straight, bent both ways, noisy and
//! non-monotonic, flat (a still picture, a one-frame segment), and targets beyond either
//! bound.

use super::{Next, Probe, Search, ABOVE, BELOW};

fn x264(target: f64) -> Search {
    Search {
        target,
        min_rate_factor: 12.0,
        max_rate_factor: 40.0,
        step: 0.5,
        slope: 1.2,
        max_probes: 4,
        fine_step: 0.1,
    }
}

/// Runs the search against `curve`; returns the probes and the index kept.
fn run(search: &Search, curve: impl Fn(f64) -> f64) -> (Vec<Probe>, usize) {
    let mut probes = Vec::new();
    loop {
        match search.next(&probes) {
            Next::Probe(rf) => {
                assert!(
                    rf >= search.min_rate_factor && rf <= search.max_rate_factor,
                    "probe {rf} out of bounds"
                );
                // On the grid, or on the fine grid between two probes that bracket the target.
                let off = |step: f64| ((rf / step) - (rf / step).round()).abs() > 1e-6;
                assert!(
                    !off(search.step) || !off(search.fine_step),
                    "probe {rf} off the grid"
                );
                assert!(
                    probes.len() < search.max_probes,
                    "more than {} probes",
                    search.max_probes
                );
                probes.push(Probe {
                    rate_factor: rf,
                    vmaf: curve(rf).clamp(0.0, 100.0),
                });
            }
            Next::Keep(i) => return (probes, i),
        }
    }
}

/// xorshift64, for the generated curves.
fn draw(state: &mut u64) -> f64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state % 1_000_000) as f64 / 1_000_000.0
}

#[test]
fn a_straight_curve_lands_in_the_window_within_the_probes() {
    let mut total = 0;
    for target in [85.0, 90.0, 93.0, 95.0, 97.0] {
        // 1.5 VMAF per unit, 99 at rate factor 14: every target here is reachable.
        let curve = |rf: f64| 99.0 - 1.5 * (rf - 14.0);
        let search = x264(target);
        let (probes, kept) = run(&search, curve);
        assert!(
            search.lands(&probes[kept]),
            "target {target}: {probes:?} kept {kept}"
        );
        total += probes.len();
    }
    // From the middle of the bounds (no hint), with the codec's typical slope off by a
    // quarter and the curve clipped at 100: 3.2 probes a target on average at most.
    assert!(total <= 16, "{total} probes for 5 targets");
}

/// Bent curves of many shapes and slopes (generated): whenever the target is reachable within
/// the bounds, the kept probe reaches it (at least `target - BELOW`), and when one probe landed
/// the kept one is no more than ABOVE over the target or is the cheapest that reaches it.
#[test]
fn generated_curves_keep_a_probe_that_reaches_the_target_when_one_can() {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let (mut cases, mut landed) = (0, 0);
    for _ in 0..2000 {
        let (top, slope, bend) = (
            92.0 + 8.0 * draw(&mut state),
            0.4 + 2.6 * draw(&mut state),
            draw(&mut state),
        );
        let target = 80.0 + 17.0 * draw(&mut state);
        // Convex or concave: the slope grows or shrinks along the rate factor.
        let curve = move |rf: f64| {
            let x = rf - 12.0;
            top - slope * x * (0.5 + bend * x / 28.0 + (1.0 - bend) * 0.5)
        };
        let search = x264(target);
        let (probes, kept) = run(&search, curve);
        let best_possible = curve(search.min_rate_factor);
        let k = probes[kept];
        if best_possible >= target - BELOW {
            cases += 1;
            assert!(k.vmaf >= target - BELOW, "{target}: {probes:?} kept {kept}");
            landed += usize::from(search.lands(&k));
        } else {
            // Out of reach: the most bits allowed, the best it can do.
            assert_eq!(
                k.rate_factor, search.min_rate_factor,
                "{target}: {probes:?}"
            );
        }
    }
    // Most reachable targets land in the window (the rest reach it with a few bits to spare).
    assert!(landed * 10 >= cases * 9, "{landed} of {cases} landed");
}

#[test]
fn a_noisy_non_monotonic_curve_still_ends_and_keeps_a_reaching_probe() {
    let mut state = 7_u64;
    for _ in 0..500 {
        let noise: Vec<f64> = (0..=80).map(|_| 3.0 * (draw(&mut state) - 0.5)).collect();
        let target = 88.0 + 8.0 * draw(&mut state);
        let curve = |rf: f64| 100.0 - 1.2 * (rf - 12.0) + noise[(rf * 2.0) as usize % noise.len()];
        let search = x264(target);
        let (probes, kept) = run(&search, curve);
        if probes.iter().any(|p| p.vmaf >= target - BELOW) {
            assert!(
                probes[kept].vmaf >= target - BELOW,
                "{probes:?} kept {kept}"
            );
            // The cheapest of those that reach it.
            let cheapest = (probes.iter())
                .filter(|p| p.vmaf >= target - BELOW)
                .map(|p| p.rate_factor)
                .fold(f64::MIN, f64::max);
            assert_eq!(probes[kept].rate_factor, cheapest);
        }
    }
}

#[test]
fn flat_curves_end_at_once_at_the_cheapest_probe_that_reaches() {
    // A still picture or a one-frame segment: the same score whatever the rate factor.
    for score in [99.0, 94.0, 60.0] {
        let search = x264(93.0);
        let (probes, kept) = run(&search, |_| score);
        assert!(probes.len() <= search.max_probes);
        if score >= 93.0 - BELOW {
            let top = probes
                .iter()
                .map(|p| p.rate_factor)
                .fold(f64::MIN, f64::max);
            assert_eq!(probes[kept].rate_factor, top, "{probes:?}");
        }
    }
}

#[test]
fn bounds_hold_when_the_target_is_beyond_them() {
    // Too easy: even the fewest bits allowed score far above the target.
    let easy = x264(80.0);
    let (probes, kept) = run(&easy, |rf| 100.0 - 0.1 * rf);
    assert_eq!(probes[kept].rate_factor, easy.max_rate_factor, "{probes:?}");
    assert!(probes[kept].vmaf > 80.0 + ABOVE);
    // Out of reach: even the most bits allowed score below it.
    let hard = x264(99.0);
    let (probes, kept) = run(&hard, |rf| 90.0 - rf * 0.5);
    assert_eq!(probes[kept].rate_factor, hard.min_rate_factor, "{probes:?}");
    // Narrow bounds: one grid point only.
    let one = Search {
        min_rate_factor: 23.0,
        max_rate_factor: 23.0,
        ..x264(93.0)
    };
    let (probes, kept) = run(&one, |rf| 100.0 - rf);
    assert_eq!((probes.len(), probes[kept].rate_factor), (1, 23.0));
}

#[test]
fn the_first_probe_takes_the_hint_on_the_grid() {
    let s = x264(93.0);
    assert_eq!(s.first(None), 26.0);
    // A hint is a rate factor someone kept (a scene's first segment): the fine grid.
    assert!((s.first(Some(23.3)) - 23.3).abs() < 1e-9);
    assert!((s.first(Some(23.34)) - 23.3).abs() < 1e-9);
    assert_eq!(s.first(Some(3.0)), 12.0);
    let svt = Search {
        min_rate_factor: 20.0,
        max_rate_factor: 50.0,
        step: 1.0,
        fine_step: 1.0,
        ..s
    };
    assert_eq!(svt.first(Some(33.4)), 33.0);
}

#[test]
fn a_crossing_between_grid_points_is_closed_in_on_not_left_far_above() {
    // Grain: 4.2 VMAF per unit; 22.0 scores 98.7, 23.5 scores 92.4 (under the window), the
    // interpolation rounds back onto 23.5: the search tries 23.3 rather than keep 22.0.
    let s = x264(93.0);
    let grain = |rf: f64| Probe {
        rate_factor: rf,
        vmaf: 98.7 - (rf - 22.0) * 4.2,
    };
    let probes = [grain(22.0), grain(23.5)];
    let Next::Probe(rf) = s.next(&probes) else {
        panic!("kept a probe 5.7 above the target")
    };
    assert!((rf - 23.3).abs() < 1e-6, "{rf}");
    let mut more = probes.to_vec();
    more.push(grain(rf));
    assert_eq!(s.next(&more), Next::Keep(2), "23.3 scores 93.2: kept");
    // Whole-number encoders (NVENC's cq, SVT-AV1) never probe between their steps.
    let whole = Search {
        step: 1.0,
        fine_step: 1.0,
        ..s
    };
    let probes = [grain(22.0), grain(23.0), grain(24.0)];
    assert_eq!(whole.next(&probes), Next::Keep(1));
}
