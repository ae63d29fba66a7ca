//! `tessera-dispatcher`'s flags, each with its `TESSERA_*` variable (clap reads both).
//!
//! Why a file apart: the flags are long and documented one by one; settings.rs layers them
//! over the config file.

use std::net::SocketAddr;
use std::path::PathBuf;

use tessera_farm::config::ServiceArgs;

/// `tessera-dispatcher` flags; each has a `TESSERA_*` variable and a key in the config file.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "tessera-dispatcher",
    version,
    about = "tessera dispatcher: API, planning, stitching"
)]
pub struct DispatcherArgs {
    /// TOML config file with `[service]` and `[dispatcher]` tables.
    #[arg(long, env = "TESSERA_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log filter.
    #[arg(long, env = "TESSERA_LOG", default_value = "info")]
    pub log: String,
    /// Log lines as `text`, or `json`: one object a line with the job, plan, segment and
    /// worker ids of the work it is about (docs/operations.md, "JSON logs").
    #[arg(long, env = "TESSERA_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: tessera_farm::signals::LogFormat,
    /// Broker and store.
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Address to listen on (port 0 picks a free one) [default: 127.0.0.1:8080].
    #[arg(long, env = "TESSERA_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// SQLite database of job state [default: ./tessera-dispatcher.db].
    #[arg(long, env = "TESSERA_DB")]
    pub db: Option<PathBuf>,
    /// Local staging for inputs and outputs [default: /var/tmp/tessera-dispatcher].
    #[arg(long, env = "TESSERA_STAGING_DIR")]
    pub staging_dir: Option<PathBuf>,
    /// Buckets jobs may use, comma-separated.
    #[arg(long, env = "TESSERA_BUCKETS", value_delimiter = ',')]
    pub buckets: Vec<String>,
    /// Bucket for `POST /v1/uploads` by file name; must be an allowed bucket [default: the
    /// first of --buckets].
    #[arg(long, env = "TESSERA_UPLOAD_BUCKET")]
    pub upload_bucket: Option<String>,
    /// Default segment length in seconds [default: 10].
    #[arg(long, env = "TESSERA_SEGMENT_SECONDS")]
    pub segment_seconds: Option<f64>,
    /// Segments the farm encodes at once, for balancing the last round [default: 2].
    #[arg(long, env = "TESSERA_PARALLELISM")]
    pub parallelism: Option<usize>,
    /// Segments queued or encoding at once over all jobs; beyond it, segments wait in the
    /// dispatcher and the highest-priority job's go first [default: 4 x parallelism].
    #[arg(long, env = "TESSERA_QUEUE_WINDOW")]
    pub queue_window: Option<usize>,
    /// Watched upload prefix `[tenant:]bucket/prefix=output_bucket/output_prefix` (repeatable;
    /// env comma-separated; the jobs belong to `tenant`, default `watch`); replaces the
    /// file's `[[dispatcher.watch]]` tables.
    #[arg(long = "watch", env = "TESSERA_WATCH", value_delimiter = ',')]
    pub watch: Vec<String>,
    /// Object scopes of a tenant, `tenant=rw:bucket/prefix/` (`r`, `w` or `rw`; repeatable;
    /// env comma-separated); a tenant given none reads and writes `<bucket>/<tenant>/` of
    /// every allowed bucket, and every tenant reads its uploads; replaces the file's
    /// `tenant_scopes`.
    #[arg(
        long = "tenant-scope",
        env = "TESSERA_TENANT_SCOPES",
        value_delimiter = ','
    )]
    pub tenant_scope: Vec<String>,
    /// Largest upload in bytes a presigned URL accepts (its Content-Length is signed)
    /// [default: --max-input-bytes].
    #[arg(long, env = "TESSERA_MAX_UPLOAD_BYTES")]
    pub max_upload_bytes: Option<u64>,
    /// Upload URLs one tenant (not an admin) may be given per 15 minutes, the URLs' lifetime
    /// [default: 100].
    #[arg(long, env = "TESSERA_MAX_UPLOAD_URLS")]
    pub max_upload_urls: Option<u32>,
    /// Seconds between listings of the watched prefixes [default: 10].
    #[arg(long, env = "TESSERA_WATCH_INTERVAL_SECONDS")]
    pub watch_interval_seconds: Option<u64>,
    /// RabbitMQ queue of S3 event notifications to consume (off when unset).
    #[arg(long, env = "TESSERA_S3_EVENTS_QUEUE")]
    pub s3_events_queue: Option<String>,
    /// Largest share (0-1) of a source's frames the decoder may reject or conceal before the
    /// job fails as `source_corrupt` [default: 0.01].
    #[arg(long, env = "TESSERA_MAX_DECODE_ERROR_SHARE")]
    pub max_decode_error_share: Option<f64>,
    /// Most video frames an input may have; longer inputs are refused at probing [default:
    /// 24 hours at 60 fps].
    #[arg(long, env = "TESSERA_MAX_INPUT_FRAMES")]
    pub max_input_frames: Option<u64>,
    /// Seconds a job may hear nothing of its outstanding tasks before it republishes them
    /// (twice at most, then it fails `task_lost`); keep it above the workers' segment
    /// timeout [default: 3600].
    #[arg(long, env = "TESSERA_TASK_DEADLINE_SECONDS")]
    pub task_deadline_seconds: Option<u64>,
    /// Longest input, in seconds, that goes to one worker as one whole-input task while
    /// segments wait on the CPU queue (no split, no stitch); 0 splits every input [default:
    /// 60].
    #[arg(long, env = "TESSERA_WHOLE_INPUT_MAX_SECONDS")]
    pub whole_input_max_seconds: Option<f64>,
    /// Whether workers cut their segments' chunks from the job's source (the dispatcher
    /// stores the input once and splits nothing) while a worker consumes the cut queue;
    /// `false` splits every input in the dispatcher [default: true].
    #[arg(long, env = "TESSERA_CUT_ON_WORKERS")]
    pub cut_on_workers: Option<bool>,
    /// Seconds the scaling signal (`tessera_desired_workers`, `/scaling`) lets a pool's
    /// backlog take to drain [default: 600].
    #[arg(long, env = "TESSERA_SCALING_TARGET_SECONDS")]
    pub scaling_target_seconds: Option<f64>,
    /// Media seconds one CPU worker encodes per second, until measured [default: 0.5].
    #[arg(long, env = "TESSERA_SCALING_CPU_THROUGHPUT")]
    pub scaling_cpu_throughput: Option<f64>,
    /// Media seconds one GPU worker encodes per second, until measured [default: 4].
    #[arg(long, env = "TESSERA_SCALING_GPU_THROUGHPUT")]
    pub scaling_gpu_throughput: Option<f64>,
    /// Segments one CPU worker encodes at once (the workers' `TESSERA_SLOTS`), for the
    /// scaling signal's per-worker throughput [default: 1].
    #[arg(long, env = "TESSERA_SCALING_CPU_SLOTS")]
    pub scaling_cpu_slots: Option<u32>,
    /// Segments one GPU worker encodes at once [default: 4].
    #[arg(long, env = "TESSERA_SCALING_GPU_SLOTS")]
    pub scaling_gpu_slots: Option<u32>,
    /// Hosts (`hooks.example.com`, `*.example.com`) and networks (`10.1.0.0/16`) webhooks may
    /// reach besides public addresses, comma-separated; with host names given, callbacks
    /// must use one of them [default: any public address].
    #[arg(
        long = "webhook-allow",
        env = "TESSERA_WEBHOOK_ALLOW",
        value_delimiter = ','
    )]
    pub webhook_allow: Vec<String>,
    /// Jobs run at once (staging, probing, splitting, encoding); the rest wait `queued`
    /// [default: 8].
    #[arg(long, env = "TESSERA_MAX_RUNNING_JOBS")]
    pub max_running_jobs: Option<usize>,
    /// Unfinished jobs one tenant may have; more are refused with 429 [default: 100].
    #[arg(long, env = "TESSERA_MAX_JOBS_PER_TENANT")]
    pub max_jobs_per_tenant: Option<u64>,
    /// Largest input in bytes; larger ones fail `input_too_large` before any download
    /// [default: 64 GiB].
    #[arg(long, env = "TESSERA_MAX_INPUT_BYTES")]
    pub max_input_bytes: Option<u64>,
    /// Days a finished job stays in the database [default: 30].
    #[arg(long, env = "TESSERA_RETENTION_DAYS")]
    pub retention_days: Option<u64>,
    /// Seconds an API client has to send a request's headers [default: 10].
    #[arg(long, env = "TESSERA_HTTP_HEADER_TIMEOUT_SECONDS")]
    pub http_header_timeout_seconds: Option<u64>,
    /// Seconds an API request may take, body included, before a 408 [default: 60].
    #[arg(long, env = "TESSERA_HTTP_REQUEST_TIMEOUT_SECONDS")]
    pub http_request_timeout_seconds: Option<u64>,
    /// API connections served at once [default: 1024].
    #[arg(long, env = "TESSERA_HTTP_MAX_CONNECTIONS")]
    pub http_max_connections: Option<usize>,
    /// Instead of serving: a one-off command.
    #[command(subcommand)]
    pub command: Option<DispatcherCommand>,
}

/// `tessera-dispatcher`'s one-off commands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum DispatcherCommand {
    /// GET /healthz of this dispatcher's --listen address (on loopback when it is a
    /// wildcard); exit 0 on 200. For container HEALTHCHECKs.
    Health(tessera_farm::health::HealthArgs),
}
