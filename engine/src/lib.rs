//! tessera-engine: a job's stages, from a request to delivered outputs: turns a job into
//! segment tasks and the segments back into an output.
//!
//! Why a crate of its own: the one-process farm (`tessera transcode`) and the dispatcher
//! service run the same job logic over different queue and store implementations; the CLI
//! needs only this, not the service's HTTP server and job database.
//!
//! Layout, a job's stages in order (job.rs runs them; each imports request.rs and the
//! previous stages' output, never job.rs or a later stage):
//! - request.rs: the shared types (`JobRequest`, `DispatchContext`, `JobStage`, `JobReport`,
//!   and `JobPlan`, the request as prepare resolved it for a run).
//! - prepare.rs: probe, plan (planning.rs), resolve, start the audio step (audio_step.rs)
//!   and the publish stage; gives `Prepared`. While the fleet is busy a short input goes
//!   whole instead (whole.rs: the rule, and one task that a worker cuts, encodes and
//!   stitches).
//! - publish.rs: split, chunks stored, segment tasks published (admitted by gate.rs; a
//!   segment that follows its scene's first segment once that one is done, scene_leads.rs).
//! - collect.rs: waits for every segment, or for the whole-input task; gives `Collected`.
//! - finish.rs: stitch, frame check and quality (stitching.rs), the streaming package
//!   (packaging.rs, package_images.rs, package_assemble.rs), delivery; gives `Finished`.
//! - report.rs: the `JobReport` from `Prepared`, `Collected` and `Finished`.
//! - job.rs: `run_job` (the stages in order, the GPU->CPU fallback) and `end_job`.
//! - task_events.rs, patience.rs, cancel.rs, parallel.rs: event reading and task
//!   deadlines, store and record retries, cancellation, bounded transfers.
//! - rollback.rs: a failed delivery's outputs removed again, retried through store
//!   outages, what is left behind named in the job's error; `take_back`, the same for what
//!   a run before a dispatcher restart delivered.
//! - dead_letters.rs: dead-lettered tasks become failure events of their jobs.

mod audio_step;
mod cancel;
mod collect;
mod cut;
pub mod dead_letters;
mod finish;
mod gate;
mod job;
mod package_assemble;
mod package_images;
mod packaging;
mod parallel;
mod patience;
mod planning;
mod prepare;
mod publish;
mod report;
mod request;
mod rollback;
mod scene_leads;
mod stitching;
mod task_events;
mod whole;

pub use audio_step::audio_step_frames;
pub use gate::{GateCounts, PublishGate};
pub use job::{end_job, run_job};
pub use patience::patiently;
pub use request::{
    Destination, DispatchContext, DoneSegment, JobOutput, JobReport, JobRequest, JobStage,
    OutputReport, OutputSink, PackageJob, Resume, RungSearch, StageRecorder,
    DEFAULT_MAX_DECODE_ERROR_SHARE, DEFAULT_TASK_DEADLINE,
};
pub use rollback::take_back;
pub use whole::DEFAULT_WHOLE_MAX_SECONDS;
