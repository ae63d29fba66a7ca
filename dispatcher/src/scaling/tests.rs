//! The scaling signal's unit tests: the pure estimate, the backlog, stitches, throughput.

use super::*;

#[test]
fn desired_workers_drain_the_backlog_in_the_target_time() {
    // 600 s of video, 0.5 s/s per worker, 300 s target: 4 workers.
    assert_eq!(desired_workers(600.0, 60, 0.5, 300.0), 4);
    assert_eq!(desired_workers(601.0, 60, 0.5, 300.0), 5);
    // At least one while anything is left, at most one per segment.
    assert_eq!(desired_workers(1.0, 1, 0.5, 300.0), 1);
    assert_eq!(desired_workers(10_000.0, 3, 0.5, 300.0), 3);
    assert_eq!(desired_workers(0.0, 0, 0.5, 300.0), 0);
}

#[test]
fn the_backlog_counts_planned_segments_until_done_and_learns_throughput() {
    let s = Scaling::new(ScalingSettings {
        target_drain_seconds: 10.0,
        cpu_throughput: 1.0,
        gpu_throughput: 4.0,
        ..ScalingSettings::default()
    });
    s.planned("a", Pool::Cpu, &[10.0, 10.0, 10.0, 5.0], &[0]);
    s.planned("b", Pool::Gpu, &[20.0, 20.0], &[]);
    let cpu = s.figures(Pool::Cpu);
    assert_eq!(cpu.backlog_segments, 3);
    assert_eq!(cpu.backlog_segment_seconds, 25.0);
    assert_eq!(cpu.desired_workers, 3); // 25 s / (1 s/s x 10 s)
    assert_eq!(s.figures(Pool::Gpu).desired_workers, 1); // 40 / (4 x 10)
                                                         // Two segments of 10 s took 5 s each: 2 s/s once 10 s are measured.
    s.segment_done("a", 1, 5.0);
    s.segment_done("a", 2, 5.0);
    s.segment_done("a", 2, 5.0); // a duplicate report counts once
    let cpu = s.figures(Pool::Cpu);
    assert_eq!(cpu.backlog_segments, 1);
    assert_eq!(cpu.worker_throughput, 2.0);
    assert_eq!(cpu.desired_workers, 1);
    s.ended("a");
    assert_eq!(s.figures(Pool::Cpu).desired_workers, 0);
    assert_eq!(s.figures(Pool::Cpu).backlog_segment_seconds, 0.0);
}

#[test]
fn a_job_with_its_segments_done_keeps_a_worker_for_its_stitch() {
    let s = Scaling::new(ScalingSettings::default());
    s.planned("a", Pool::Cpu, &[10.0, 10.0], &[]);
    s.segment_done("a", 0, 5.0);
    s.segment_done("a", 1, 5.0);
    // Every segment done, the stitch outstanding: the pool must not scale to zero under it.
    assert_eq!(s.figures(Pool::Cpu).backlog_segments, 0);
    assert_eq!(s.figures(Pool::Cpu).desired_workers, 1);
    // A dispatcher restarted after a GPU job's segments plans it again with all of them
    // done: its stitch goes to tessera.stitch, which the CPU workers consume.
    s.planned("b", Pool::Gpu, &[10.0], &[0]);
    assert_eq!(s.figures(Pool::Cpu).desired_workers, 2);
    assert_eq!(s.figures(Pool::Gpu).desired_workers, 0);
    // Stitched and delivering (the dispatcher's own work), then ended: no worker needed.
    s.delivering("a");
    assert_eq!(s.figures(Pool::Cpu).desired_workers, 1);
    s.ended("b");
    assert_eq!(s.figures(Pool::Cpu).desired_workers, 0);
    s.ended("a");
    assert_eq!(s.figures(Pool::Cpu).desired_workers, 0);
}

#[test]
fn stitches_count_beside_the_segment_backlog_not_on_top_of_it() {
    let s = Scaling::new(ScalingSettings {
        target_drain_seconds: 10.0,
        cpu_throughput: 1.0,
        gpu_throughput: 4.0,
        ..ScalingSettings::default()
    });
    // 30 s of segments left: 3 workers; a stitch runs beside a worker's segment slots.
    s.planned("a", Pool::Cpu, &[10.0, 10.0, 10.0], &[]);
    s.planned("b", Pool::Cpu, &[10.0], &[0]);
    assert_eq!(s.figures(Pool::Cpu).desired_workers, 3);
}

/// Segments `first..first + n` of `job` done, each after `encode` seconds.
fn measure(s: &Scaling, job: &str, first: u32, n: u32, encode: f64) {
    for segment in first..first + n {
        s.segment_done(job, segment, encode);
    }
}

#[test]
fn a_worker_encodes_its_slots_at_once() {
    // 4-slot workers; 0.5 s/s per slot measured, so 2 s/s per worker.
    let s = Scaling::new(ScalingSettings {
        target_drain_seconds: 10.0,
        cpu_throughput: 2.0,
        gpu_throughput: 4.0,
        cpu_slots: 4,
        ..ScalingSettings::default()
    });
    s.planned("a", Pool::Cpu, &[10.0; 20], &[]);
    measure(&s, "a", 0, 4, 20.0); // 10 s segments in 20 s each
    let cpu = s.figures(Pool::Cpu);
    assert!((cpu.worker_throughput - 2.0).abs() < 1e-9, "{cpu:?}");
    // 160 s left / (2 s/s x 10 s) = 8 workers of 4 slots: the 16 segments at once.
    assert_eq!(cpu.desired_workers, 8, "{cpu:?}");
}

#[test]
fn the_measured_throughput_follows_recent_segments() {
    let s = Scaling::new(ScalingSettings::default());
    s.planned("a", Pool::Cpu, &[10.0; 200], &[]);
    // 1000 s of video at 1 s/s, then 600 s at 0.25 s/s (a slower preset, slower nodes).
    measure(&s, "a", 0, 100, 10.0);
    measure(&s, "a", 100, 60, 40.0);
    // The mean of everything would say 1600 / 3400 = 0.47; recent segments weigh more.
    let now = s.figures(Pool::Cpu).worker_throughput;
    assert!(now > 0.25 && now < 0.35, "{now}");
    measure(&s, "a", 160, 40, 40.0);
    let later = s.figures(Pool::Cpu).worker_throughput;
    assert!(later > 0.25 && later < now, "{later}");
}

#[test]
fn a_job_preparing_its_tasks_keeps_a_worker_until_they_are_published() {
    let s = Scaling::new(ScalingSettings::default());
    // A dispatcher restarted after a job's segments re-reads its input and redoes its audio
    // before it publishes the stitch: the pool must not reach zero meanwhile.
    s.started("a");
    assert_eq!(s.figures(Pool::Cpu).desired_workers, 1);
    assert_eq!(s.figures(Pool::Cpu).backlog_segments, 0);
    // A fresh job probing and splitting: its segments are not published yet either.
    s.started("b");
    assert_eq!(s.figures(Pool::Cpu).desired_workers, 2);
    // Re-planned with every segment done: now it waits for its stitch (still one worker).
    s.planned("a", Pool::Gpu, &[10.0], &[0]);
    assert_eq!(s.figures(Pool::Cpu).desired_workers, 2);
    // The fresh one planned for the GPU pool: its segments count there, not as a stitch.
    s.planned("b", Pool::Gpu, &[10.0, 10.0], &[]);
    assert_eq!(s.figures(Pool::Cpu).desired_workers, 1);
    assert_eq!(s.figures(Pool::Gpu).desired_workers, 1);
    // A later start of a planned job (a run started again) keeps what was planned.
    s.started("b");
    assert_eq!(s.figures(Pool::Gpu).backlog_segments, 2);
    s.ended("a");
    s.ended("b");
    assert_eq!(s.figures(Pool::Cpu).desired_workers, 0);
}

#[test]
fn the_backlog_has_an_age_and_done_video_is_counted() {
    let s = Scaling::new(ScalingSettings::default());
    s.planned("old", Pool::Cpu, &[10.0, 10.0], &[]);
    let later = Instant::now() + std::time::Duration::from_secs(90);
    s.planned("new", Pool::Cpu, &[4.0], &[]);
    let age = s.figures_at(Pool::Cpu, later).oldest_backlog_seconds;
    assert!((90.0..91.0).contains(&age), "the older job's age: {age}");
    assert_eq!(s.figures_at(Pool::Gpu, later).oldest_backlog_seconds, 0.0);
    s.segment_done("old", 0, 2.0);
    s.segment_done("old", 0, 2.0); // a duplicate report counts once
    s.segment_done("old", 1, 2.0);
    // Its segments done, the old job no longer ages the pool (it waits for its stitch).
    let age = s.figures_at(Pool::Cpu, later).oldest_backlog_seconds;
    assert!(age < 90.0, "only the new job is left: {age}");
    assert_eq!(s.encoded_seconds(Pool::Cpu), 20.0);
    let mut text = String::new();
    s.render(&mut text);
    assert!(
        text.contains("tessera_video_seconds_encoded_total{pool=\"cpu\"} 20\n"),
        "{text}"
    );
    assert!(text.contains("# TYPE tessera_video_seconds_encoded_total counter\n"));
    assert!(text.contains("tessera_backlog_segments{pool=\"cpu\"} 1\n"));
    assert!(text.contains("# TYPE tessera_backlog_oldest_seconds gauge\n"));
}
