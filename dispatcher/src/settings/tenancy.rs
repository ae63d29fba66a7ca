//! The tenancy settings: each tenant's object scopes and the limits on upload URLs.
//!
//! Why a file apart: settings.rs layers the rest; these three belong together (what a tenant
//! may touch, and how much it may upload) and are resolved from the allowed buckets.

use tessera_farm::config::Setting;

use super::{listed, DispatcherArgs, DispatcherFile};
use crate::scopes::TenantScopes;
use crate::uploads::UploadLimits;

/// The default of `max_upload_urls`: URLs one tenant may be given per 15 minutes (the URLs'
/// lifetime, so also the most it can hold valid at once).
pub const DEFAULT_UPLOAD_URLS: u32 = 100;

/// The tenant scopes: `--tenant-scope` / `TESSERA_TENANT_SCOPES` (comma-separated) over the
/// file's `tenant_scopes`; each bucket must be an allowed one.
pub(super) fn tenant_scopes(
    args: &DispatcherArgs,
    d: &mut DispatcherFile,
    buckets: &[String],
    upload_bucket: &str,
) -> Result<TenantScopes, String> {
    let entries = Setting::layered(
        "tenant_scopes",
        listed(&args.tenant_scope),
        d.tenant_scopes.take(),
    )
    .or_else(Vec::new)
    .get();
    TenantScopes::parse(&entries, buckets, upload_bucket)
}

/// The upload URL limits: the largest upload (default: the largest input, since a larger
/// upload could never be transcoded) and URLs per tenant per 15 minutes.
pub(super) fn upload_limits(
    args: &DispatcherArgs,
    d: &DispatcherFile,
    max_input_bytes: u64,
) -> Result<UploadLimits, String> {
    let max_bytes = Setting::layered(
        "max_upload_bytes",
        args.max_upload_bytes,
        d.max_upload_bytes,
    )
    .check_set(|v| *v > 0, |v| format!("{v} must be at least 1"))?
    .or(max_input_bytes)
    .get();
    let urls = Setting::layered("max_upload_urls", args.max_upload_urls, d.max_upload_urls)
        .check_set(|v| *v > 0, |v| format!("{v} must be at least 1"))?
        .or(DEFAULT_UPLOAD_URLS)
        .get();
    Ok(UploadLimits {
        max_bytes,
        urls_per_window: urls,
    })
}
