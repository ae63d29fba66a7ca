//! Messages on the wire: JSON bytes with a version, and the lenient reading of a message's
//! job and task that dead letters need.

use serde::{Deserialize, Serialize};

use super::keys::Area;
use super::{SegmentTask, StitchTask, TaskEvent, TaskRef, WIRE_VERSION};

/// A message that cannot be read: not JSON of the expected shape, another wire version, an
/// invalid job id or too large. Why its own type: the model has no farm error; the farm
/// turns it into its `BadMessage` code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadMessage(pub String);

impl std::fmt::Display for BadMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad message: {}", self.0)
    }
}

impl std::error::Error for BadMessage {}

/// The job, plan and task a message is about, read leniently: any version, any other fields
/// (a message without a plan has plan 0).
///
/// Why: a task that ends in a dead-letter queue (its deliveries ran out, or a worker could
/// not read it) must still fail its job with a reason, even when it is from another wire
/// version; this is all the dispatcher needs to find the job. Reads segment tasks
/// (`segment`), stitch tasks (`output`) and events (`task`).
pub fn task_identity(body: &[u8]) -> Option<(String, u64, TaskRef)> {
    #[derive(Deserialize)]
    struct Head {
        job_id: String,
        #[serde(default)]
        plan: u64,
        #[serde(default)]
        task: Option<TaskRef>,
        #[serde(default)]
        segment: Option<u32>,
        #[serde(default)]
        output: Option<u32>,
        #[serde(default)]
        stitch_tasks: Option<serde::de::IgnoredAny>,
    }
    let head: Head = serde_json::from_slice(body).ok()?;
    if !valid_job_id(&head.job_id) {
        return None;
    }
    let task = head
        .task
        .or(head.segment.map(TaskRef::Segment))
        .or(head.output.map(TaskRef::Stitch))
        .or(head.stitch_tasks.map(|_| TaskRef::Whole))?;
    Some((head.job_id, head.plan, task))
}

/// The wire version of a message written by a newer release than this one, if it is one.
///
/// Why: during a rolling upgrade old and new workers share the queues. A task an old worker
/// cannot read because it is newer is not bad: it goes back for a newer worker instead of to
/// the dead letters (which would fail its job).
pub fn newer_wire_version(body: &[u8]) -> Option<u32> {
    #[derive(Deserialize)]
    struct Version {
        v: u32,
    }
    let version: Version = serde_json::from_slice(body).ok()?;
    (version.v > WIRE_VERSION).then_some(version.v)
}

/// Serialises a message to JSON bytes.
pub fn encode_message<T: Serialize>(msg: &T) -> Vec<u8> {
    serde_json::to_vec(msg).unwrap_or_default()
}

/// The largest message a peer reads. Why: real tasks and events are a few KiB (a stitch task
/// of a 20,000-segment job is about 1 MiB of keys); a larger body is a fault or an attack,
/// and parsing it would hold a worker's memory for nothing.
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// Whether `id` can be a job id: 1 to 64 ASCII letters, digits, `-` or `_`.
///
/// Why: a job id becomes part of store keys and of a worker's staging paths; an id with
/// `/`, `..` or control characters from a forged message must not reach either.
pub fn valid_job_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Parses a message and checks it: its size, its version, its job id, and that every store
/// key it names lies in the area of its own job's plan that the key's use allows (a forged
/// task cannot make a worker read, overwrite or delete another job's objects, the end
/// markers, or its own job's output).
pub fn decode_message<T: for<'de> Deserialize<'de> + Versioned>(
    body: &[u8],
) -> Result<T, BadMessage> {
    if body.len() > MAX_MESSAGE_BYTES {
        return Err(BadMessage(format!(
            "{} bytes, over the {MAX_MESSAGE_BYTES}-byte limit of a message",
            body.len()
        )));
    }
    let msg: T = serde_json::from_slice(body).map_err(|e| BadMessage(e.to_string()))?;
    if msg.version() != WIRE_VERSION {
        return Err(BadMessage(format!(
            "wire version {} not supported (this build speaks {WIRE_VERSION})",
            msg.version()
        )));
    }
    let job = msg.job_id();
    if !valid_job_id(job) {
        let shown: String = job.chars().take(80).collect();
        return Err(BadMessage(format!(
            "job id '{}' is not 1-64 letters, digits, '-' or '_'",
            shown.escape_debug()
        )));
    }
    let plan = msg.plan();
    if let Some((area, key)) = msg
        .keys()
        .into_iter()
        .find(|(area, key)| !area.holds(key, job, plan))
    {
        return Err(BadMessage(format!(
            "{} key '{}' lies outside job {job}'s area {} of plan {plan:016x}",
            area.what(),
            key.escape_debug(),
            area.prefix(job, plan)
        )));
    }
    Ok(msg)
}

/// A message that carries a wire version.
pub trait Versioned {
    /// The message's version.
    fn version(&self) -> u32;
    /// The job the message is about.
    fn job_id(&self) -> &str;
    /// The plan the message's keys belong to.
    fn plan(&self) -> u64;
    /// Every store key the message names, each with the area of its job's plan it must lie
    /// in. Why every one: a worker reads, writes or deletes each of them.
    fn keys(&self) -> Vec<(Area, &str)> {
        Vec::new()
    }
}

impl Versioned for SegmentTask {
    fn version(&self) -> u32 {
        self.v
    }
    fn job_id(&self) -> &str {
        &self.job_id
    }
    fn plan(&self) -> u64 {
        self.plan
    }
    fn keys(&self) -> Vec<(Area, &str)> {
        let renditions = self
            .renditions
            .iter()
            .map(|(_, key)| (Area::Encoded, &key[..]));
        let stills = self.stills.iter().flat_map(|s| &s.images);
        let source = self.cut.iter().map(|c| (Area::Source, &c.source_key[..]));
        std::iter::once((Area::Chunks, &self.chunk_key[..]))
            .chain(source)
            .chain(renditions)
            .chain(stills.map(|(_, key)| (Area::Stills, &key[..])))
            .collect()
    }
}

impl Versioned for TaskEvent {
    fn version(&self) -> u32 {
        self.v
    }
    fn job_id(&self) -> &str {
        &self.job_id
    }
    fn plan(&self) -> u64 {
        self.plan
    }
}

impl Versioned for StitchTask {
    fn version(&self) -> u32 {
        self.v
    }
    fn job_id(&self) -> &str {
        &self.job_id
    }
    fn plan(&self) -> u64 {
        self.plan
    }
    fn keys(&self) -> Vec<(Area, &str)> {
        let segments = self
            .segment_keys
            .iter()
            .map(|key| (Area::Encoded, &key[..]));
        segments
            .chain(self.audio_key.as_deref().map(|key| (Area::Audio, key)))
            .chain(std::iter::once((Area::Output, &self.result_key[..])))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message of the smallest shape the checks read.
    #[derive(Deserialize)]
    struct Probe {
        v: u32,
        job_id: String,
        plan: u64,
        keys: Vec<String>,
    }

    impl Versioned for Probe {
        fn version(&self) -> u32 {
            self.v
        }
        fn job_id(&self) -> &str {
            &self.job_id
        }
        fn plan(&self) -> u64 {
            self.plan
        }
        fn keys(&self) -> Vec<(Area, &str)> {
            self.keys
                .iter()
                .map(|key| (Area::Chunks, &key[..]))
                .collect()
        }
    }

    fn probe(job: &str, keys: &[&str]) -> Result<Probe, BadMessage> {
        let body = serde_json::json!({"v": WIRE_VERSION, "job_id": job, "plan": 1, "keys": keys});
        decode_message::<Probe>(body.to_string().as_bytes())
    }

    #[test]
    fn forged_messages_are_refused_with_the_reason() {
        let good = "jobs/abc/0000000000000001/chunks/000000.nut";
        assert!(probe("abc", &[good]).is_ok());
        for (job, key, why) in [
            ("../etc", good, "job id"),
            ("", good, "job id"),
            ("a/b", good, "job id"),
            ("tab\there", good, "job id"),
            (&"x".repeat(65), good, "job id"),
            (
                "abc",
                "jobs/other/0000000000000001/chunks/000000.nut",
                "outside",
            ),
            ("abc", "jobs/abc/../other/x", "outside"),
            ("abc", "jobs/abc//x", "outside"),
            ("abc", "ended/abc", "outside"),
        ] {
            let err = probe(job, &[key]).err().expect(job).to_string();
            assert!(err.contains(why), "{job} {key}: {err}");
        }
        let huge = vec![b' '; MAX_MESSAGE_BYTES + 1];
        let err = decode_message::<Probe>(&huge).err().unwrap().to_string();
        assert!(err.contains("over the"), "{err}");
    }

    #[test]
    fn dead_letters_with_an_impossible_job_id_name_no_job() {
        let forged = br#"{"v":1,"job_id":"../../x","segment":0}"#;
        assert_eq!(task_identity(forged), None);
        let fine = br#"{"v":1,"job_id":"0f3a_b-9","segment":0}"#;
        assert!(task_identity(fine).is_some());
    }

    /// A valid event body of `job` for segment `segment`.
    fn event_body(job: &str, segment: u32, message: &str) -> Vec<u8> {
        let ev = TaskEvent {
            v: WIRE_VERSION,
            job_id: job.into(),
            plan: 3,
            task: TaskRef::Segment(segment),
            worker: "w".into(),
            outcome: super::super::SegmentOutcome::Failed {
                code: "input_invalid".into(),
                class: crate::error_code::ErrorClass::Abort,
                message: message.into(),
            },
        };
        encode_message(&ev)
    }

    proptest::proptest! {
        /// Fuzz target (the chaos script runs it with more cases): any bytes, and valid
        /// messages cut short or with bytes changed, decode to a checked message or an
        /// error, never a panic; what decodes has a possible job id.
        #[test]
        fn fuzz_wire_decoding(
            noise in proptest::collection::vec(proptest::num::u8::ANY, 0..600),
            job in "[a-z0-9]{1,70}|[ -~]{0,20}",
            message in "\\PC{0,40}",
            segment in proptest::num::u32::ANY,
            cut in proptest::num::usize::ANY,
            flips in proptest::collection::vec((proptest::num::usize::ANY, proptest::num::u8::ANY), 0..4),
        ) {
            for body in [noise.clone(), event_body(&job, segment, &message)] {
                let mut mutated = body.clone();
                for (at, byte) in &flips {
                    if !mutated.is_empty() {
                        let i = at % mutated.len();
                        mutated[i] = *byte;
                    }
                }
                let short = &body[..cut % (body.len() + 1)];
                for b in [&body[..], &mutated[..], short] {
                    if let Ok(ev) = decode_message::<TaskEvent>(b) {
                        proptest::prop_assert!(valid_job_id(&ev.job_id));
                    }
                    let _ = decode_message::<SegmentTask>(b);
                    let _ = decode_message::<StitchTask>(b);
                    if let Some((id, _, _)) = task_identity(b) {
                        proptest::prop_assert!(valid_job_id(&id));
                    }
                }
            }
            let whole = decode_message::<TaskEvent>(&event_body(&job, segment, &message));
            proptest::prop_assert_eq!(whole.is_ok(), valid_job_id(&job));
        }
    }

    #[test]
    fn only_newer_versions_are_newer() {
        let newer = format!(
            r#"{{"v":{},"job_id":"j1","segment":0,"x":[1]}}"#,
            WIRE_VERSION + 1
        );
        assert_eq!(newer_wire_version(newer.as_bytes()), Some(WIRE_VERSION + 1));
        let same = format!(r#"{{"v":{WIRE_VERSION},"job_id":"j1"}}"#);
        assert_eq!(newer_wire_version(same.as_bytes()), None);
        assert_eq!(newer_wire_version(br#"{"v":0,"job_id":"j1"}"#), None);
        assert_eq!(newer_wire_version(b"not json"), None);
        assert_eq!(newer_wire_version(br#"{"job_id":"j1"}"#), None);
    }
}
