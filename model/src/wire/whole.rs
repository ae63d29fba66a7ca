//! The whole-input task: a short input cut, encoded, stitched and checked by one worker, for
//! when the fleet is busy (issue 31).
//!
//! Why: a job split into segments pays, per input, a chunk upload and download, an encoded
//! segment upload and download, an audio upload and download and a hop through the stitch
//! queue; per-file encoding pays none of them. When the queue is deeper than the fleet can
//! start, splitting a short input buys no latency (every worker is busy anyway) and only adds
//! that work. One worker then does what the dispatcher and two tasks would have done, with the
//! same media operations on the same plan, so the output is the one the split path makes.
//!
//! Why a queue of its own ([`QUEUE_WHOLE_CPU`]): a worker of an earlier release cannot run
//! it; on its own queue it waits for a worker that consumes it, and the dispatcher sends
//! whole tasks only while one does (a rolling upgrade mixes releases).

use serde::{Deserialize, Serialize};

use super::{SegmentTask, StitchTask};
use crate::probe::SegmentPlan;
use crate::timestamps::{DerivedPts, DtsRule};

/// Queue of whole-input tasks for CPU workers.
pub const QUEUE_WHOLE_CPU: &str = "tessera.whole.cpu";

/// One short input to transcode whole: a queue message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WholeTask {
    /// Wire version.
    pub v: u32,
    /// The job.
    pub job_id: String,
    /// The fingerprint of the one-segment plan (its keys hang off it).
    pub plan: u64,
    /// The input, as the dispatcher fetched it, in the work area
    /// ([`super::keys::source`]).
    pub source_key: String,
    /// How the worker cuts the input into the plan's one chunk.
    pub split: WholeSplit,
    /// The segment encode, as the split path would publish it; its chunk is the worker's
    /// own cut and its renditions stay in the worker's staging (their keys only name them).
    pub encode_task: SegmentTask,
    /// The audio step, when the outputs carry audio.
    pub audio: Option<WholeAudio>,
    /// One stitch per output, as the split path would publish them: each names its
    /// rendition by the encoded segment's key, and its `result_key` is where the checked
    /// output goes.
    pub stitch_tasks: Vec<StitchTask>,
}

/// The cut of the input into one chunk (the split's parameters, from the probe).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WholeSplit {
    /// The one segment.
    pub segment: SegmentPlan,
    /// The job's timestamp bias.
    pub bias: i64,
    /// How to derive dts from pts.
    pub dts_rule: DtsRule,
    /// The probe's pts for a container that stores none.
    #[serde(default)]
    pub derived_pts: Option<DerivedPts>,
}

/// The audio step's parameters (the request, less its files).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WholeAudio {
    /// Container stream indices of the tracks to keep, in output order.
    pub tracks: Vec<usize>,
    /// Seconds added to every timestamp (the job's bias).
    pub bias_seconds: f64,
    /// Tracks that may be stream-copied when already AAC.
    pub copy_tracks: Vec<usize>,
    /// AAC bitrate per channel in bits/s.
    pub bitrate_per_channel: u64,
    /// Mix tracks of more than two channels down to stereo.
    #[serde(default)]
    pub stereo_downmix: bool,
    /// The video's run shifts (see [`crate::audio::AudioRequest::run_shifts_seconds`]).
    #[serde(default)]
    pub run_shifts_seconds: Vec<f64>,
}

impl WholeTask {
    /// Why the task cannot be run as it stands, if it cannot: no output, or a stitch that is
    /// not of the encode's one segment. (Its keys are checked when it is read: every one must
    /// lie in its area of the job's plan, codec.rs.)
    pub fn check(&self) -> Result<(), String> {
        if self.stitch_tasks.is_empty() {
            return Err("it has no output".into());
        }
        let renditions = &self.encode_task.renditions;
        for stitch in &self.stitch_tasks {
            let output = stitch.output;
            let [key] = stitch.segment_keys.as_slice() else {
                return Err(format!(
                    "the stitch of output {output} is not of one segment"
                ));
            };
            if !renditions.iter().any(|(_, k)| k == key) {
                return Err(format!(
                    "the stitch of output {output} names no rendition of the encode"
                ));
            }
        }
        Ok(())
    }
}

impl super::Versioned for WholeTask {
    fn version(&self) -> u32 {
        self.v
    }
    fn job_id(&self) -> &str {
        &self.job_id
    }
    fn plan(&self) -> u64 {
        self.plan
    }
    /// The source, the encode's keys and every stitch's: all in the task's own job and plan
    /// (nested parts naming another job's keys are refused with it).
    fn keys(&self) -> Vec<(super::keys::Area, &str)> {
        let stitches = self.stitch_tasks.iter().flat_map(|s| s.keys());
        std::iter::once((super::keys::Area::Source, &self.source_key[..]))
            .chain(self.encode_task.keys())
            .chain(stitches)
            .collect()
    }
}
