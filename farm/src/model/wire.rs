//! Messages on the wire: JSON bytes with a version, and the lenient reading of a message's
//! job and task that dead letters need.

use serde::{Deserialize, Serialize};

use super::{SegmentTask, StitchTask, TaskEvent, TaskRef, WIRE_VERSION};
use crate::FarmError;

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
    }
    let head: Head = serde_json::from_slice(body).ok()?;
    let task = head
        .task
        .or(head.segment.map(TaskRef::Segment))
        .or(head.output.map(TaskRef::Stitch))?;
    Some((head.job_id, head.plan, task))
}

/// Serialises a message to JSON bytes.
pub fn encode_message<T: Serialize>(msg: &T) -> Vec<u8> {
    serde_json::to_vec(msg).unwrap_or_default()
}

/// Parses a message and checks its version.
pub fn decode_message<T: for<'de> Deserialize<'de> + Versioned>(
    body: &[u8],
) -> Result<T, FarmError> {
    let msg: T = serde_json::from_slice(body).map_err(|e| FarmError::BadMessage(e.to_string()))?;
    if msg.version() != WIRE_VERSION {
        return Err(FarmError::BadMessage(format!(
            "wire version {} not supported (this build speaks {WIRE_VERSION})",
            msg.version()
        )));
    }
    Ok(msg)
}

/// A message that carries a wire version.
pub trait Versioned {
    /// The message's version.
    fn version(&self) -> u32;
}

impl Versioned for SegmentTask {
    fn version(&self) -> u32 {
        self.v
    }
}

impl Versioned for TaskEvent {
    fn version(&self) -> u32 {
        self.v
    }
}

impl Versioned for StitchTask {
    fn version(&self) -> u32 {
        self.v
    }
}
