//! Fuzz target for S3 event parsing (the chaos script runs it with more cases): any bytes,
//! and notifications with any key, bucket and event name, parse to events or an error,
//! never a panic; a key encoded the way S3 encodes it decodes to itself.

use proptest::prelude::*;
use serde_json::json;

use super::s3events::{parse_event, url_decode};

/// Encodes a key as S3 event notifications do (space as `+`, the rest of the reserved and
/// non-ASCII bytes as `%XX`).
fn s3_encode(key: &str) -> String {
    key.bytes()
        .map(|b| match b {
            b' ' => "+".to_string(),
            b if b.is_ascii_alphanumeric() || b"-_./".contains(&b) => (b as char).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

proptest! {
    #[test]
    fn fuzz_s3_event_parsing(
        noise in prop::collection::vec(any::<u8>(), 0..400),
        key in "\\PC{0,80}",
        raw_key in "[ -~]{0,40}",
        bucket in "\\PC{0,20}",
        name in prop::sample::select(vec![
            "ObjectCreated:Put", "s3:ObjectCreated:Copy", "ObjectCreated:CompleteMultipartUpload",
            "ObjectRemoved:Delete", "ObjectCreated:", "", "s3:ObjectCreated:Put:Extra",
        ]),
        size in prop::option::of(any::<u64>()),
        cut in any::<usize>(),
    ) {
        let _ = parse_event(&noise);
        let _ = url_decode(&raw_key);
        let record = |k: &str| json!({"eventName": name, "s3": {
            "bucket": {"name": bucket}, "object": {"key": k, "size": size, "eTag": "\"e\""}}});
        let body = json!({"Records": [record(&s3_encode(&key)), record(&raw_key)]}).to_string();
        let _ = parse_event(&body.as_bytes()[..cut % (body.len() + 1)]);
        let single = json!({"Records": [record(&s3_encode(&key))]}).to_string();
        let events = parse_event(single.as_bytes()).expect("a well-formed notification");
        let created = name.trim_start_matches("s3:").starts_with("ObjectCreated:")
            && !events.is_empty();
        if created {
            prop_assert_eq!(events.len(), 1);
            prop_assert_eq!(&events[0].key, &key);
            prop_assert_eq!(&events[0].bucket, &bucket);
            prop_assert_eq!(events[0].etag.as_deref(), Some("e"));
        } else {
            prop_assert!(events.is_empty() || name.contains("ObjectCreated"));
        }
    }
}
