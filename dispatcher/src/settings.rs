//! The dispatcher's settings: flags, `TESSERA_*` variables and the config file, resolved
//! into one `Settings` (defaults, then the file, then env and flags, each value layered by
//! tessera-farm's `config::Setting`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use tessera_farm::config::{read_config_file, ServiceConfig, ServiceFile, Setting};

use crate::auth::ApiToken;
use crate::http_server::HttpLimits;
use crate::scaling::ScalingSettings;
use crate::watch::{self, Watch};
use crate::webhook_guard::WebhookGuard;

mod args;
mod tenancy;

pub use self::args::{DispatcherArgs, DispatcherCommand};

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
    whole_input_max_seconds: Option<f64>,
    cut_on_workers: Option<bool>,
    scaling_target_seconds: Option<f64>,
    scaling_cpu_throughput: Option<f64>,
    scaling_gpu_throughput: Option<f64>,
    scaling_cpu_slots: Option<u32>,
    scaling_gpu_slots: Option<u32>,
    webhook_allow: Option<Vec<String>>,
    max_running_jobs: Option<usize>,
    max_jobs_per_tenant: Option<u64>,
    max_input_bytes: Option<u64>,
    retention_days: Option<u64>,
    http_header_timeout_seconds: Option<u64>,
    http_request_timeout_seconds: Option<u64>,
    http_max_connections: Option<usize>,
    tenant_scopes: Option<Vec<String>>,
    max_upload_bytes: Option<u64>,
    max_upload_urls: Option<u32>,
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
    /// See [`tessera_engine::DispatchContext::whole_max_seconds`] (0: inputs always split).
    pub whole_max_seconds: f64,
    /// Whether CPU segment tasks may go to the cut queue (workers cut their own chunks).
    pub cut_on_workers: bool,
    /// The scaling signal's target and first throughput guesses.
    pub scaling: crate::scaling::ScalingSettings,
    /// Where webhooks may go.
    pub webhook_guard: crate::webhook_guard::WebhookGuard,
    /// Admission control: jobs at once, per tenant, input size, retention.
    pub limits: AdmissionLimits,
    /// The API server's limits against slow and numerous clients.
    pub http: crate::http_server::HttpLimits,
    /// What each tenant's jobs may read and write.
    pub scopes: crate::scopes::TenantScopes,
    /// Upload URLs: the largest upload, URLs per tenant per 15 minutes.
    pub uploads: crate::uploads::UploadLimits,
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

/// The API's address: `--listen` over the file's `listen` over 127.0.0.1:8080.
fn listen(args: &DispatcherArgs, d: &DispatcherFile) -> SocketAddr {
    Setting::layered("listen", args.listen, d.listen)
        .or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)))
        .get()
}

impl Settings {
    /// Only the API's address, layered as [`Settings::resolve`] does: what
    /// `tessera-dispatcher health` asks, with no broker, store or token settings needed.
    pub fn resolve_listen(args: &DispatcherArgs) -> Result<SocketAddr, String> {
        let file: FileConfig = read_config_file(args.config.as_deref())?;
        Ok(listen(args, &file.dispatcher))
    }

    /// Defaults, then the file, then env and flags.
    pub fn resolve(args: &DispatcherArgs) -> Result<Self, String> {
        let file: FileConfig = read_config_file(args.config.as_deref())?;
        let mut d = file.dispatcher;
        let scaling = scaling_settings(args, &d)?;
        let tokens = api_tokens(d.api_tokens.take())?;
        let (buckets, upload_bucket) = job_buckets(args, &mut d)?;
        let service = ServiceConfig::resolve(&args.service, &file.service)?;
        check_work_bucket(&service.work_bucket, &buckets)?;
        let scopes = tenancy::tenant_scopes(args, &mut d, &buckets, &upload_bucket)?;
        let watches = watch::resolve(&args.watch, d.watch.take(), &buckets, &scopes)?;
        let limits = admission_limits(args, &d);
        let uploads = tenancy::upload_limits(args, &d, limits.input_bytes)?;
        let s3_events_queue = Setting::layered(
            "s3_events_queue",
            args.s3_events_queue.clone(),
            d.s3_events_queue.take(),
        );
        let s3_events_queue = watch::events_queue(s3_events_queue.optional())?;
        let max_decode_error_share = decode_error_share(args, &d)?;
        let webhook_allow = Setting::layered(
            "webhook_allow",
            listed(&args.webhook_allow),
            d.webhook_allow.take(),
        );
        let webhook_guard = WebhookGuard::parse(&webhook_allow.or_else(Vec::new).get())?;
        let parallelism = Setting::layered("parallelism", args.parallelism, d.parallelism)
            .or(2)
            .get()
            .max(1);
        Ok(Settings {
            service,
            listen: listen(args, &d),
            db: Setting::layered("db", args.db.clone(), d.db.take())
                .or_else(|| PathBuf::from("tessera-dispatcher.db"))
                .get(),
            staging_dir: Setting::layered(
                "staging_dir",
                args.staging_dir.clone(),
                d.staging_dir.take(),
            )
            .or_else(|| PathBuf::from("/var/tmp/tessera-dispatcher"))
            .get(),
            buckets,
            upload_bucket,
            tokens,
            webhook_secret: webhook_secret(d.webhook_secret.take()),
            segment_seconds: Setting::layered(
                "segment_seconds",
                args.segment_seconds,
                d.segment_seconds,
            )
            .or(10.0)
            .get(),
            parallelism,
            queue_window: Setting::layered("queue_window", args.queue_window, d.queue_window)
                .or(4 * parallelism)
                .get()
                .max(1),
            watches,
            watch_interval: Duration::from_secs(
                Setting::layered(
                    "watch_interval_seconds",
                    args.watch_interval_seconds,
                    d.watch_interval_seconds,
                )
                .or(10)
                .get()
                .max(1),
            ),
            s3_events_queue,
            max_decode_error_share,
            max_input_frames: Setting::layered(
                "max_input_frames",
                args.max_input_frames,
                d.max_input_frames,
            )
            .optional(),
            webhook_guard,
            limits,
            scopes,
            uploads,
            http: http_limits(args, &d),
            task_deadline: Setting::layered(
                "task_deadline_seconds",
                args.task_deadline_seconds,
                d.task_deadline_seconds,
            )
            .optional()
            .map_or(tessera_engine::DEFAULT_TASK_DEADLINE, seconds_at_least_one),
            whole_max_seconds: Setting::layered(
                "whole_input_max_seconds",
                args.whole_input_max_seconds,
                d.whole_input_max_seconds,
            )
            .or(tessera_engine::DEFAULT_WHOLE_MAX_SECONDS)
            .get()
            .max(0.0),
            cut_on_workers: Setting::layered(
                "cut_on_workers",
                args.cut_on_workers,
                d.cut_on_workers,
            )
            .or(true)
            .get(),
            scaling,
        })
    }
}

/// The buckets jobs may use, and the one uploads by file name go to (one of them; the first
/// by default, "" when none is allowed).
fn job_buckets(
    args: &DispatcherArgs,
    d: &mut DispatcherFile,
) -> Result<(Vec<String>, String), String> {
    let buckets = Setting::layered("buckets", listed(&args.buckets), d.buckets.take())
        .or_else(Vec::new)
        .get();
    let upload_bucket = Setting::layered(
        "upload bucket",
        args.upload_bucket.clone(),
        d.upload_bucket.take(),
    )
    .check_set(
        |b| buckets.contains(b),
        |b| format!("'{b}' is not one of the allowed buckets {buckets:?}"),
    )?
    .or_else(|| buckets.first().cloned().unwrap_or_default())
    .get();
    Ok((buckets, upload_bucket))
}

/// The decode-error share from flag or file, checked to lie in 0..=1.
fn decode_error_share(args: &DispatcherArgs, d: &DispatcherFile) -> Result<f64, String> {
    let share = Setting::layered(
        "max_decode_error_share",
        args.max_decode_error_share,
        d.max_decode_error_share,
    )
    .check_set(
        |v| (0.0..=1.0).contains(v),
        |v| format!("{v}: must be a share between 0 and 1"),
    )?;
    Ok(share
        .or(tessera_engine::DEFAULT_MAX_DECODE_ERROR_SHARE)
        .get())
}

/// A list flag's value: clap gives an empty list when neither the flag nor its variable is set.
fn listed(flag: &[String]) -> Option<Vec<String>> {
    (!flag.is_empty()).then(|| flag.to_vec())
}

/// A duration in whole seconds, at least one.
fn seconds_at_least_one(seconds: u64) -> Duration {
    Duration::from_secs(seconds.max(1))
}

/// The API tokens: `TESSERA_API_TOKENS` (comma-separated) over the file; never a flag, which
/// `ps` would show. At least one is needed.
fn api_tokens(file: Option<Vec<String>>) -> Result<Vec<ApiToken>, String> {
    let env = std::env::var("TESSERA_API_TOKENS").ok().map(|v| {
        v.split(',')
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect()
    });
    let entries: Vec<String> = Setting::layered("api_tokens", env, file)
        .or_else(Vec::new)
        .get();
    if entries.is_empty() {
        return Err("no API tokens: set TESSERA_API_TOKENS or dispatcher.api_tokens".into());
    }
    entries.iter().map(|e| ApiToken::parse(e)).collect()
}

/// The webhook signing key: a non-empty `TESSERA_WEBHOOK_SECRET` over the file (never a flag).
fn webhook_secret(file: Option<String>) -> Option<String> {
    let env = std::env::var("TESSERA_WEBHOOK_SECRET")
        .ok()
        .filter(|s| !s.is_empty());
    Setting::layered("webhook_secret", env, file).optional()
}

/// Refuses a work bucket that jobs may also name.
fn check_work_bucket(work_bucket: &str, buckets: &[String]) -> Result<(), String> {
    if buckets.iter().any(|b| b == work_bucket) {
        return Err(format!(
            "the work bucket '{work_bucket}' may not be one of the allowed buckets: jobs could \
             read and overwrite other jobs' work objects and end markers"
        ));
    }
    Ok(())
}

/// Admission control: jobs at once, per tenant, input size, retention.
fn admission_limits(args: &DispatcherArgs, d: &DispatcherFile) -> AdmissionLimits {
    let retention_days = Setting::layered("retention_days", args.retention_days, d.retention_days)
        .or(30)
        .get()
        .max(1);
    AdmissionLimits {
        running_jobs: Setting::layered(
            "max_running_jobs",
            args.max_running_jobs,
            d.max_running_jobs,
        )
        .or(8)
        .get()
        .max(1),
        jobs_per_tenant: Setting::layered(
            "max_jobs_per_tenant",
            args.max_jobs_per_tenant,
            d.max_jobs_per_tenant,
        )
        .or(100)
        .get()
        .max(1),
        input_bytes: Setting::layered("max_input_bytes", args.max_input_bytes, d.max_input_bytes)
            .or(64 << 30)
            .get(),
        retention: Duration::from_secs(retention_days * 86_400),
    }
}

/// The API server's limits against slow and numerous clients.
fn http_limits(args: &DispatcherArgs, d: &DispatcherFile) -> HttpLimits {
    let default = HttpLimits::default();
    let header_timeout = Setting::layered(
        "http_header_timeout_seconds",
        args.http_header_timeout_seconds,
        d.http_header_timeout_seconds,
    );
    let request_timeout = Setting::layered(
        "http_request_timeout_seconds",
        args.http_request_timeout_seconds,
        d.http_request_timeout_seconds,
    );
    let max_connections = Setting::layered(
        "http_max_connections",
        args.http_max_connections,
        d.http_max_connections,
    );
    HttpLimits {
        header_timeout: header_timeout
            .optional()
            .map_or(default.header_timeout, seconds_at_least_one),
        request_timeout: request_timeout
            .optional()
            .map_or(default.request_timeout, seconds_at_least_one),
        max_connections: max_connections.or(default.max_connections).get().max(1),
    }
}

/// The scaling signal's settings, each positive and finite.
fn scaling_settings(args: &DispatcherArgs, d: &DispatcherFile) -> Result<ScalingSettings, String> {
    let default = ScalingSettings::default();
    let slots = |name: &'static str, flag: Option<u32>, file: Option<u32>, default: u32| {
        Setting::layered(name, flag, file)
            .check_set(
                |v| (1..=256).contains(v),
                |v| format!("{v} must be within 1..=256"),
            )
            .map(|s| s.or(default).get())
    };
    let positive = |name: &'static str, flag: Option<f64>, file: Option<f64>, default: f64| {
        Setting::layered(name, flag, file)
            .check_set(
                |v| v.is_finite() && *v > 0.0,
                |v| format!("{v} must be a positive number"),
            )
            .map(|s| s.or(default).get())
    };
    Ok(ScalingSettings {
        target_drain_seconds: positive(
            "scaling_target_seconds",
            args.scaling_target_seconds,
            d.scaling_target_seconds,
            default.target_drain_seconds,
        )?,
        cpu_throughput: positive(
            "scaling_cpu_throughput",
            args.scaling_cpu_throughput,
            d.scaling_cpu_throughput,
            default.cpu_throughput,
        )?,
        gpu_throughput: positive(
            "scaling_gpu_throughput",
            args.scaling_gpu_throughput,
            d.scaling_gpu_throughput,
            default.gpu_throughput,
        )?,
        cpu_slots: slots(
            "scaling_cpu_slots",
            args.scaling_cpu_slots,
            d.scaling_cpu_slots,
            default.cpu_slots,
        )?,
        gpu_slots: slots(
            "scaling_gpu_slots",
            args.scaling_gpu_slots,
            d.scaling_gpu_slots,
            default.gpu_slots,
        )?,
    })
}
