//! Segment tasks whose worker cuts its own chunk from the job's source (issue 31, "a thin
//! dispatcher").
//!
//! Why: splitting an input into chunks and storing each one was the dispatcher's serial work
//! per segment (a remux child, a PUT per chunk, their bookkeeping): on a batch it cost more
//! dispatcher CPU than everything else it did. With a cut task the dispatcher stores the
//! source once in the work area and publishes every segment at once; each worker fetches the
//! source once per job into a cache on its local disk and cuts the segment's chunk there with
//! the same split operation on the same plan, so the chunk holds the same packets, byte for
//! byte, that the dispatcher's split would have written.
//!
//! Why a queue of its own ([`QUEUE_CUT_CPU`]): a worker of an earlier release reads a cut
//! task as a plain segment task and would look for a chunk that was never stored. On its own
//! queue a cut task waits for a worker that consumes it, and the dispatcher sends cut tasks
//! only while one does (a rolling upgrade mixes releases); otherwise it splits as before.

use serde::{Deserialize, Serialize};

use super::WholeSplit;

/// Queue of segment tasks whose CPU worker cuts the chunk from the job's source.
pub const QUEUE_CUT_CPU: &str = "tessera.cut.cpu";

/// Where a segment's chunk comes from when the worker cuts it: the job's source in the work
/// area and the split's parameters for this one segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentCut {
    /// The input, as the dispatcher fetched it, in the work area ([`super::keys::source`]);
    /// every segment of the job names the same object, which a worker fetches once.
    pub source_key: String,
    /// The split of this one segment (its packet range, the bias, the dts rule; never
    /// derived pts, whose per-packet list would make every task as large as the input's
    /// packet count: such inputs are split by the dispatcher).
    pub split: WholeSplit,
}
