//! The engine's shared types: what a job asks for, the services it runs over, where it
//! stands, the plan prepare resolves it to, and what it produced.
//!
//! Why a module of its own: every stage (prepare, publish, collect, finish) and the service
//! read these; keeping them apart from `run_job` lets each stage import them without
//! importing the orchestrator, so data flows forward from stage to stage.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tessera_farm::queue::Queue;
use tessera_farm::sandbox::{Limits, Sandbox};
use tessera_farm::store::{Delivered, Store};
use tessera_farm::FarmError;
use tessera_model::encode::{Container, RenditionSpec, TargetResult};
use tessera_model::probe::{ProbeInfo, SegmentPlan};
use tessera_model::stitch::QualityReport;
use tessera_model::wire::Hardware;

use crate::PublishGate;

/// What to transcode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRequest {
    /// Job id (deterministic keys hang off it).
    pub id: String,
    /// The source file (local path; staged from S3 by the service).
    pub input: PathBuf,
    /// The outputs: each segment is decoded once and encoded once per output.
    pub outputs: Vec<JobOutput>,
    /// Target segment length in seconds.
    pub segment_seconds: f64,
    /// Segments expected to encode at once (the planner balances the last round for it).
    pub parallelism: usize,
    /// Where the segments may be encoded (GPU queue, CPU queue, or either).
    #[serde(default)]
    pub hardware: Hardware,
    /// Scheduling priority 0-9 (with a [`PublishGate`], higher goes first).
    #[serde(default)]
    pub priority: u8,
    /// Keep only the first audio track.
    pub first_audio_only: bool,
    /// Mix every audio track of more than two channels down to stereo; without it a track
    /// keeps its channels (5.1 stays 5.1).
    #[serde(default)]
    pub stereo_downmix: bool,
    /// Also measure PSNR/SSIM of the output against the source.
    pub measure_quality: bool,
    /// What an earlier run of this job already did (a dispatcher restart), if anything.
    #[serde(default)]
    pub resume: Option<Resume>,
    /// A streaming package (HLS/DASH/CMAF) to make besides (or instead of) the file outputs:
    /// its rungs join `outputs` once the probe knows the source (see [`Destination::Rung`]).
    #[serde(default)]
    pub package: Option<PackageJob>,
}

/// A streaming package output: the spec and where the package's files go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackageJob {
    /// Format, segment length, ladder, audio, subtitles.
    pub spec: tessera_model::package::PackageSpec,
    /// A folder (the one-process farm) or an object prefix ending in '/'.
    pub destination: Destination,
}

/// One output of a job: a rendition in a container at a destination.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobOutput {
    /// The video rendition (its name keys the encoded segments in the work area).
    pub rendition: RenditionSpec,
    /// The output container.
    pub container: Container,
    /// Where the finished file goes.
    pub destination: Destination,
}

/// Where a finished output is delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Destination {
    /// A local file (the one-process farm), written by temp name and rename.
    File(PathBuf),
    /// An object, copied server-side from the work area by the context's [`OutputSink`].
    Object {
        /// Bucket.
        bucket: String,
        /// Key.
        key: String,
    },
    /// A rung of the job's streaming package: stitched and checked like any output, then
    /// cut into the package's media segments instead of being delivered alone.
    Rung,
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Destination::File(p) => write!(f, "{}", p.display()),
            Destination::Object { bucket, key } => write!(f, "s3://{bucket}/{key}"),
            Destination::Rung => write!(f, "package rung"),
        }
    }
}

/// Moves stitched outputs from the work area to object destinations.
///
/// Why a trait: the dispatcher service copies server-side within its S3 endpoint; the job
/// logic stays free of S3 specifics and testable over a local store.
#[async_trait::async_trait]
pub trait OutputSink: Send + Sync {
    /// Copies the work-area object `work_key` to `bucket`/`key`; returns the size and whether
    /// an earlier run of the job (killed inside delivery) had copied that very object there
    /// already (then nothing is copied again). With an `etag` (the object a stitch stored
    /// after its QC gate), only the object of that ETag is copied: another one under the key
    /// (a later duplicate's) fails the copy (review N6).
    async fn deliver(
        &self,
        work_key: &str,
        etag: Option<&str>,
        bucket: &str,
        key: &str,
    ) -> Result<Delivered, FarmError>;
    /// Removes a delivered object again (a later output of the job failed). Why a result:
    /// the engine retries a delete the store could not do and names what it left behind.
    async fn remove(&self, bucket: &str, key: &str) -> Result<(), FarmError>;
}

/// Progress of an interrupted run, so a restarted dispatcher does not redo it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Resume {
    /// Fingerprint of the earlier run's plan; the rest applies only if the new plan matches.
    pub plan_fingerprint: u64,
    /// Whether every segment task was already published (and sits durably on the queue).
    pub published: bool,
    /// Segments already reported done.
    pub done: Vec<DoneSegment>,
}

/// A segment an earlier run of the job saw done: what its resumed run counts without
/// waiting for it again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DoneSegment {
    /// The segment's index in the plan.
    pub index: u32,
    /// Frames it encoded.
    pub frames: u64,
    /// The target-quality searches it reported (per rendition; empty without a target), so
    /// the report of a resumed job still accounts for every segment.
    #[serde(default)]
    pub targets: Vec<Option<TargetResult>>,
}

/// Where the job stands, for progress displays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum JobStage {
    /// Probed: the number of frames to encode and the segment count.
    Planned {
        /// Frames expected.
        frames: u64,
        /// Segments planned.
        segments: u32,
        /// Identifies the plan (segment ranges), see [`Resume`].
        fingerprint: u64,
        /// Seconds of video in each segment (the scaling signal's backlog).
        #[serde(default)]
        segment_seconds: Vec<f64>,
        /// Whether the segments go to the GPU pool.
        #[serde(default)]
        on_gpu: bool,
    },
    /// Every segment task is on the queue.
    Published,
    /// A segment finished.
    SegmentDone {
        /// Which.
        segment: u32,
        /// Its frames.
        frames: u64,
        /// Seconds the worker's child spent decoding and encoding it.
        #[serde(default)]
        media_seconds: f64,
        /// Seconds the worker spent on it outside decode and encode (staging, upload).
        #[serde(default)]
        overhead_seconds: f64,
        /// The worker that did it (the dashboard's segment timeline).
        #[serde(default)]
        worker: String,
        /// Which delivery of the task it was (1: its first; 0: an older worker's event).
        #[serde(default)]
        attempt: u32,
        /// The card that encoded it; `None`: software.
        #[serde(default)]
        card: Option<u32>,
        /// Per rendition, how a target-quality rendition found its rate factor (kept for a
        /// restart: the report accounts for every segment).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        targets: Vec<Option<TargetResult>>,
    },
    /// All segments are in; stitching.
    Stitching,
    /// Every output is stitched and checked; delivery starts. The point of no return: a
    /// recorder answers `Cancelled` when the job was cancelled first, and once this stage is
    /// recorded a cancel can no longer interrupt the job (its outputs arrive whole, all of
    /// them, or none on failure).
    Delivering,
}

/// Shared services of the dispatcher.
#[derive(Clone)]
pub struct DispatchContext {
    /// The queue segment tasks go to.
    pub queue: Arc<dyn Queue>,
    /// The work area.
    pub store: Arc<dyn Store>,
    /// Runs media work in children.
    pub sandbox: Sandbox,
    /// Local staging for the dispatcher's own files.
    pub staging_dir: PathBuf,
    /// The segment queue name.
    pub encode_queue: String,
    /// The GPU segment queue name (jobs needing or allowing NVENC).
    pub gpu_queue: String,
    /// The stitch queue name.
    pub stitch_queue: String,
    /// The whole-input queue (whole.rs), where short inputs go as one task while the fleet
    /// is busy; `None`: every input is split (the one-process farm runs one job at a time).
    pub whole_queue: Option<String>,
    /// The cut queue (cut.rs), where CPU segment tasks go whose workers cut their own
    /// chunks from the job's source; `None`: the dispatcher splits every input itself.
    pub cut_queue: Option<String>,
    /// The longest input, in seconds, that may go whole.
    pub whole_max_seconds: f64,
    /// Admits segments to the encode queue by priority (none: publish at once).
    pub gate: Option<Arc<PublishGate>>,
    /// Delivers outputs whose destination is an object (none in the one-process farm).
    pub sink: Option<Arc<dyn OutputSink>>,
    /// Limits of probe/split/audio/stitch children.
    pub limits: Limits,
    /// Largest share of a source's frames the decoder may reject or conceal before the job
    /// fails as `source_corrupt` (fewer are reported as a warning).
    pub max_decode_error_share: f64,
    /// Most video frames an input may have (admission control; none: the media crate's
    /// limit of 24 hours at 60 fps).
    pub max_input_frames: Option<u64>,
    /// How long a job may hear nothing of its outstanding tasks before it republishes them
    /// (a task lost from the queue without being dead-lettered); after
    /// [`MAX_REPUBLISH`](crate::task_events::MAX_REPUBLISH) silences the job fails as
    /// `task_lost`. Longer than any one task may take.
    pub task_deadline: std::time::Duration,
    /// Records a stage (the service writes it to its database). An event is acked only once
    /// this returned `Ok`; an error (a full disk, a locked database) is retried until it
    /// succeeds, so progress is never acked without being recorded.
    pub on_stage: StageRecorder,
}

/// Records a job's stages (see [`DispatchContext::on_stage`]).
pub type StageRecorder = Arc<dyn Fn(&JobStage) -> Result<(), FarmError> + Send + Sync>;

/// The default of [`DispatchContext::task_deadline`]: an hour, three times the workers'
/// default segment timeout.
pub const DEFAULT_TASK_DEADLINE: std::time::Duration = std::time::Duration::from_secs(3600);

/// The default of [`DispatchContext::max_decode_error_share`]: one frame in a hundred.
pub const DEFAULT_MAX_DECODE_ERROR_SHARE: f64 = 0.01;

/// What the job produced, with figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobReport {
    /// Job id.
    pub job_id: String,
    /// Each output, in request order.
    pub outputs: Vec<OutputReport>,
    /// Video frames in each output.
    pub frames: u64,
    /// Frames the probe counted in the source.
    pub source_frames: u64,
    /// Segments.
    pub segments: u32,
    /// Frames of each segment, in order. Why: a quality measure per segment of another
    /// output of the same source (`tessera quality --segments`, the quality bench) uses the
    /// same frame ranges.
    #[serde(default)]
    pub segment_frames: Vec<u64>,
    /// Audio tracks in each output.
    pub audio_tracks: usize,
    /// Bytes of all outputs.
    pub bytes: u64,
    /// Wall time of the whole job.
    pub wall_s: f64,
    /// Output frames per wall second.
    pub encode_fps: f64,
    /// Largest peak RSS of any media child (a segment encode, usually).
    pub peak_child_rss_bytes: u64,
    /// Largest peak RSS of a segment encode child.
    pub peak_segment_rss_bytes: u64,
    /// Median seconds a segment spent in the worker outside decode/encode.
    pub median_segment_overhead_s: f64,
    /// PSNR/SSIM of the first output, when asked.
    pub quality: Option<QualityReport>,
    /// Source packets the decoder rejected plus frames it concealed or flagged corrupt.
    #[serde(default)]
    pub decode_errors: u64,
    /// What the user should know about an output that was delivered anyway (a few damaged
    /// source frames, streams left out).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Seconds before the encodes had the whole input: probe, plan, split, chunks stored
    /// (the first segments already encode during the split).
    #[serde(default)]
    pub prepare_s: f64,
    /// Seconds after the last segment: stitch with its QC decode, quality, delivery.
    #[serde(default)]
    pub finish_s: f64,
    /// `prepare_s + finish_s`: what a file costs beyond its encodes (the benchmark's fixed
    /// per-file overhead).
    #[serde(default)]
    pub fixed_overhead_s: f64,
    /// Of `finish_s`, the seconds the QC gate took checking the stitched outputs (summed over
    /// outputs): the largest part of the fixed overhead on a long output (its decode grows
    /// with the output's length), reported so where a job's end goes can be read.
    #[serde(default)]
    pub qc_s: f64,
    /// The source's title (container metadata), kept in the outputs. Why in the report: the
    /// dashboard names a job by it beside its key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Seconds of video in each output (the source's duration). Why: throughput is read in
    /// minutes of video delivered per hour (the dashboard's throughput page).
    #[serde(default)]
    pub video_s: f64,
}

/// One delivered output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputReport {
    /// Where it went (`s3://bucket/key` or a path).
    pub destination: String,
    /// Its rendition's name.
    pub rendition: String,
    /// Its size.
    pub bytes: u64,
    /// PSNR/SSIM against the source, when asked.
    pub quality: Option<QualityReport>,
    /// With a target quality: each segment's search (the rate factor kept, the probes, the
    /// VMAF predicted for it), in segment order; `None` for a segment with no account (one
    /// an earlier run of the job collected). Empty without a target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target: Vec<Option<TargetResult>>,
    /// With a target and a quality measurement: the largest gap between a segment's VMAF as
    /// its search scored it and as measured in the stitched output. Why: the search keeps a
    /// probe because of its score; this says how far that score can be trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_vmaf_error: Option<f64>,
    /// A package's rungs that searched a target, each with its segments' searches (as
    /// `target`); empty for a file output and a package without targets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rungs: Vec<RungSearch>,
}

/// One package rung's target-quality account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RungSearch {
    /// The rung's rendition name ("v0" the highest).
    pub rendition: String,
    /// Per segment, the search (see [`OutputReport::target`]).
    pub target: Vec<Option<TargetResult>>,
}

/// A job's request resolved against its source by prepare, with the plan every later stage
/// reads. Why: built once per run (and once more on a CPU fallback) and handed forward, so no
/// stage rewrites the request.
pub(crate) struct JobPlan {
    /// The request as this run carries it out: a package's rungs joined to the outputs (see
    /// [`Destination::Rung`]), and the hardware this run uses (the CPU on a fallback).
    pub req: JobRequest,
    /// The probed source.
    pub info: ProbeInfo,
    /// The segments, in order.
    pub segments: Vec<SegmentPlan>,
    /// The timestamp bias the split and the stitch apply (video time base).
    pub bias: i64,
    /// The plan's fingerprint: in every task, event and work-area key of this run.
    pub fingerprint: u64,
    /// The queue the segment tasks go to.
    pub encode_queue: String,
    /// Set when this run's workers cut their chunks from the source (cut.rs): the split's
    /// dts rule, which every segment task carries.
    pub cut: Option<tessera_model::timestamps::DtsRule>,
    /// Which segments are on the queue (the publisher marks them; all of them on a resume of
    /// a run that published everything): the ones a silence may republish.
    pub on_queue: OnQueue,
    /// Which segments follow their scene's first segment, and what each segment kept: the
    /// publisher holds a follower back until its leader is done (scene_leads.rs).
    pub leads: Arc<crate::scene_leads::SceneLeads>,
    /// A package's media segment starts (source pts): IDRs in every rendition. Empty
    /// without a package.
    pub media_starts: Vec<i64>,
    /// A package's thumbnails: the stills the segment tasks make, the sheets made of them.
    pub thumbnails: Option<PlannedThumbnails>,
}

impl JobPlan {
    /// The stills the segment tasks take (none without a package's thumbnails).
    pub(crate) fn stills(&self) -> &[PlannedStill] {
        self.thumbnails.as_ref().map_or(&[], |t| &t.stills)
    }

    /// Whether this run's segments go to the GPU queue.
    pub(crate) fn on_gpu(&self, ctx: &DispatchContext) -> bool {
        self.encode_queue == ctx.gpu_queue
    }
}

/// Which segments of a job have been published, shared with its publisher.
pub(crate) type OnQueue = Arc<std::sync::Mutex<Vec<bool>>>;

/// One frame's still images: its source pts, and each image with its package-relative file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlannedStill {
    pub pts: i64,
    pub images: Vec<(tessera_model::images::StillImage, String)>,
}

/// A package's thumbnails planned on the source: the frames the segment encodes take images
/// of, and the sheets and thumbnails track the package step makes of them.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlannedThumbnails {
    pub stills: Vec<PlannedStill>,
    pub plan: tessera_package::thumbnails::ThumbnailPlan,
}
