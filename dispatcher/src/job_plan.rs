//! What a job asks for, validated: its input, outputs and settings as the runner executes
//! them and the database stores them.

use serde::{Deserialize, Serialize};
use tessera_model::encode::{Container, RenditionSpec};

/// An `s3://bucket/key` location.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Uri {
    /// Bucket.
    pub bucket: String,
    /// Key.
    pub key: String,
}

impl S3Uri {
    /// Parses and validates `s3://bucket/key`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let rest = s
            .strip_prefix("s3://")
            .ok_or_else(|| format!("'{s}' is not an s3:// URI"))?;
        let (bucket, key) = rest
            .split_once('/')
            .ok_or_else(|| format!("'{s}' has no key"))?;
        let bucket_ok = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !bucket_ok {
            return Err(format!("'{bucket}' is not a valid bucket name"));
        }
        tessera_farm::store::validate_key(key).map_err(|e| e.to_string())?;
        if key.ends_with('/') {
            return Err(format!("'{s}' names a prefix, not an object"));
        }
        Ok(S3Uri {
            bucket: bucket.into(),
            key: key.into(),
        })
    }
}

impl std::fmt::Display for S3Uri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.key)
    }
}

/// One validated output of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedOutput {
    /// The destination.
    pub destination: S3Uri,
    /// Output container.
    pub container: Container,
    /// The rendition (named `out{index}`).
    pub rendition: RenditionSpec,
}

/// A validated job as the runner executes it (stored as the job's request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobPlan {
    /// The source.
    pub input: S3Uri,
    /// The outputs, each a rendition of the same segments.
    pub outputs: Vec<PlannedOutput>,
    /// Where segments may be encoded: "gpu", "cpu" or "any" (default).
    #[serde(default)]
    pub hardware: tessera_model::wire::Hardware,
    /// Scheduling priority, 0 (lowest) to 9: higher-priority jobs' segments go first.
    #[serde(default = "default_priority")]
    pub priority: u8,
    /// Segment length.
    pub segment_seconds: f64,
    /// Measure PSNR/SSIM.
    pub psnr: bool,
    /// Mix tracks of more than two channels down to stereo.
    #[serde(default)]
    pub stereo_downmix: bool,
    /// Where to POST the job's final state (HMAC-signed).
    #[serde(default)]
    pub callback_url: Option<String>,
    /// A streaming package: its spec and the prefix its files go under.
    #[serde(default)]
    pub package: Option<PlannedPackage>,
}

/// A validated streaming package output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedPackage {
    /// What to package.
    pub spec: tessera_model::package::PackageSpec,
    /// The bucket.
    pub bucket: String,
    /// The key prefix (ends in '/'); files go under it as `master.m3u8`, `v0/...`.
    pub prefix: String,
}

impl PlannedPackage {
    /// Parses and validates an `s3://bucket/prefix/` destination.
    pub fn parse_destination(s: &str) -> Result<(String, String), String> {
        if !s.ends_with('/') {
            return Err(format!(
                "'{s}': a package destination is a prefix ending in '/'"
            ));
        }
        // The prefix is valid when a file under it is a valid key.
        let probe = S3Uri::parse(&format!("{s}master.m3u8"))?;
        let prefix = probe.key.trim_end_matches("master.m3u8").to_string();
        Ok((probe.bucket, prefix))
    }
}

/// The priority of jobs that do not ask for one.
pub fn default_priority() -> u8 {
    5
}

#[cfg(test)]
mod tests {
    use super::S3Uri;

    #[test]
    fn s3_uris() {
        let u = S3Uri::parse("s3://in-bucket/videos/a b.mp4").unwrap();
        assert_eq!(
            (u.bucket.as_str(), u.key.as_str()),
            ("in-bucket", "videos/a b.mp4")
        );
        assert_eq!(u.to_string(), "s3://in-bucket/videos/a b.mp4");
        for bad in [
            "http://x/y",
            "s3://bucket",
            "s3://B/x",
            "s3://ok-bucket/../x",
            "s3://ok-bucket/dir/",
        ] {
            assert!(S3Uri::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn package_prefixes() {
        use super::PlannedPackage;
        assert_eq!(
            PlannedPackage::parse_destination("s3://out-b/shows/ep1/").unwrap(),
            ("out-b".to_string(), "shows/ep1/".to_string())
        );
        assert_eq!(
            PlannedPackage::parse_destination("s3://out-b/").unwrap(),
            ("out-b".to_string(), String::new())
        );
        for bad in ["s3://out-b/ep1", "s3://out-b/../x/", "s3://B/x/"] {
            assert!(PlannedPackage::parse_destination(bad).is_err(), "{bad}");
        }
    }
}
