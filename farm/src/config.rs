//! Settings shared by every binary: reading the config file, layering each value, and the
//! connection settings of the services (worker, dispatcher): RabbitMQ and S3.
//!
//! Why shared: the CLI, the dispatcher and the worker layer their settings the same way
//! (defaults, then the TOML file, then `TESSERA_*` env and flags): file.rs reads the file,
//! layers.rs layers one value. Both services must also agree on the broker, the store and the
//! work bucket; one definition gives them the same flags, variables and config-file keys.

mod file;
mod layers;

use std::time::Duration;

use serde::Deserialize;

pub use self::file::{read_config_file, read_toml_file, ConfigFileError};
pub use self::layers::{Setting, SettingError};

use crate::queue::RabbitConfig;
use crate::store::S3Config;

/// Flags (and their `TESSERA_*` environment variables) for the broker and the store.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServiceArgs {
    /// RabbitMQ URI, e.g. amqp://user:pass@host:5672/%2f [default: amqp://guest:guest@127.0.0.1:5672/%2f].
    #[arg(long, env = "TESSERA_AMQP_URL", hide_env_values = true)]
    pub amqp_url: Option<String>,
    /// Attempts of a task that may fail on their own (child crashed, out of memory or time,
    /// a retryable error) before the task fails its job [default: 5].
    #[arg(long, env = "TESSERA_DELIVERY_LIMIT")]
    pub delivery_limit: Option<u32>,
    /// Deliveries of a task that may end with their worker gone (killed, node or connection
    /// lost) before the broker dead-letters it; at least --delivery-limit [default: 20].
    #[arg(long, env = "TESSERA_LOST_LIMIT")]
    pub lost_limit: Option<u32>,
    /// S3 endpoint URL (MinIO, Garage, Ceph); unset for AWS.
    #[arg(long, env = "TESSERA_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// S3 endpoint as clients outside the farm reach it, named in presigned upload URLs
    /// (the dispatcher's `POST /v1/uploads`) [default: --s3-endpoint].
    #[arg(long, env = "TESSERA_S3_PUBLIC_ENDPOINT")]
    pub s3_public_endpoint: Option<String>,
    /// S3 region [default: us-east-1].
    #[arg(long, env = "TESSERA_S3_REGION")]
    pub s3_region: Option<String>,
    /// S3 access key id (else the AWS default credential chain).
    #[arg(long, env = "TESSERA_S3_ACCESS_KEY_ID")]
    pub s3_access_key_id: Option<String>,
    /// S3 secret key (environment or config file only: flags show up in `ps`).
    #[arg(skip)]
    pub s3_secret_access_key: Option<String>,
    /// Path-style addressing (MinIO, Garage) [default: true when an endpoint is set].
    #[arg(long, env = "TESSERA_S3_PATH_STYLE")]
    pub s3_path_style: Option<bool>,
    /// The bucket of the work area (chunks, encoded segments, audio).
    #[arg(long, env = "TESSERA_WORK_BUCKET")]
    pub work_bucket: Option<String>,
}

/// The `[service]` table of a config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceFile {
    amqp_url: Option<String>,
    delivery_limit: Option<u32>,
    lost_limit: Option<u32>,
    s3_endpoint: Option<String>,
    s3_public_endpoint: Option<String>,
    s3_region: Option<String>,
    s3_access_key_id: Option<String>,
    s3_secret_access_key: Option<String>,
    s3_path_style: Option<bool>,
    work_bucket: Option<String>,
}

/// Resolved connection settings.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The broker.
    pub rabbit: RabbitConfig,
    /// The store.
    pub s3: S3Config,
    /// The work-area bucket.
    pub work_bucket: String,
}

impl ServiceConfig {
    /// Flags/env over the file over defaults. The secret key comes from
    /// `TESSERA_S3_SECRET_ACCESS_KEY` or the file.
    pub fn resolve(args: &ServiceArgs, file: &ServiceFile) -> Result<Self, String> {
        let amqp = Setting::layered("amqp_url", args.amqp_url.clone(), file.amqp_url.clone())
            .or_else(|| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
            .get();
        let mut rabbit = RabbitConfig::new(amqp);
        rabbit.delivery_limit =
            Setting::layered("delivery_limit", args.delivery_limit, file.delivery_limit)
                .or(5)
                .get()
                .max(1);
        rabbit.lost_limit = Setting::layered("lost_limit", args.lost_limit, file.lost_limit)
            .or(20)
            .get()
            .max(rabbit.delivery_limit);
        let work_bucket = Setting::layered(
            "work_bucket",
            args.work_bucket.clone(),
            file.work_bucket.clone(),
        )
        .optional()
        .ok_or("no work bucket: set --work-bucket, TESSERA_WORK_BUCKET or service.work_bucket")?;
        Ok(ServiceConfig {
            rabbit,
            s3: s3_config(args, file),
            work_bucket,
        })
    }
}

/// The store's settings; path-style addressing defaults to on when an endpoint is set.
fn s3_config(args: &ServiceArgs, file: &ServiceFile) -> S3Config {
    let text = |name, flag: &Option<String>, file: &Option<String>| {
        Setting::layered(name, flag.clone(), file.clone()).optional()
    };
    let endpoint = text("s3_endpoint", &args.s3_endpoint, &file.s3_endpoint);
    let region = text("s3_region", &args.s3_region, &file.s3_region);
    let mut s3 = S3Config::new(region.unwrap_or_else(|| "us-east-1".into()));
    s3.force_path_style = Setting::layered("s3_path_style", args.s3_path_style, file.s3_path_style)
        .or(endpoint.is_some())
        .get();
    s3.endpoint = endpoint;
    s3.public_endpoint = text(
        "s3_public_endpoint",
        &args.s3_public_endpoint,
        &file.s3_public_endpoint,
    );
    s3.access_key_id = text(
        "s3_access_key_id",
        &args.s3_access_key_id,
        &file.s3_access_key_id,
    );
    // Never a flag (flags show up in `ps`): the environment or the file.
    let secret_flag = args
        .s3_secret_access_key
        .clone()
        .or_else(|| std::env::var("TESSERA_S3_SECRET_ACCESS_KEY").ok());
    s3.secret_access_key = text(
        "s3_secret_access_key",
        &secret_flag,
        &file.s3_secret_access_key,
    );
    s3.op_timeout = Duration::from_secs(300);
    s3
}
