//! The benchmark's arithmetic on known samples: medians, the result lines and the segment
//! phases read from worker log lines.

use super::*;

fn run(farm_s: f64, ffmpeg_s: f64, overhead_s: f64, frames: Option<u64>) -> BenchRun {
    BenchRun {
        farm_s,
        ffmpeg_s,
        overhead_s,
        frames,
        want: 1800,
    }
}

#[test]
fn median_of_odd_and_even_counts() {
    assert_eq!(median([3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median([4.0, 1.0, 3.0, 2.0]), 2.5);
    assert!(median([]).is_nan());
}

#[test]
fn a_run_line_has_the_columns_of_the_script() {
    let r = run(66.0, 60.0, 0.0123, Some(1800));
    assert_eq!(r.line(2), "run 2\t66.00\t60.00\t1.100\t12.3\t1800\t1800");
    assert!(r.exact());
    let lost = run(66.0, 60.0, 0.0123, Some(1799));
    assert!(!lost.exact());
    assert!(run(1.0, 1.0, 0.0, None).line(1).contains("\tNone\t1800"));
}

#[test]
fn the_summary_passes_on_targets_met_and_fails_on_a_frame_lost() {
    let good = [
        run(61.0, 60.0, 0.010, Some(1800)),
        run(62.0, 60.0, 0.015, Some(1800)),
        run(70.0, 60.0, 0.030, Some(1800)),
    ];
    let s = BenchSummary::of(&good);
    assert!((s.ratio - 62.0 / 60.0).abs() < 1e-9);
    assert!((s.overhead_ms - 15.0).abs() < 1e-9);
    assert!(s.exact);
    let lines = s.lines();
    assert!(lines[0].ends_with("PASS"), "{}", lines[0]);
    assert!(lines[1].ends_with("PASS"), "{}", lines[1]);
    assert!(lines[2].ends_with("PASS"), "{}", lines[2]);

    let bad = [
        run(80.0, 60.0, 0.050, Some(1800)),
        run(90.0, 60.0, 0.040, Some(1799)),
    ];
    let s = BenchSummary::of(&bad);
    assert!(!s.exact);
    let lines = s.lines();
    assert!(lines[0].ends_with("MISS"), "{}", lines[0]);
    assert!(lines[1].ends_with("MISS"), "{}", lines[1]);
    assert!(lines[2].ends_with("FAIL"), "{}", lines[2]);
}

#[test]
fn segment_phases_are_read_from_the_debug_lines_only() {
    let w1 = "2026-12-04T10:00:00Z DEBUG tessera_worker::segment: segment phases job=j segment=0 \
              fetch_ms=12 child_ms=3 media_ms=800 store_ms=20\n\
              2026-12-04T10:00:01Z WARN something else fetch_ms=999\n";
    let w2 = "DEBUG tessera_worker::segment: segment phases job=j segment=1 fetch_ms=14 \
              child_ms=5 media_ms=900 store_ms=30\n\
              DEBUG segment phases fetch_ms=10 child_ms=4 media_ms=700 store_ms=25\n";
    let phases = segment_phases([w1, w2]);
    let names: Vec<&str> = phases.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["fetch", "child", "media", "store"]);
    assert_eq!(phases[0].1, [12, 14, 10]);
    assert_eq!(
        phases_line(&phases).as_deref(),
        Some("median ms per segment phase (3 segments)  fetch 12  child 4  media 800  store 25")
    );
    assert_eq!(phases_line(&segment_phases(["no phases here"])), None);
}

#[test]
fn ms_fields_need_a_name_and_digits() {
    assert_eq!(
        ms_fields("a_b_ms=7 x _ms=1 y_ms=z"),
        [("a_b".to_string(), 7)]
    );
}
