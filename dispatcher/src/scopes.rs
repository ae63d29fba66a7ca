//! Which objects a tenant's jobs may read and write: per-tenant prefixes (a bucket and a key
//! prefix), against which every input, destination and package prefix of a job is checked
//! at submission (review N1).
//!
//! Why: the bucket allow-list let one tenant submit another's upload as its input, write over
//! its outputs, and (through a refused second destination) have them deleted. A tenant's jobs
//! now read and write only under its own prefixes; admins keep the whole allow-list.
//!
//! The rules, in one place:
//! - an admin (and the `watch` tenant of watches that name no tenant) may use every key of
//!   every allowed bucket;
//! - a tenant with configured scopes (`tenant=rw:bucket/prefix/`) has those;
//! - a tenant without has `<bucket>/<tenant>/` of every allowed bucket, read and write;
//! - every tenant may read its uploads, `<upload bucket>/uploads/<tenant>/`;
//! - no job may write inside a watched prefix: its output would start another job.

mod check;

use std::collections::BTreeMap;

pub use self::check::check_plan;

/// One scope: a bucket and a key prefix of it (`""`: the whole bucket; otherwise it ends in
/// `/`, so `acme/` never covers `acme2/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix {
    /// The bucket.
    pub bucket: String,
    /// The key prefix, `""` or ending in `/`.
    pub prefix: String,
}

impl Prefix {
    /// Parses `bucket` or `bucket/key/prefix` (a missing trailing `/` is added: a scope is
    /// always a folder). Refuses an invalid bucket name and a prefix that is not a valid key
    /// (`..`, `.`, empty segments, a leading `/`, control characters).
    pub fn parse(s: &str) -> Result<Prefix, String> {
        let s = s.trim();
        let (bucket, prefix) = s.split_once('/').unwrap_or((s, ""));
        crate::job_plan::S3Uri::parse(&format!("s3://{bucket}/x"))
            .map_err(|e| format!("scope '{s}': {e}"))?;
        let prefix = match prefix.trim_end_matches('/') {
            "" if prefix.is_empty() => String::new(),
            "" => return Err(format!("scope '{s}': a prefix of only '/' names no folder")),
            p => format!("{p}/"),
        };
        if !prefix.is_empty() {
            tessera_farm::store::validate_key(&prefix).map_err(|e| format!("scope '{s}': {e}"))?;
        }
        Ok(Prefix {
            bucket: bucket.to_string(),
            prefix,
        })
    }

    /// Whether the object `bucket`/`key` lies under this scope. Keys are compared as the
    /// literal bytes S3 stores (`acme%2Fx` is not under `acme/`); a key S3Uri would refuse
    /// (`..`, `//`) is never covered.
    pub fn covers(&self, bucket: &str, key: &str) -> bool {
        self.bucket == bucket
            && tessera_farm::store::validate_key(key).is_ok()
            && key.starts_with(&self.prefix)
    }

    /// Whether everything under the prefix `prefix` of `bucket` (a package's folder,
    /// `""` or ending in `/`) lies under this scope.
    pub fn covers_folder(&self, bucket: &str, prefix: &str) -> bool {
        self.bucket == bucket && prefix.starts_with(&self.prefix)
    }

    /// Whether this scope and the folder `prefix` of `bucket` share any key: one lies
    /// inside the other.
    pub fn overlaps(&self, bucket: &str, prefix: &str) -> bool {
        self.bucket == bucket
            && (prefix.starts_with(&self.prefix) || self.prefix.starts_with(prefix))
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
    }
}

/// What one principal's jobs may read and write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    /// The tenant (named in refusals).
    pub tenant: String,
    /// Prefixes its jobs may read (inputs).
    pub read: Vec<Prefix>,
    /// Prefixes its jobs may write (destinations, package folders).
    pub write: Vec<Prefix>,
}

/// The farm's tenant scopes: the configured ones, and what the defaults are made of.
#[derive(Debug, Clone, Default)]
pub struct TenantScopes {
    configured: BTreeMap<String, Grant>,
    buckets: Vec<String>,
    upload_bucket: String,
}

impl TenantScopes {
    /// Parses the configured entries, each `tenant=rw:bucket/prefix/` (`r`: read only, `w`:
    /// write only, `rw`: both); every bucket must be one of the allowed `buckets`.
    pub fn parse(
        entries: &[String],
        buckets: &[String],
        upload_bucket: &str,
    ) -> Result<Self, String> {
        let mut configured: BTreeMap<String, Grant> = BTreeMap::new();
        for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            let why = |m: &str| format!("tenant scope '{entry}': {m}");
            let (tenant, rest) = entry
                .split_once('=')
                .ok_or_else(|| why("expected tenant=rw:bucket/prefix/"))?;
            if !crate::auth::valid_tenant(tenant) {
                return Err(why("the tenant name must be 1-64 of [A-Za-z0-9_-]"));
            }
            let (mode, location) = rest
                .split_once(':')
                .ok_or_else(|| why("expected r:, w: or rw: before the location"))?;
            let (read, write) = match mode {
                "r" => (true, false),
                "w" => (false, true),
                "rw" | "wr" => (true, true),
                _ => return Err(why("the access must be r, w or rw")),
            };
            let scope = Prefix::parse(location).map_err(|e| why(&e))?;
            if !buckets.contains(&scope.bucket) {
                return Err(why(&format!(
                    "bucket '{}' is not one of the allowed buckets {buckets:?}",
                    scope.bucket
                )));
            }
            let grant = configured.entry(tenant.to_string()).or_default();
            grant.tenant = tenant.to_string();
            if read {
                grant.read.push(scope.clone());
            }
            if write {
                grant.write.push(scope);
            }
        }
        Ok(TenantScopes {
            configured,
            buckets: buckets.to_vec(),
            upload_bucket: upload_bucket.to_string(),
        })
    }

    /// Whether `tenant` has configured scopes.
    pub fn is_configured(&self, tenant: &str) -> bool {
        self.configured.contains_key(tenant)
    }

    /// What the jobs of `tenant` may read and write (`admin`: every allowed bucket whole).
    pub fn grant(&self, tenant: &str, admin: bool) -> Grant {
        let whole = |b: &String| Prefix {
            bucket: b.clone(),
            prefix: String::new(),
        };
        if admin {
            let all: Vec<Prefix> = self.buckets.iter().map(whole).collect();
            return Grant {
                tenant: tenant.to_string(),
                read: all.clone(),
                write: all,
            };
        }
        let mut grant = self.configured.get(tenant).cloned().unwrap_or_else(|| {
            let own: Vec<Prefix> = self
                .buckets
                .iter()
                .map(|b| Prefix {
                    bucket: b.clone(),
                    prefix: format!("{tenant}/"),
                })
                .collect();
            Grant {
                tenant: tenant.to_string(),
                read: own.clone(),
                write: own,
            }
        });
        grant.tenant = tenant.to_string();
        if !self.upload_bucket.is_empty() {
            grant.read.push(Prefix {
                bucket: self.upload_bucket.clone(),
                prefix: crate::uploads::upload_prefix(tenant),
            });
        }
        grant
    }
}

#[cfg(test)]
mod tests;
