//! Fuzz target for job-spec validation (the chaos script runs it with more cases): job
//! bodies built from tricky parts never panic the validator, and every plan it accepts keeps
//! the farm's rules.

use proptest::prelude::*;
use serde_json::{json, Value};
use tessera_model::api::ApiJob;
use tessera_model::encode::RateControl;

use crate::jobspec::{validate, MAX_OUTPUTS};

/// URIs that have broken validators before, or could: traversal, empty parts, other
/// schemes, control characters, non-ASCII, prefixes, odd buckets.
fn uri() -> impl Strategy<Value = String> {
    let tricky = prop::sample::select(vec![
        "s3://input/a.mp4",
        "s3://output/x/y.mkv",
        "s3://output/../input/a.mp4",
        "s3://output//a.mp4",
        "s3://output/a/",
        "s3://output/",
        "s3://Output/a.mp4",
        "s3://work/jobs/a.mp4",
        "s3://private/a.mp4",
        "s3:/output/a.mp4",
        "http://output/a.mp4",
        "s3://output/vidéo 🎬.mp4",
        "s3://output/a\u{0}.mp4",
        "s3://output/a\\b.mp4",
        "s3://ou/a.mp4",
        "",
    ]);
    prop_oneof![
        tricky.prop_map(String::from),
        "s3://(input|output)/[ -~]{0,40}\\.(mp4|mkv|mov)",
        "\\PC{0,60}",
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (-1e12f64..1e12).prop_map(|f| json!(f)),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!("12")),
        Just(Value::Null),
    ]
}

/// `object` with each field that is `Some`.
fn with_fields<const N: usize>(mut object: Value, fields: [(&str, Option<Value>); N]) -> Value {
    if let Some(m) = object.as_object_mut() {
        for (k, v) in fields {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        }
    }
    object
}

fn output() -> impl Strategy<Value = Value> {
    (
        uri(),
        prop::option::of(prop::sample::select(vec!["h264", "hevc", "av1", "vp9", ""])),
        prop::option::of(number()),
        prop::option::of(number()),
        prop::option::of(number()),
        prop::option::of("[a-z0-9]{0,12}"),
        prop::option::of(prop::sample::select(vec!["mp4", "mkv", "avi"])),
    )
        .prop_map(|(dest, codec, crf, bitrate, height, preset, container)| {
            with_fields(
                json!({ "destination": dest }),
                [
                    ("codec", codec.map(|c| json!(c))),
                    ("crf", crf),
                    ("bitrate", bitrate),
                    ("height", height),
                    ("preset", preset.map(|p| json!(p))),
                    ("container", container.map(|c| json!(c))),
                ],
            )
        })
}

fn job() -> impl Strategy<Value = Value> {
    (
        uri(),
        prop::collection::vec(output(), 0..MAX_OUTPUTS + 3),
        prop::option::of(number()),
        prop::option::of(number()),
        prop::option::of("(https?|ftp|file)://[ -~]{0,30}"),
        prop::option::of(prop::sample::select(vec!["gpu", "cpu", "any", "tpu"])),
    )
        .prop_map(|(input, outputs, segment, priority, callback, hardware)| {
            with_fields(
                json!({"input": input, "outputs": outputs}),
                [
                    ("segment_seconds", segment),
                    ("priority", priority),
                    ("callback_url", callback.map(|c| json!(c))),
                    ("hardware", hardware.map(|h| json!(h))),
                ],
            )
        })
}

proptest! {
    #[test]
    fn fuzz_job_spec_validation(body in job()) {
        let buckets = vec!["input".to_string(), "output".to_string()];
        let Ok(api) = serde_json::from_value::<ApiJob>(body.clone()) else {
            return Ok(());
        };
        let Ok(plan) = validate(&api, &buckets, 10.0, &tessera_model::capabilities::HwCapabilities::default()) else {
            return Ok(());
        };
        prop_assert!(buckets.contains(&plan.input.bucket), "{body}");
        prop_assert!((1..=MAX_OUTPUTS).contains(&plan.outputs.len()), "{body}");
        prop_assert!((0.5..=600.0).contains(&plan.segment_seconds), "{body}");
        prop_assert!(plan.priority <= 9, "{body}");
        for (i, o) in plan.outputs.iter().enumerate() {
            prop_assert!(buckets.contains(&o.destination.bucket), "{body}");
            prop_assert!(tessera_farm::store::validate_key(&o.destination.key).is_ok());
            prop_assert!(!o.destination.key.ends_with('/'), "{body}");
            let others = &plan.outputs[..i];
            prop_assert!(others.iter().all(|p| p.destination != o.destination));
            match o.rendition.rate {
                RateControl::Crf(c) => prop_assert!((0.0..=63.0).contains(&c), "{body}"),
                RateControl::Bitrate(b) => prop_assert!(b >= 10_000, "{body}"),
            }
            if let Some(h) = o.rendition.height {
                prop_assert!((2..=16384).contains(&h), "{body}");
            }
        }
    }
}
