//! The versioned wire messages between dispatcher and workers: segment and stitch tasks,
//! their outcomes and events, the queue names, and the store keys of a job's work area.
//!
//! Why versioned: workers and dispatchers of different releases share queues during a rolling
//! upgrade; a message states its version and a reader refuses what it does not understand.

use crate::audio::AudioTrackResult;
use crate::encode::{Container, RenditionSpec, SegmentSource};
use crate::error_code::{ErrorClass, ErrorCode};
use crate::probe::Rational;
use serde::{Deserialize, Serialize};

/// The wire version of the messages in this module.
pub const WIRE_VERSION: u32 = 1;

/// Queue of segment encode tasks for CPU workers.
pub const QUEUE_ENCODE_CPU: &str = "tessera.encode.cpu";
/// Queue of segment encode tasks that must run on NVENC (GPU workers).
pub const QUEUE_ENCODE_GPU: &str = "tessera.encode.gpu";
/// Queue of stitch tasks (one per output of a job whose segments are all encoded). Separate
/// from the encode queues so a stitch never waits behind hours of segments.
pub const QUEUE_STITCH: &str = "tessera.stitch";
/// Queue of worker events (task done / failed) for the dispatcher.
pub const QUEUE_EVENTS: &str = "tessera.events";

/// The encode parameters of a segment, as planned by the dispatcher: the stretch of the
/// source the worker hands its media child unchanged, and what the worker checks of the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentEncode {
    /// The stretch of the source to encode (flattened: the message's JSON keeps its fields
    /// at this level, as before the type existed).
    #[serde(flatten)]
    pub source: SegmentSource,
    /// Frames expected in the range (for progress and checks).
    pub expected_frames: u64,
    /// Pts of the first and last frame shown in the range (source time base): the worker's
    /// QC gate checks every encoded rendition against them before reporting the segment done.
    /// `None` from an older dispatcher: only the frame count is checked.
    #[serde(default)]
    pub expected_pts: Option<(i64, i64)>,
    /// Source codec name (FFmpeg's, e.g. "h264"): GPU workers pick NVDEC or software decode.
    #[serde(default)]
    pub source_codec: String,
    /// Source pixel format name (e.g. "yuv420p10le").
    #[serde(default)]
    pub source_pix_fmt: String,
}

/// Where a job's segments may be encoded.
///
/// Why per job, not per segment: NVENC and the software encoders write different parameter
/// sets, and a stitched rendition must come from one encoder; so a job's segments all go to
/// the GPU queue or all to the CPU queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Hardware {
    /// NVENC only: the GPU queue (waits for GPU workers, e.g. scaled up from zero).
    Gpu,
    /// Software encoders only: the CPU queue.
    Cpu,
    /// The GPU queue when GPU workers are consuming it, else the CPU queue.
    #[default]
    Any,
}

/// One segment to encode: a queue message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentTask {
    /// Wire version.
    pub v: u32,
    /// The job.
    pub job_id: String,
    /// The fingerprint of the plan this segment belongs to (its keys hang off it too): a
    /// task of an earlier plan of the job (a dispatcher restarted with other settings) is
    /// told apart by it.
    #[serde(default)]
    pub plan: u64,
    /// Segment index.
    pub segment: u32,
    /// Where the chunk is in the store.
    pub chunk_key: String,
    /// What to encode.
    pub encode: SegmentEncode,
    /// Renditions, with the store key of each encoded result.
    pub renditions: Vec<(RenditionSpec, String)>,
    /// Still images of frames in the range (a package's poster, thumbnails and sprite
    /// tiles), made from the encode's own decode; empty for most jobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stills: Vec<StillTask>,
    /// How many segments the job has (0 from a dispatcher before this field): a one-process
    /// farm lends its idle cores to a job of fewer segments than it has workers.
    #[serde(default)]
    pub segments: u32,
    /// Set when the worker cuts the chunk from the job's source itself (cut.rs; only on
    /// [`QUEUE_CUT_CPU`]): `chunk_key` then names no stored object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<SegmentCut>,
}

/// The images of one frame a segment task makes, with the store key of each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StillTask {
    /// Source pts of the frame (unbiased, like `SegmentSource::keyframes`).
    pub pts: i64,
    /// Each image and its key in the work area.
    pub images: Vec<(crate::images::StillImage, String)>,
}

/// How a segment attempt ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SegmentOutcome {
    /// Encoded and uploaded.
    Done {
        /// Frames encoded (per rendition they are equal).
        frames: u64,
        /// Bytes uploaded over all renditions.
        bytes: u64,
        /// Seconds spent decoding and encoding in the child.
        media_seconds: f64,
        /// Seconds the worker spent on the task outside the child's media work.
        overhead_seconds: f64,
        /// Peak RSS of the child process.
        peak_rss_bytes: u64,
        /// Source packets rejected and frames flagged damaged by the decoder in the segment's
        /// range: the dispatcher sums them against the job's `source_corrupt` limit.
        #[serde(default)]
        decode_errors: u64,
        /// Seconds of the child's media work that the QC gate took (stitches; 0 for
        /// segments): the dispatcher reports them as the job's `qc_s`.
        #[serde(default)]
        check_seconds: f64,
        /// The ETag of each output stored, in output order (a stitch: its one output; a
        /// whole-input task: every output), `None` where the store has none; empty for
        /// segments and from older workers. The dispatcher delivers exactly these objects:
        /// a later writer of the same key (a duplicate stitch) is refused (review N6).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        etags: Vec<Option<String>>,
        /// The key each output was stored under, in the order of `etags` (see
        /// [`StitchTask::attempt_keys`]); empty from older workers: at `result_key`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        keys: Vec<Option<String>>,
        /// Which delivery of the task this was (1: its first); 0 from older workers. Why:
        /// the dashboard's segment timeline shows a task that needed more than one try.
        #[serde(default)]
        attempt: u32,
        /// The GPU card (its NVML index) that encoded the segment; `None`: software.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        card: Option<u32>,
        /// Per rendition of a segment, in output order: how a target-quality rendition found
        /// its rate factor (`None` for the others); empty without targets and from older
        /// workers.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        targets: Vec<Option<crate::encode::TargetResult>>,
    },
    /// A stitch a worker has taken and is running. Why: a stitch may outlast the broker's
    /// consumer timeout (30 min by default; a 2-hour 60 fps output may take longer), so the
    /// worker acks its delivery when it begins and sends this when it starts and every
    /// [`STITCH_HEARTBEAT_SECONDS`] after; the dispatcher republishes a taken stitch whose
    /// heartbeats stop for [`STITCH_LAPSE_SECONDS`] (its worker died), instead of the broker
    /// redelivering it.
    Running,
    /// Failed for good (input error or delivery limit reached).
    Failed {
        /// Stable error code (a newer peer's unknown code is kept as sent).
        code: ErrorCode,
        /// Retry or abort.
        class: ErrorClass,
        /// The reason, naming the input.
        message: String,
    },
}

/// Seconds between a running stitch's [`SegmentOutcome::Running`] events.
pub const STITCH_HEARTBEAT_SECONDS: u64 = 30;

/// Seconds without a [`SegmentOutcome::Running`] event after which the dispatcher takes a
/// stitch's worker for dead and republishes the stitch: four heartbeats missed.
pub const STITCH_LAPSE_SECONDS: u64 = 4 * STITCH_HEARTBEAT_SECONDS;

/// Which task of a job an event is about: `{"segment": 3}` or `{"stitch": 0}` (output index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskRef {
    /// A segment encode.
    Segment(u32),
    /// The stitch of one output.
    Stitch(u32),
    /// A whole-input task (every output of a short input, `whole.rs`).
    Whole,
}

impl std::fmt::Display for TaskRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskRef::Segment(i) => write!(f, "segment {i}"),
            TaskRef::Stitch(i) => write!(f, "stitch of output {i}"),
            TaskRef::Whole => write!(f, "whole-input task"),
        }
    }
}

/// A worker's report about one task: a queue message to the dispatcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskEvent {
    /// Wire version.
    pub v: u32,
    /// The job.
    pub job_id: String,
    /// The plan (fingerprint) of the task this event is about, as the task carried it: a
    /// dispatcher drops events of another plan than its job's, and events without one (0).
    #[serde(default)]
    pub plan: u64,
    /// Which task.
    pub task: TaskRef,
    /// Which worker.
    pub worker: String,
    /// How it went.
    #[serde(flatten)]
    pub outcome: SegmentOutcome,
}

/// One output to stitch: the encoded segments of a rendition plus the audio, concatenated by
/// stream copy into the final container, stored in the work area for the dispatcher to deliver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StitchTask {
    /// Wire version.
    pub v: u32,
    /// The job.
    pub job_id: String,
    /// The fingerprint of the plan whose segments this stitches.
    #[serde(default)]
    pub plan: u64,
    /// Index of the output in the job.
    pub output: u32,
    /// Store keys of the encoded segments, in order.
    pub segment_keys: Vec<String>,
    /// Store key of the transcoded audio, if the output has audio.
    pub audio_key: Option<String>,
    /// The audio file's tracks (bias, padding, language).
    pub audio_tracks: Vec<AudioTrackResult>,
    /// The job's timestamp bias (source video time base).
    pub video_bias: i64,
    /// The source video time base.
    pub video_time_base: Rational,
    /// Seconds of the source's first shown timestamp (the output's zero).
    pub start_seconds: f64,
    /// The source's display matrix (rotation), kept.
    pub display_matrix: Option<Vec<u8>>,
    /// The source frame rate.
    pub frame_rate: Rational,
    /// The output container.
    pub container: Container,
    /// Where the stitched file goes in the work area.
    pub result_key: String,
    /// Frames the segments reported: the stitch must write exactly these.
    pub expected_frames: u64,
    /// The source's chapters and title, kept in the output.
    #[serde(default)]
    pub chapters: Vec<crate::probe::Chapter>,
    /// See `chapters`.
    #[serde(default)]
    pub title: Option<String>,
    /// The source's text subtitle tracks, kept in the output.
    #[serde(default)]
    pub subtitles: Vec<crate::subtitles::SubtitleTrack>,
    /// The QC gate's expectations of the stitched file (decoded end to end before it is
    /// stored); `None` from an older dispatcher: only the frame count is checked.
    #[serde(default)]
    pub expect: Option<crate::stitch::OutputExpectation>,
    /// The dispatcher hears a stitch by [`SegmentOutcome::Running`] heartbeats, so the worker
    /// acks the delivery when the stitch begins. `false` from a dispatcher that predates them
    /// (before issue 29's M1): it cannot read a `running` event, dead-letters it and fails the
    /// job `task_lost`, so the worker holds the delivery to the end and sends no heartbeat,
    /// as workers did then. Why a field and not the wire version: the task's other fields are
    /// unchanged, and an older worker reads the task as before (it ignores the field).
    #[serde(default)]
    pub heartbeats: bool,
    /// The dispatcher delivers the key a stitch reports (`Done::keys`), so each attempt
    /// stores under its own ([`keys::attempt`]); `false` from an older dispatcher, which looks
    /// at `result_key` only: the worker stores there, as workers did before (chaos C53).
    #[serde(default)]
    pub attempt_keys: bool,
}

mod codec;
mod cut;
#[cfg(test)]
mod key_tests;
/// Store keys of a job's work area, in one place so every component agrees.
pub mod keys;
mod status;
mod whole;
pub use codec::{
    decode_message, encode_message, newer_wire_version, task_identity, valid_job_id, BadMessage,
    Versioned, MAX_MESSAGE_BYTES,
};
pub use cut::{SegmentCut, QUEUE_CUT_CPU};
pub use status::{
    CardStatus, TaskInHand, WorkerStatus, QUEUE_STATUS, STATUS_EVERY_SECONDS,
    STATUS_FORGET_SECONDS, STATUS_QUEUE_MAX, STATUS_SILENT_SECONDS, STATUS_TTL_SECONDS,
};
pub use whole::{WholeAudio, WholeSplit, WholeTask, QUEUE_WHOLE_CPU};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_and_versions_are_checked() {
        let ev = TaskEvent {
            v: WIRE_VERSION,
            job_id: "j".into(),
            plan: 5,
            task: TaskRef::Segment(3),
            worker: "w1".into(),
            outcome: SegmentOutcome::Failed {
                code: "input_invalid".into(),
                class: ErrorClass::Abort,
                message: "bad".into(),
            },
        };
        let body = encode_message(&ev);
        let text = String::from_utf8(body.clone()).unwrap();
        assert!(text.contains("\"outcome\":\"failed\""), "{text}");
        assert!(text.contains("\"task\":{\"segment\":3}"), "{text}");
        assert_eq!(decode_message::<TaskEvent>(&body).unwrap(), ev);
        let future = text.replace("\"v\":1", "\"v\":99");
        assert!(decode_message::<TaskEvent>(future.as_bytes()).is_err());
        assert!(decode_message::<TaskEvent>(b"not json").is_err());
    }

    #[test]
    fn dead_letters_name_their_job_and_task_whatever_their_version() {
        let seg = br#"{"v":7,"job_id":"j1","plan":9,"segment":4,"chunk_key":"x","new":[1]}"#;
        assert_eq!(
            task_identity(seg),
            Some(("j1".into(), 9, TaskRef::Segment(4)))
        );
        let stitch = br#"{"v":1,"job_id":"j2","output":1,"segment_keys":[]}"#;
        assert_eq!(
            task_identity(stitch),
            Some(("j2".into(), 0, TaskRef::Stitch(1)))
        );
        let event = br#"{"v":2,"job_id":"j3","task":{"stitch":0},"outcome":"odd"}"#;
        assert_eq!(
            task_identity(event),
            Some(("j3".into(), 0, TaskRef::Stitch(0)))
        );
        for junk in [
            &b"not json"[..],
            br#"{"job_id":"j"}"#,
            br#"{"segment":1}"#,
            b"[]",
        ] {
            assert_eq!(task_identity(junk), None);
        }
    }

    #[test]
    fn a_segment_encode_keeps_its_flat_json() {
        // The message as dispatchers wrote it before `SegmentSource` existed: flat keys.
        let color = serde_json::to_value(crate::probe::ColorInfo::default()).unwrap();
        let rational = |num: i32, den: i32| serde_json::json!({ "num": num, "den": den });
        let flat = serde_json::json!({
            "start_pts": 100, "end_pts": 200, "time_base": rational(1, 25), "bias": 3,
            "frame_rate": rational(25, 1), "sample_aspect_ratio": rational(1, 1),
            "source_size": [1280, 720], "color": color, "source_bit_depth": 8,
            "expected_frames": 4, "expected_pts": [100, 199], "source_codec": "h264",
            "source_pix_fmt": "yuv420p", "keyframes": [150],
        });
        let read: SegmentEncode = serde_json::from_value(flat.clone()).unwrap();
        assert_eq!(
            (
                read.source.start_pts,
                read.source.bias,
                read.source.keyframes.clone()
            ),
            (100, 3, vec![150])
        );
        assert_eq!(read.source.source_size, Some((1280, 720)));
        assert_eq!(serde_json::to_value(&read).unwrap(), flat);
        // An older peer's message without the later fields still reads.
        let mut old = flat.as_object().unwrap().clone();
        for key in ["source_size", "keyframes", "expected_pts", "source_codec"] {
            old.remove(key);
        }
        let read: SegmentEncode = serde_json::from_value(old.into()).unwrap();
        assert_eq!((read.source.source_size, read.expected_pts), (None, None));
        assert!(read.source.keyframes.is_empty());
    }

    #[test]
    fn keys_are_deterministic() {
        assert_eq!(
            keys::chunk("abc", 0xfe, 7),
            "jobs/abc/00000000000000fe/chunks/000007.nut"
        );
        assert_eq!(
            keys::encoded("abc", 1, "720p", 7),
            "jobs/abc/0000000000000001/encoded/720p/000007.nut"
        );
        // Another plan of the same job: other keys, under the same job prefix.
        assert_ne!(keys::chunk("abc", 1, 7), keys::chunk("abc", 2, 7));
        for key in [keys::audio("abc", 3), keys::output("abc", 3, 0, "mp4")] {
            assert!(key.starts_with(&keys::plan_prefix("abc", 3)), "{key}");
            assert!(key.starts_with(&keys::job_prefix("abc")), "{key}");
        }
    }
}
