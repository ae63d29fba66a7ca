//! Poison messages: what a broken peer, an old or new release, an operator's mistake or an
//! attacker with broker rights may put on tessera's queues, generated from a seed so a run
//! covers shapes nobody listed.
//!
//! Why a generator: "invalid JSON" is not one message. Truncations, wrong types, a task of a
//! job that does not exist, an impossible job id, a body far over any real message: each
//! breaks a different line of the consumer.

use serde_json::{json, Value};

/// One poison message and what the farm must do with it.
#[derive(Debug, Clone)]
pub struct Poison {
    /// A short name for reports.
    pub name: String,
    /// The body.
    pub body: Vec<u8>,
    /// Whether it names a job the dead-letter forwarder can find (`job_id` and a task):
    /// such a dead letter fails its job; the others are logged and dropped.
    pub names_job: bool,
}

/// A splitmix64 step: small, seedable, no dependency.
pub fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `n` random bytes.
pub fn noise(state: &mut u64, n: usize) -> Vec<u8> {
    (0..n).map(|_| next(state) as u8).collect()
}

/// Messages that name no job, for any queue: random bytes, truncated or mistyped JSON,
/// JSON of another shape, impossible job ids, an empty body, and a body over the farm's
/// message limit (`huge` bytes).
pub fn jobless(seed: u64, huge: usize) -> Vec<Poison> {
    let mut s = seed;
    let forged = |id: &str| json!({"v": 1, "job_id": id, "segment": 0, "chunk_key": "x"});
    let mut truncated = forged("0123abcd").to_string().into_bytes();
    let cut = 5 + (next(&mut s) as usize) % (truncated.len() - 6);
    truncated.truncate(cut);
    let len = 1 + (next(&mut s) % 512) as usize;
    let mut out = vec![
        ("random bytes", noise(&mut s, len)),
        ("empty", Vec::new()),
        ("truncated json", truncated),
        ("json array", b"[1,2,3]".to_vec()),
        ("json string", b"\"segment\"".to_vec()),
        (
            "job_id a number",
            br#"{"v":1,"job_id":7,"segment":0}"#.to_vec(),
        ),
        ("no task", br#"{"v":1,"job_id":"0123abcd"}"#.to_vec()),
        (
            "path job id",
            forged("../../../tmp/x").to_string().into_bytes(),
        ),
        (
            "control job id",
            forged("a\u{0}\nb").to_string().into_bytes(),
        ),
        (
            "long job id",
            forged(&"f".repeat(300)).to_string().into_bytes(),
        ),
    ];
    let mut big = b"{\"v\":1,\"pad\":\"".to_vec();
    big.extend(vec![b'x'; huge]);
    big.extend(b"\"}");
    out.push(("huge, no job", big));
    out.into_iter()
        .map(|(name, body)| Poison {
            name: name.to_string(),
            body,
            names_job: false,
        })
        .collect()
}

/// A message naming `job`: `head` (version and any extra fields) with the job, its plan and
/// `task`'s fields.
fn naming(name: &str, job: &str, plan: u64, mut head: Value, task: Value) -> Poison {
    if let Some(b) = head.as_object_mut() {
        b.insert("job_id".into(), json!(job));
        b.insert("plan".into(), json!(plan));
        b.extend(task.as_object().cloned().unwrap_or_default());
    }
    Poison {
        name: name.into(),
        body: head.to_string().into_bytes(),
        names_job: true,
    }
}

/// A task of `job` (plan `plan`) from a release that speaks wire version 99.
pub fn newer_version(job: &str, plan: u64, task: Value) -> Poison {
    naming("wire version 99", job, plan, json!({"v": 99}), task)
}

/// A task of `job` (plan `plan`) padded past the message limit with a field no release
/// reads.
pub fn oversized(job: &str, plan: u64, task: Value, huge: usize) -> Poison {
    let head = json!({"v": 1, "pad": "x".repeat(huge)});
    naming("oversized", job, plan, head, task)
}

/// S3 event notifications with odd keys, each with the outcome the watch must reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum S3Outcome {
    /// The message is dead-lettered (it cannot be read as an S3 event).
    DeadLettered,
    /// Acked with no job (an object no watch covers, a removal, a test event).
    Ignored,
    /// A job that fails with a reason naming the input.
    FailedJob,
    /// A job that transcodes the object.
    Done,
}

/// A notification (AWS `Records` layout) for `key` (URL-encoded here as S3 does) in
/// `bucket`, with event name `name`.
pub fn s3_event(bucket: &str, key: &str, name: &str, etag: &str, size: u64) -> Vec<u8> {
    s3_event_raw(bucket, &s3_encode(key), name, etag, size)
}

/// [`s3_event`] with the key exactly as given (already encoded, or broken on purpose).
pub fn s3_event_raw(bucket: &str, raw_key: &str, name: &str, etag: &str, size: u64) -> Vec<u8> {
    json!({"Records": [{
        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
        "eventTime": "2026-12-02T10:00:00.000Z", "eventName": name,
        "s3": {"s3SchemaVersion": "1.0", "configurationId": "tessera",
               "bucket": {"name": bucket, "arn": format!("arn:aws:s3:::{bucket}")},
               "object": {"key": raw_key, "size": size, "eTag": etag, "sequencer": "0A1B2C3D4E5F"}}
    }]})
    .to_string()
    .into_bytes()
}

/// URL-encodes a key as S3 event notifications do (space as `+`).
pub fn s3_encode(key: &str) -> String {
    key.bytes()
        .map(|b| match b {
            b' ' => "+".to_string(),
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
