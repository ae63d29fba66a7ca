//! The batch benchmark's figures from made-up rounds.

use super::*;

#[test]
fn percentiles_interpolate_between_ranks() {
    let v = [5.0, 1.0, 4.0, 2.0, 3.0];
    assert_eq!(percentile(&v, 50.0), 3.0);
    assert_eq!(percentile(&v, 0.0), 1.0);
    assert_eq!(percentile(&v, 100.0), 5.0);
    assert!((percentile(&v, 95.0) - 4.8).abs() < 1e-12);
    assert!((percentile(&[1.0, 2.0], 50.0) - 1.5).abs() < 1e-12);
    assert_eq!(percentile(&[7.0], 95.0), 7.0);
    assert!(percentile(&[], 50.0).is_nan());
}

fn round(farm_s: f64, ffmpeg_s: f64, cpu: FarmCpu, ffmpeg_cpu: f64) -> Round {
    Round {
        farm_first: true,
        farm: Side {
            makespan_s: farm_s,
            cpu_s: cpu.total(),
            latencies_s: vec![1.0, 2.0, 3.0, 10.0],
        },
        cpu,
        ffmpeg: Side {
            makespan_s: ffmpeg_s,
            cpu_s: ffmpeg_cpu,
            latencies_s: vec![2.0, 4.0],
        },
        output_min: 10.0,
        segments: 100,
        ops: Default::default(),
        ffmpeg_check_cpu_s: 10.0,
    }
}

fn cpu(dispatcher: f64, children: f64, workers: f64) -> FarmCpu {
    FarmCpu {
        dispatcher,
        dispatcher_children: children,
        workers,
        worker_processes: workers / 10.0,
        garage: 2.0,
        rabbitmq: 1.0,
    }
}

#[test]
fn a_round_gives_ratios_shares_and_time_per_segment() {
    let r = round(120.0, 100.0, cpu(1.0, 6.0, 100.0), 100.0);
    assert!((r.makespan_ratio() - 1.2).abs() < 1e-12);
    assert!((r.farm.cpu_per_min(r.output_min) - 11.0).abs() < 1e-12);
    assert!((r.cpu_ratio() - 1.1).abs() < 1e-12);
    assert!((r.cpu_ratio_without_broker() - 1.09).abs() < 1e-12);
    let (share, share_all) = r.dispatcher_share();
    assert!((share - 1.0 / 110.0).abs() < 1e-12);
    assert!((share_all - 7.0 / 110.0).abs() < 1e-12);
    assert_eq!(r.dispatcher_ms_per_segment(), (10.0, 70.0));
    assert_eq!(
        r.farm.latency(),
        (2.5, percentile(&[1.0, 2.0, 3.0, 10.0], 95.0))
    );
    let lines = r.lines(1);
    assert!(lines[0].ends_with("ratio 1.200"), "{}", lines[0]);
    assert!(lines[4].contains("10.0 ms per segment (70.0 ms with them), 100 segments"));
    // Farm 110 CPU-s against ffmpeg's 100 and 10 to decode its outputs once.
    assert!((r.cpu_ratio_with_check() - 1.0).abs() < 1e-12);
    assert!(lines[5].ends_with("with that check 1.000"), "{}", lines[5]);
}

#[test]
fn farm_cpu_since_subtracts_each_part() {
    let d = cpu(3.0, 7.0, 50.0).since(&cpu(1.0, 2.0, 10.0));
    assert_eq!(
        d,
        FarmCpu {
            dispatcher: 2.0,
            dispatcher_children: 5.0,
            workers: 40.0,
            worker_processes: 4.0,
            garage: 0.0,
            rabbitmq: 0.0
        }
    );
}

#[test]
fn the_summary_takes_medians_and_marks_the_targets() {
    let good = [
        round(90.0, 100.0, cpu(1.0, 0.5, 95.0), 100.0),
        round(99.0, 100.0, cpu(1.0, 0.5, 98.0), 100.0),
        round(150.0, 100.0, cpu(9.0, 9.0, 200.0), 100.0),
    ];
    let s = Summary::of(&good);
    assert!((s.makespan_ratio - 0.99).abs() < 1e-12);
    assert!((s.cpu_ratio - 1.025).abs() < 1e-12);
    assert!((s.cpu_ratio_without_broker - 1.015).abs() < 1e-12);
    assert_eq!(s.dispatcher_ms, (10.0, 15.0));
    let lines = s.lines(3);
    assert!(lines.iter().all(|l| !l.contains("MISS")), "{lines:#?}");

    let bad = [round(130.0, 100.0, cpu(3.0, 10.0, 120.0), 100.0)];
    let lines = Summary::of(&bad).lines(1);
    assert!(
        lines[0].ends_with("MISS") && lines[1].ends_with("MISS"),
        "{lines:#?}"
    );
    assert!(
        lines[5].ends_with("MISS") && lines[6].ends_with("MISS"),
        "{lines:#?}"
    );
}
