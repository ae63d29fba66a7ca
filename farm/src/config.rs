//! Connection settings shared by the services (worker, dispatcher): RabbitMQ and S3.
//!
//! Why shared: both services must agree on the broker, the store and the work bucket; one
//! definition gives them the same flags, `TESSERA_*` variables and config-file keys.

use std::time::Duration;

use serde::Deserialize;

use crate::queue::RabbitConfig;
use crate::store::S3Config;

/// Reads a service's TOML config file (its default when no file is given); errors name the file.
///
/// Why shared: every binary layers its file the same way under env and flags.
pub fn read_config_file<T: serde::de::DeserializeOwned + Default>(
    path: Option<&std::path::Path>,
) -> Result<T, String> {
    let Some(p) = path else {
        return Ok(T::default());
    };
    let text =
        std::fs::read_to_string(p).map_err(|e| format!("config file {}: {e}", p.display()))?;
    toml::from_str(&text).map_err(|e| format!("config file {}: {e}", p.display()))
}

/// Flags (and their `TESSERA_*` environment variables) for the broker and the store.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServiceArgs {
    /// RabbitMQ URI, e.g. amqp://user:pass@host:5672/%2f [default: amqp://guest:guest@127.0.0.1:5672/%2f].
    #[arg(long, env = "TESSERA_AMQP_URL", hide_env_values = true)]
    pub amqp_url: Option<String>,
    /// Messages a segment may be delivered before it is dead-lettered [default: 5].
    #[arg(long, env = "TESSERA_DELIVERY_LIMIT")]
    pub delivery_limit: Option<u32>,
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
        let secret = args
            .s3_secret_access_key
            .clone()
            .or_else(|| std::env::var("TESSERA_S3_SECRET_ACCESS_KEY").ok())
            .or_else(|| file.s3_secret_access_key.clone());
        let amqp = args
            .amqp_url
            .clone()
            .or_else(|| file.amqp_url.clone())
            .unwrap_or_else(|| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
        let mut rabbit = RabbitConfig::new(amqp);
        rabbit.delivery_limit = args
            .delivery_limit
            .or(file.delivery_limit)
            .unwrap_or(5)
            .max(1);
        let endpoint = args
            .s3_endpoint
            .clone()
            .or_else(|| file.s3_endpoint.clone());
        let mut s3 = S3Config::new(
            args.s3_region
                .clone()
                .or_else(|| file.s3_region.clone())
                .unwrap_or_else(|| "us-east-1".into()),
        );
        s3.force_path_style = args
            .s3_path_style
            .or(file.s3_path_style)
            .unwrap_or(endpoint.is_some());
        s3.endpoint = endpoint;
        s3.public_endpoint = args
            .s3_public_endpoint
            .clone()
            .or_else(|| file.s3_public_endpoint.clone());
        s3.access_key_id = args
            .s3_access_key_id
            .clone()
            .or_else(|| file.s3_access_key_id.clone());
        s3.secret_access_key = secret;
        s3.op_timeout = Duration::from_secs(300);
        let work_bucket = args
            .work_bucket
            .clone()
            .or_else(|| file.work_bucket.clone())
            .ok_or(
                "no work bucket: set --work-bucket, TESSERA_WORK_BUCKET or service.work_bucket",
            )?;
        Ok(ServiceConfig {
            rabbit,
            s3,
            work_bucket,
        })
    }
}
