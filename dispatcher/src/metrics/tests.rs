//! Rendering tests of the metrics registry.

use std::collections::HashMap;
use std::path::Path;

use super::*;

/// Sample lines as (series with labels, value).
fn samples(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("sample has a value");
            (series.to_string(), value.to_string())
        })
        .collect()
}

#[test]
fn histogram_buckets_are_cumulative_with_sum_and_count() {
    static BOUNDS: &[f64] = &[0.5, 1.0, 2.5];
    let h = Histogram::new(BOUNDS);
    for v in [0.1, 0.5, 1.0, 2.0, 7.0, f64::NAN] {
        h.observe(v);
    }
    let mut out = String::new();
    h.render(&mut out, "x_seconds");
    assert_eq!(
        out,
        "x_seconds_bucket{le=\"0.5\"} 2\n\
         x_seconds_bucket{le=\"1\"} 3\n\
         x_seconds_bucket{le=\"2.5\"} 4\n\
         x_seconds_bucket{le=\"+Inf\"} 5\n\
         x_seconds_sum 10.6\n\
         x_seconds_count 5\n"
    );
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
    assert_eq!(escape_label("two\nlines"), "two\\nlines");
    let m = Metrics::default();
    m.job_failed("odd\"code\\x\n");
    let text = m.render(&Live::default());
    assert!(
        text.contains("tessera_jobs_failed_total{code=\"odd\\\"code\\\\x\\n\"} 1\n"),
        "{text}"
    );
    // The raw newline never reaches the output: every line is a comment or a sample.
    assert!(text.lines().all(|l| l.starts_with('#') || l.contains(' ')));
}

#[test]
fn special_values_are_written_the_prometheus_way() {
    assert_eq!(fmt_f64(f64::INFINITY), "+Inf");
    assert_eq!(fmt_f64(f64::NEG_INFINITY), "-Inf");
    assert_eq!(fmt_f64(f64::NAN), "NaN");
    assert_eq!(fmt_f64(0.25), "0.25");
    assert_eq!(fmt_f64(3.0), "3");
}

#[test]
fn every_family_has_help_and_type_before_its_samples() {
    let m = Metrics::default();
    m.segment_done(10, 1.5, 0.2);
    m.job_failed("input_invalid");
    let live = Live {
        jobs_by_state: Some(vec![(JobState::Done, 1)]),
        jobs_idle: Some(vec![(JobState::Encoding, 30)]),
        running: 0,
        gate: Some(GateCounts {
            admitted: 1,
            waiting: 0,
            window: 8,
        }),
    };
    let text = m.render(&live);
    let mut help = std::collections::HashSet::new();
    let mut types = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(help.insert(name.to_string()), "HELP twice for {name}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(help.contains(name), "TYPE before HELP for {name}");
            types.insert(name.to_string(), kind.to_string());
        } else {
            let name = line.split(['{', ' ']).next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    let f = name.strip_suffix(s)?;
                    (types.get(f).map(String::as_str) == Some("histogram")).then_some(f)
                })
                .unwrap_or(name);
            assert!(types.contains_key(family), "no TYPE for {name}");
            assert!(family.starts_with("tessera_"), "{family}");
            if types[family] == "counter" {
                assert!(family.ends_with("_total"), "{family}");
            }
        }
    }
    assert_eq!(help.len(), types.len());
    let s = samples(&text);
    assert_eq!(s["tessera_segments_done_total"], "1");
    assert_eq!(s["tessera_frames_encoded_total"], "10");
    assert_eq!(s["tessera_segment_media_seconds_count"], "1");
    assert_eq!(
        s["tessera_segment_overhead_seconds_bucket{le=\"0.25\"}"],
        "1"
    );
    assert_eq!(
        s["tessera_segment_overhead_seconds_bucket{le=\"0.1\"}"],
        "0"
    );
    assert_eq!(s["tessera_jobs_finished_total{outcome=\"failed\"}"], "1");
    assert_eq!(s["tessera_jobs_finished_total{outcome=\"done\"}"], "0");
    assert_eq!(s["tessera_jobs_failed_total{code=\"input_invalid\"}"], "1");
    assert_eq!(s["tessera_jobs{state=\"done\"}"], "1");
    assert_eq!(s["tessera_gate_window_segments"], "8");
    assert_eq!(s["tessera_gate_admitted_segments"], "1");
    assert_eq!(s["tessera_webhook_deliveries_total{result=\"ok\"}"], "0");
    let build = format!(
        "tessera_build_info{{version=\"{}\"}}",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(s[&build], "1");
}

#[test]
fn done_jobs_and_webhooks_are_counted() {
    let m = Metrics::default();
    let report = JobReport {
        job_id: "j".into(),
        outputs: Vec::new(),
        frames: 250,
        source_frames: 250,
        segments: 3,
        segment_frames: vec![100, 100, 50],
        audio_tracks: 1,
        bytes: 12_345,
        wall_s: 42.0,
        encode_fps: 5.95,
        peak_child_rss_bytes: 0,
        peak_segment_rss_bytes: 0,
        median_segment_overhead_s: 0.1,
        quality: None,
        decode_errors: 0,
        warnings: Vec::new(),
        prepare_s: 0.2,
        finish_s: 0.3,
        qc_s: 0.2,
        title: None,
        video_s: 4.0,
        fixed_overhead_s: 0.5,
    };
    m.job_done(&report);
    m.job_cancelled();
    m.webhook(true);
    m.webhook(false);
    m.webhook(true);
    let s = samples(&m.render(&Live::default()));
    assert_eq!(s["tessera_jobs_finished_total{outcome=\"done\"}"], "1");
    assert_eq!(s["tessera_jobs_finished_total{outcome=\"cancelled\"}"], "1");
    assert_eq!(s["tessera_job_wall_seconds_bucket{le=\"30\"}"], "0");
    assert_eq!(s["tessera_job_wall_seconds_bucket{le=\"60\"}"], "1");
    assert_eq!(s["tessera_job_wall_seconds_sum"], "42");
    assert_eq!(s["tessera_last_job_encode_fps"], "5.95");
    assert_eq!(s["tessera_output_bytes_total"], "12345");
    assert_eq!(s["tessera_webhook_deliveries_total{result=\"ok\"}"], "2");
    assert_eq!(
        s["tessera_webhook_deliveries_total{result=\"failed\"}"],
        "1"
    );
    // Without a database answer or a gate, those series are left out, not reported as 0.
    assert!(!s.keys().any(|k| k.starts_with("tessera_jobs{")));
    assert!(!s.keys().any(|k| k.starts_with("tessera_gate_")));
}

#[test]
fn unbounded_label_values_fold_into_other() {
    let c = LabelledCounter::new("code", &[]);
    for i in 0..MAX_SERIES + 10 {
        c.inc(&format!("code{i}"));
    }
    c.inc("code0");
    assert_eq!(c.get("code0"), 2);
    assert_eq!(c.get("other"), 10);
    assert_eq!(c.values.lock().unwrap().len(), MAX_SERIES + 1);
}

#[test]
fn jobs_are_counted_by_state_in_the_database() {
    let db = Db::open(Path::new(":memory:")).unwrap();
    let request = serde_json::json!({});
    for id in ["a", "b", "c"] {
        db.insert(id, "t", None, &request).unwrap();
    }
    db.set_state("b", JobState::Encoding).unwrap();
    db.fail("c", JobState::Failed, "input_invalid", "bad")
        .unwrap();
    let counts = jobs_by_state(&db).unwrap();
    assert_eq!(counts.len(), 8);
    let get = |s: JobState| counts.iter().find(|(st, _)| *st == s).unwrap().1;
    assert_eq!(get(JobState::Queued), 1);
    assert_eq!(get(JobState::Encoding), 1);
    assert_eq!(get(JobState::Failed), 1);
    assert_eq!(get(JobState::Done), 0);
}
