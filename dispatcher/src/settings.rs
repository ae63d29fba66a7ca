//! The dispatcher's settings: flags, `TESSERA_*` variables and the config file, resolved
//! into one `Settings` (defaults, then the file, then env and flags).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use tessera_farm::config::{ServiceArgs, ServiceConfig, ServiceFile};

use crate::watch::{self, Watch};

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
    /// Watched upload prefix `bucket/prefix=output_bucket/output_prefix` (repeatable; env
    /// comma-separated); replaces the file's `[[dispatcher.watch]]` tables.
    #[arg(long = "watch", env = "TESSERA_WATCH", value_delimiter = ',')]
    pub watch: Vec<String>,
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
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DispatcherFile {
    listen: Option<SocketAddr>,
    db: Option<PathBuf>,
    staging_dir: Option<PathBuf>,
    buckets: Option<Vec<String>>,
    upload_bucket: Option<String>,
    api_tokens: Option<Vec<String>>,
    webhook_secret: Option<String>,
    segment_seconds: Option<f64>,
    parallelism: Option<usize>,
    queue_window: Option<usize>,
    watch: Option<Vec<watch::WatchFile>>,
    watch_interval_seconds: Option<u64>,
    s3_events_queue: Option<String>,
    max_decode_error_share: Option<f64>,
    max_input_frames: Option<u64>,
    task_deadline_seconds: Option<u64>,
    scaling_target_seconds: Option<f64>,
    scaling_cpu_throughput: Option<f64>,
    scaling_gpu_throughput: Option<f64>,
    webhook_allow: Option<Vec<String>>,
    max_running_jobs: Option<usize>,
    max_jobs_per_tenant: Option<u64>,
    max_input_bytes: Option<u64>,
    retention_days: Option<u64>,
    http_header_timeout_seconds: Option<u64>,
    http_request_timeout_seconds: Option<u64>,
    http_max_connections: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    service: ServiceFile,
    #[serde(default)]
    dispatcher: DispatcherFile,
}

/// Everything the dispatcher needs, resolved.
#[derive(Clone)]
pub struct Settings {
    /// Broker, store, work bucket.
    pub service: ServiceConfig,
    /// Listen address.
    pub listen: SocketAddr,
    /// Database file.
    pub db: PathBuf,
    /// Staging directory.
    pub staging_dir: PathBuf,
    /// Allowed buckets.
    pub buckets: Vec<String>,
    /// Bucket that uploads by file name go to (one of `buckets`; "" when no bucket is allowed).
    pub upload_bucket: String,
    /// Bearer tokens (from `TESSERA_API_TOKENS` or the file; never flags or logs).
    pub tokens: Vec<crate::auth::ApiToken>,
    /// Webhook signing key (from `TESSERA_WEBHOOK_SECRET` or the file; never flags or logs).
    pub webhook_secret: Option<String>,
    /// Default segment length.
    pub segment_seconds: f64,
    /// Farm parallelism hint.
    pub parallelism: usize,
    /// Segments admitted to the encode queue at once (priority scheduling).
    pub queue_window: usize,
    /// Watched upload prefixes (jobs from bucket uploads).
    pub watches: Vec<Watch>,
    /// Time between listings of the watched prefixes.
    pub watch_interval: Duration,
    /// RabbitMQ queue of S3 event notifications, if consumed.
    pub s3_events_queue: Option<String>,
    /// See [`tessera_engine::DispatchContext::max_decode_error_share`].
    pub max_decode_error_share: f64,
    /// See [`tessera_engine::DispatchContext::max_input_frames`].
    pub max_input_frames: Option<u64>,
    /// See [`tessera_engine::DispatchContext::task_deadline`].
    pub task_deadline: Duration,
    /// The scaling signal's target and first throughput guesses.
    pub scaling: crate::scaling::ScalingSettings,
    /// Where webhooks may go.
    pub webhook_guard: crate::webhook_guard::WebhookGuard,
    /// Admission control: jobs at once, per tenant, input size, retention.
    pub limits: AdmissionLimits,
    /// The API server's limits against slow and numerous clients.
    pub http: crate::http_server::HttpLimits,
}

/// What the dispatcher admits, so that one client cannot exhaust its disk, memory or
/// database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionLimits {
    /// Jobs running at once; the rest wait `queued`.
    pub running_jobs: usize,
    /// Unfinished jobs per tenant.
    pub jobs_per_tenant: u64,
    /// Largest input.
    pub input_bytes: u64,
    /// How long finished jobs stay in the database.
    pub retention: Duration,
}

impl Settings {
    /// Defaults, then the file, then env and flags.
    pub fn resolve(args: &DispatcherArgs) -> Result<Self, String> {
        let file: FileConfig = tessera_farm::config::read_config_file(args.config.as_deref())?;
        let d = file.dispatcher;
        let scaling = scaling_settings(args, &d)?;
        let entries: Vec<String> = std::env::var("TESSERA_API_TOKENS")
            .ok()
            .map(|v| {
                v.split(',')
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .collect()
            })
            .or(d.api_tokens)
            .unwrap_or_default();
        if entries.is_empty() {
            return Err("no API tokens: set TESSERA_API_TOKENS or dispatcher.api_tokens".into());
        }
        let tokens = entries
            .iter()
            .map(|e| crate::auth::ApiToken::parse(e))
            .collect::<Result<Vec<_>, _>>()?;
        let buckets = if args.buckets.is_empty() {
            d.buckets.unwrap_or_default()
        } else {
            args.buckets.clone()
        };
        let upload_bucket = match args.upload_bucket.clone().or(d.upload_bucket) {
            Some(b) if !buckets.contains(&b) => {
                return Err(format!(
                    "upload bucket '{b}' is not one of the allowed buckets {buckets:?}"
                ))
            }
            Some(b) => b,
            None => buckets.first().cloned().unwrap_or_default(),
        };
        let service = ServiceConfig::resolve(&args.service, &file.service)?;
        if buckets.contains(&service.work_bucket) {
            return Err(format!(
                "the work bucket '{}' may not be one of the allowed buckets: jobs could read \
                 and overwrite other jobs' work objects and end markers",
                service.work_bucket
            ));
        }
        let watches = watch::resolve(&args.watch, d.watch, &buckets)?;
        Ok(Settings {
            service,
            listen: args
                .listen
                .or(d.listen)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080))),
            db: args
                .db
                .clone()
                .or(d.db)
                .unwrap_or_else(|| PathBuf::from("tessera-dispatcher.db")),
            staging_dir: args
                .staging_dir
                .clone()
                .or(d.staging_dir)
                .unwrap_or_else(|| PathBuf::from("/var/tmp/tessera-dispatcher")),
            buckets,
            upload_bucket,
            tokens,
            webhook_secret: std::env::var("TESSERA_WEBHOOK_SECRET")
                .ok()
                .filter(|s| !s.is_empty())
                .or(d.webhook_secret.clone()),
            segment_seconds: args.segment_seconds.or(d.segment_seconds).unwrap_or(10.0),
            parallelism: args.parallelism.or(d.parallelism).unwrap_or(2).max(1),
            queue_window: args
                .queue_window
                .or(d.queue_window)
                .unwrap_or(4 * args.parallelism.or(d.parallelism).unwrap_or(2).max(1))
                .max(1),
            watches,
            watch_interval: Duration::from_secs(
                args.watch_interval_seconds
                    .or(d.watch_interval_seconds)
                    .unwrap_or(10)
                    .max(1),
            ),
            s3_events_queue: watch::events_queue(
                args.s3_events_queue.clone().or(d.s3_events_queue),
            )?,
            max_decode_error_share: decode_error_share(
                args.max_decode_error_share.or(d.max_decode_error_share),
            )?,
            max_input_frames: args.max_input_frames.or(d.max_input_frames),
            webhook_guard: crate::webhook_guard::WebhookGuard::parse(
                &(if args.webhook_allow.is_empty() {
                    d.webhook_allow.clone().unwrap_or_default()
                } else {
                    args.webhook_allow.clone()
                }),
            )?,
            limits: AdmissionLimits {
                running_jobs: args
                    .max_running_jobs
                    .or(d.max_running_jobs)
                    .unwrap_or(8)
                    .max(1),
                jobs_per_tenant: args
                    .max_jobs_per_tenant
                    .or(d.max_jobs_per_tenant)
                    .unwrap_or(100)
                    .max(1),
                input_bytes: args
                    .max_input_bytes
                    .or(d.max_input_bytes)
                    .unwrap_or(64 << 30),
                retention: Duration::from_secs(
                    args.retention_days
                        .or(d.retention_days)
                        .unwrap_or(30)
                        .max(1)
                        * 86_400,
                ),
            },
            http: {
                let default = crate::http_server::HttpLimits::default();
                let secs = |flag: Option<u64>, file: Option<u64>, d: Duration| {
                    flag.or(file).map_or(d, |s| Duration::from_secs(s.max(1)))
                };
                crate::http_server::HttpLimits {
                    header_timeout: secs(
                        args.http_header_timeout_seconds,
                        d.http_header_timeout_seconds,
                        default.header_timeout,
                    ),
                    request_timeout: secs(
                        args.http_request_timeout_seconds,
                        d.http_request_timeout_seconds,
                        default.request_timeout,
                    ),
                    max_connections: args
                        .http_max_connections
                        .or(d.http_max_connections)
                        .unwrap_or(default.max_connections)
                        .max(1),
                }
            },
            task_deadline: args
                .task_deadline_seconds
                .or(d.task_deadline_seconds)
                .map_or(tessera_engine::DEFAULT_TASK_DEADLINE, |s| {
                    Duration::from_secs(s.max(1))
                }),
            scaling,
        })
    }
}

/// The scaling signal's settings, each positive and finite.
fn scaling_settings(
    args: &DispatcherArgs,
    d: &DispatcherFile,
) -> Result<crate::scaling::ScalingSettings, String> {
    let default = crate::scaling::ScalingSettings::default();
    let positive = |name: &str, v: Option<f64>, default: f64| match v {
        None => Ok(default),
        Some(v) if v.is_finite() && v > 0.0 => Ok(v),
        Some(v) => Err(format!("{name} {v} must be a positive number")),
    };
    Ok(crate::scaling::ScalingSettings {
        target_drain_seconds: positive(
            "scaling_target_seconds",
            args.scaling_target_seconds.or(d.scaling_target_seconds),
            default.target_drain_seconds,
        )?,
        cpu_throughput: positive(
            "scaling_cpu_throughput",
            args.scaling_cpu_throughput.or(d.scaling_cpu_throughput),
            default.cpu_throughput,
        )?,
        gpu_throughput: positive(
            "scaling_gpu_throughput",
            args.scaling_gpu_throughput.or(d.scaling_gpu_throughput),
            default.gpu_throughput,
        )?,
    })
}

/// The decode-error share from flag or file, checked to lie in 0..=1.
fn decode_error_share(value: Option<f64>) -> Result<f64, String> {
    match value {
        None => Ok(tessera_engine::DEFAULT_MAX_DECODE_ERROR_SHARE),
        Some(v) if (0.0..=1.0).contains(&v) => Ok(v),
        Some(v) => Err(format!(
            "max_decode_error_share {v}: must be a share between 0 and 1"
        )),
    }
}
