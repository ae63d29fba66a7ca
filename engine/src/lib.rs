//! tessera-engine: a job's stages, from a request to delivered outputs: turns a job into
//! segment tasks and the segments back into an output.
//!
//! Why a crate of its own: the one-process farm (`tessera transcode`) and the dispatcher
//! service run the same job logic over different queue and store implementations; the CLI
//! needs only this, not the service's HTTP server and job database.
//!
//! Layout, a job's stages in order (job.rs runs them; each imports request.rs and the
//! previous stage's output, never job.rs or a later stage):
//! - request.rs: the shared types (`JobRequest`, `DispatchContext`, `JobStage`, `JobReport`).
//! - prepare.rs: probe, plan (planning.rs), split, publish; gives `Prepared`.
//! - audio_step.rs: the audio transcode prepare starts and the stitch step waits for.
//! - collect.rs: waits for every segment; gives `Collected`.
//! - stitching.rs: stitch tasks, frame check, quality, delivery.
//! - packaging.rs: a streaming package cut from the stitched rungs, its manifests checked,
//!   delivered media first and manifests last.
//! - task_events.rs, patience.rs, gate.rs: event reading and task deadlines, store and
//!   record retries, priority admission.
//! - dead_letters.rs: dead-lettered tasks become failure events of their jobs.

mod audio_step;
mod collect;
pub mod dead_letters;
mod gate;
mod job;
mod package_images;
mod packaging;
mod parallel;
mod patience;
mod planning;
mod prepare;
mod request;
mod stitching;
mod task_events;

pub use audio_step::audio_step_frames;
pub use gate::{GateCounts, PublishGate};
pub use job::{end_job, run_job};
pub use patience::patiently;
pub use request::{
    Destination, DispatchContext, JobOutput, JobReport, JobRequest, JobStage, OutputReport,
    OutputSink, PackageJob, Resume, StageRecorder, DEFAULT_MAX_DECODE_ERROR_SHARE,
    DEFAULT_TASK_DEADLINE,
};
