//! `--progress json` prints JSON lines whose frame count climbs to the
//! source's frame count (on stdout or stderr; either is accepted).

use serde_json::Value;
use tessera_tests::{fixture, frame_count, Fixture, Job};

/// The first `frames` number found in `v` (top level first, then nested).
fn frames_field(v: &Value) -> Option<u64> {
    match v {
        Value::Object(map) => map
            .get("frames")
            .and_then(Value::as_u64)
            .or_else(|| map.values().find_map(frames_field)),
        Value::Array(items) => items.iter().find_map(frames_field),
        _ => None,
    }
}

/// `frames` values of the JSON lines in `text`, in order.
fn frame_counts(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(Value::is_object)
        .filter_map(|v| frames_field(&v))
        .collect()
}

#[test]
fn json_progress_counts_all_frames() {
    let src = fixture(Fixture::ClosedGopH264);
    let expected = frame_count(&src);
    let job = Job::new(&src, "out.mp4");
    let run = job.run_ok(1, &["--progress", "json"]);
    let streams = [
        ("stdout", frame_counts(&run.stdout)),
        ("stderr", frame_counts(&run.stderr)),
    ];
    let good = streams.iter().any(|(_, counts)| {
        counts.last() == Some(&expected) && counts.windows(2).all(|w| w[0] <= w[1])
    });
    assert!(
        good,
        "expected JSON progress lines whose \"frames\" never decrease and end at {expected}; \
         got stdout {:?}, stderr {:?}\n{}",
        streams[0].1,
        streams[1].1,
        run.describe()
    );
    assert_eq!(job.report().frames, expected, "report frames");
}
