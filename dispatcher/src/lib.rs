//! tessera-dispatcher: turns a job into segment tasks and the segments back into an output.
//!
//! Why a library: the one-process farm (`tessera transcode`) and the dispatcher service run
//! the same job logic over different queue and store implementations.

mod finish;
mod gate;
mod job;
mod patience;
mod prepare;
pub mod service;
mod stitching;

pub use gate::{GateCounts, PublishGate};
pub use job::{
    run_job, Destination, DispatchContext, JobOutput, JobReport, JobRequest, JobStage,
    OutputReport, OutputSink, Resume,
};
