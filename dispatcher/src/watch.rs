//! Jobs from bucket uploads. A watch is `{bucket, prefix, outputs profile}`; uploads under a
//! watched prefix reach the dispatcher two ways:
//! - a poller lists every watched prefix (ListObjectsV2) each interval, for stores without
//!   notifications such as Garage ([`ingest`]);
//! - S3 event notifications (AWS/MinIO `Records` JSON) consumed from a RabbitMQ queue, where
//!   MinIO publishes them directly ([`s3events`]).
//!
//! Either way an object version (bucket, key, ETag) is claimed in the database before its job
//! is built, so it starts exactly one job, across both paths and across restarts.

mod ingest;
mod s3events;
#[cfg(test)]
mod s3events_fuzz;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tessera_farm::queue::Queue;
use tessera_model::api::{ApiJob, ApiOutput};
use tessera_model::encode::{Container, VideoCodec};
use tokio_util::sync::CancellationToken;

use crate::api::AppState;
use crate::job_plan::S3Uri;
use crate::jobspec::validate;
use crate::scopes::{Prefix, TenantScopes};

/// One watched prefix and the output its uploads get unless a sidecar says otherwise.
///
/// Why: operators map upload areas to delivery formats once, in the config, instead of
/// calling the API for every upload.
#[derive(Debug, Clone, PartialEq)]
pub struct Watch {
    /// The tenant that owns the jobs its uploads start (`watch` unless the config names
    /// one): its quota and scopes apply to them.
    pub tenant: String,
    /// The bucket uploads arrive in.
    pub bucket: String,
    /// The key prefix watched (`""`: the whole bucket).
    pub prefix: String,
    /// The bucket outputs go to.
    pub output_bucket: String,
    /// The key prefix outputs go under (the upload's key relative to `prefix` follows it).
    pub output_prefix: String,
    /// Output codec.
    pub codec: VideoCodec,
    /// Constant quality (`None`: the codec's default).
    pub crf: Option<f32>,
    /// Encoder preset (`None`: the codec's default).
    pub preset: Option<String>,
    /// Output height (`None`: the source's).
    pub height: Option<u32>,
    /// Output container; also gives the output's extension.
    pub container: Container,
    /// A streaming package instead of a file (the codec settings then come from its
    /// ladder): each upload's package goes under its own prefix, named like its file would be.
    pub package: Option<tessera_model::package::PackageSpec>,
}

/// The watched prefixes of `watches`, as scopes: a job may write inside none of them (its
/// output would start another job).
pub fn watched_prefixes(watches: &[Watch]) -> Vec<Prefix> {
    watches
        .iter()
        .map(|w| Prefix {
            bucket: w.bucket.clone(),
            prefix: w.prefix.clone(),
        })
        .collect()
}

/// One `[[dispatcher.watch]]` table of the config file.
///
/// Why: the file can give a full outputs profile, the `--watch` flag only the locations.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WatchFile {
    tenant: Option<String>,
    bucket: String,
    #[serde(default)]
    prefix: String,
    output_bucket: String,
    #[serde(default)]
    output_prefix: String,
    codec: Option<VideoCodec>,
    crf: Option<f32>,
    preset: Option<String>,
    height: Option<u32>,
    container: Option<Container>,
    package: Option<tessera_model::package::PackageSpec>,
}

impl TryFrom<WatchFile> for Watch {
    type Error = String;

    fn try_from(f: WatchFile) -> Result<Self, String> {
        let file_settings = [
            ("codec", f.codec.is_some()),
            ("crf", f.crf.is_some()),
            ("preset", f.preset.is_some()),
            ("height", f.height.is_some()),
            ("container", f.container.is_some()),
        ];
        if f.package.is_some() {
            if let Some((name, _)) = file_settings.iter().find(|(_, set)| *set) {
                return Err(format!(
                    "watch {}/{}: {name} does not apply to a package (give it per rung in package.ladder)",
                    f.bucket, f.prefix
                ));
            }
        }
        Ok(Watch {
            tenant: f
                .tenant
                .unwrap_or_else(|| crate::auth::WATCH_TENANT.to_string()),
            bucket: f.bucket,
            prefix: f.prefix,
            output_bucket: f.output_bucket,
            output_prefix: f.output_prefix,
            codec: f.codec.unwrap_or(VideoCodec::H264),
            crf: f.crf,
            preset: f.preset,
            height: f.height,
            container: f.container.unwrap_or(Container::Mp4),
            package: f.package,
        })
    }
}

impl fmt::Display for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}/{}={}/{}",
            self.tenant, self.bucket, self.prefix, self.output_bucket, self.output_prefix
        )
    }
}

/// `bucket/prefix` into its parts (no `/`: the whole bucket).
fn location(s: &str) -> (String, String) {
    match s.trim().split_once('/') {
        Some((b, p)) => (b.to_string(), p.to_string()),
        None => (s.trim().to_string(), String::new()),
    }
}

impl Watch {
    /// Parses the `--watch` form `[tenant:]bucket/prefix=output_bucket/output_prefix`
    /// (profile: H.264 with its default quality and preset, MP4; tenant `watch` unless
    /// given). A bucket name has no `:`, so a `:` before the first `/` ends the tenant.
    pub fn parse_flag(s: &str) -> Result<Self, String> {
        let (from, to) = s.split_once('=').ok_or_else(|| {
            format!("--watch '{s}': expected [tenant:]bucket/prefix=output_bucket/output_prefix")
        })?;
        let head = from.trim().split('/').next().unwrap_or("");
        let (tenant, from) = match head.split_once(':') {
            Some((tenant, _)) => (tenant.to_string(), &from.trim()[tenant.len() + 1..]),
            None => (crate::auth::WATCH_TENANT.to_string(), from),
        };
        let ((bucket, prefix), (output_bucket, output_prefix)) = (location(from), location(to));
        Ok(Watch {
            tenant,
            bucket,
            prefix,
            output_bucket,
            output_prefix,
            codec: VideoCodec::H264,
            crf: None,
            preset: None,
            height: None,
            container: Container::Mp4,
            package: None,
        })
    }

    /// Whether `bucket/key` is under this watch.
    pub fn covers(&self, bucket: &str, key: &str) -> bool {
        self.bucket == bucket && key.starts_with(&self.prefix)
    }

    /// The default destination of the upload `key`: its key relative to the prefix, under the
    /// output prefix, with the container's extension.
    pub fn destination(&self, key: &str, container: Container) -> String {
        format!("{}.{}", self.destination_stem(key), container.extension())
    }

    /// The default package destination of the upload `key`: the prefix its file would have
    /// had, without the extension (`s3://out/processed/show/` for `incoming/show.mp4`).
    pub fn package_destination(&self, key: &str) -> String {
        format!("{}/", self.destination_stem(key))
    }

    /// `s3://output_bucket/output_prefix/dir/stem` of the upload `key`.
    fn destination_stem(&self, key: &str) -> String {
        let rel = key.strip_prefix(&self.prefix).unwrap_or(key);
        let rel = rel.trim_start_matches('/');
        let (dir, name) = match rel.rsplit_once('/') {
            Some((d, n)) => (format!("{d}/"), n),
            None => (String::new(), rel),
        };
        let stem = match name.rfind('.') {
            Some(i) if i > 0 => &name[..i],
            _ => name,
        };
        let base = self.output_prefix.trim_end_matches('/');
        let sep = if base.is_empty() { "" } else { "/" };
        format!("s3://{}/{base}{sep}{dir}{stem}", self.output_bucket)
    }

    /// The watch's own outputs profile for the upload `key`.
    pub(super) fn output(&self, key: &str) -> ApiOutput {
        if let Some(spec) = &self.package {
            return ApiOutput {
                codec: None,
                crf: None,
                bitrate: None,
                target: None,
                max_bitrate: None,
                preset: None,
                height: None,
                hdr: None,
                container: None,
                package: Some(spec.clone()),
                destination: self.package_destination(key),
            };
        }
        ApiOutput {
            codec: Some(self.codec),
            crf: self.crf,
            bitrate: None,
            target: None,
            max_bitrate: None,
            preset: self.preset.clone(),
            height: self.height,
            hdr: None,
            container: Some(self.container),
            package: None,
            destination: self.destination(key, self.container),
        }
    }

    /// Checks the watch at startup: valid bucket names and prefixes, buckets the farm may use,
    /// a valid profile, and outputs that do not land in the watched prefix (they would be
    /// transcoded again, forever).
    fn check(&self, buckets: &[String], scopes: &TenantScopes) -> Result<(), String> {
        let me = format!("watch {self}");
        if !crate::auth::valid_tenant(&self.tenant) {
            return Err(format!(
                "{me}: the tenant name must be 1-64 of [A-Za-z0-9_-]"
            ));
        }
        for (bucket, prefix) in [
            (&self.bucket, &self.prefix),
            (&self.output_bucket, &self.output_prefix),
        ] {
            S3Uri::parse(&format!("s3://{bucket}/x")).map_err(|e| format!("{me}: {e}"))?;
            if !prefix.is_empty() {
                tessera_farm::store::validate_key(prefix).map_err(|e| format!("{me}: {e}"))?;
            }
        }
        let out_base = match self.output_prefix.trim_end_matches('/') {
            "" => String::new(),
            p => format!("{p}/"),
        };
        if self.bucket == self.output_bucket && out_base.starts_with(&self.prefix) {
            return Err(format!(
                "{me}: outputs would land inside the watched prefix and be transcoded again"
            ));
        }
        let sample = format!("{}video.mp4", self.prefix);
        let job = ApiJob {
            input: format!("s3://{}/{sample}", self.bucket),
            outputs: vec![self.output(&sample)],
            segment_seconds: None,
            priority: None,
            callback_url: None,
            psnr: false,
            stereo_downmix: false,
            hardware: Default::default(),
        };
        let plan = validate(&job, buckets, 10.0, &Default::default())
            .map_err(|(_, msg)| format!("{me}: {msg}"))?;
        crate::scopes::check_plan(&plan, &self.grant(scopes), &[])
            .map_err(|(_, msg)| format!("{me}: {msg}"))?;
        Ok(())
    }

    /// What the jobs of this watch may read and write: its tenant's scopes (the `watch`
    /// tenant's, unconfigured: every allowed bucket, as before watches had tenants).
    pub(crate) fn grant(&self, scopes: &TenantScopes) -> crate::scopes::Grant {
        let unconfigured_watch =
            self.tenant == crate::auth::WATCH_TENANT && !scopes.is_configured(&self.tenant);
        scopes.grant(&self.tenant, unconfigured_watch)
    }
}

/// Resolves the watches: the `--watch` flags (or `TESSERA_WATCH`) when given, else the file's
/// `[[dispatcher.watch]]` tables; each is checked against the allowed `buckets`.
pub(super) fn resolve(
    flags: &[String],
    file: Option<Vec<WatchFile>>,
    buckets: &[String],
    scopes: &TenantScopes,
) -> Result<Vec<Watch>, String> {
    let watches: Vec<Watch> = if flags.iter().any(|f| !f.trim().is_empty()) {
        let given = flags.iter().filter(|f| !f.trim().is_empty());
        given
            .map(|f| Watch::parse_flag(f))
            .collect::<Result<_, _>>()?
    } else {
        file.unwrap_or_default()
            .into_iter()
            .map(Watch::try_from)
            .collect::<Result<_, _>>()?
    };
    for w in &watches {
        w.check(buckets, scopes)?;
    }
    Ok(watches)
}

/// Checks the S3 events queue name (`None` when unset or empty: events are off).
pub(super) fn events_queue(name: Option<String>) -> Result<Option<String>, String> {
    match name.map(|n| n.trim().to_string()).filter(|n| !n.is_empty()) {
        Some(n) if n.len() > 255 || n.starts_with("amq.") => Err(format!(
            "s3 events queue '{n}': at most 255 characters and not starting with 'amq.'"
        )),
        other => Ok(other),
    }
}

/// Starts the poller (when there are watches) and the S3 event consumer (when `events_queue`
/// is set) as background tasks that end with `shutdown`.
pub(super) fn spawn(
    watches: &[Watch],
    interval: Duration,
    events_queue: Option<&str>,
    state: &Arc<AppState>,
    queue: &Arc<dyn Queue>,
    shutdown: &CancellationToken,
) {
    let ingest = Arc::new(ingest::Ingest::new(state.clone(), watches.to_vec()));
    if !watches.is_empty() {
        tracing::info!(
            watches = watches.len(),
            ?interval,
            "polling watched prefixes"
        );
        tokio::spawn(ingest::poll(ingest.clone(), interval, shutdown.clone()));
    }
    if let Some(name) = events_queue {
        if watches.is_empty() {
            tracing::warn!(
                queue = name,
                "S3 events are consumed but no watch is configured: every event will be ignored"
            );
        }
        let consumer = s3events::consume(ingest, queue.clone(), name.to_string(), shutdown.clone());
        tokio::spawn(consumer);
    }
}

#[cfg(test)]
mod tests;
