//! The job body of the dispatcher's HTTP API (`POST /v1/jobs`), which the server reads and
//! the CLI writes.
//!
//! Why in the model: one type keeps both sides of the API in step.

use serde::{Deserialize, Serialize};

use crate::encode::{Container, VideoCodec};
use crate::wire::Hardware;

pub use crate::encode::ApiTarget;

/// One requested output of an [`ApiJob`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiOutput {
    /// h264 (default), hevc or av1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codec: Option<VideoCodec>,
    /// Constant quality.
    #[serde(
        default,
        deserialize_with = "crf_away_from_zero",
        skip_serializing_if = "Option::is_none"
    )]
    pub crf: Option<f32>,
    /// Bits per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<u64>,
    /// Target quality: each segment searches its own CRF for this VMAF (no `bitrate` with it;
    /// a `crf` given with it is the first probe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ApiTarget>,
    /// A peak-rate (VBV) cap in bits per second, with a CRF or a target: what a streaming
    /// rung's viewers' links can carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bitrate: Option<u64>,
    /// Encoder preset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Output height.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// HDR sources: "auto" (default: keep in HEVC/AV1, tone-map for H.264), "keep" or
    /// "tonemap".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hdr: Option<crate::hdr::HdrMode>,
    /// mp4 or mkv (default: from the destination's extension).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<Container>,
    /// A streaming package (HLS, DASH or CMAF) instead of a file: its rungs come from
    /// `package.ladder`, and `destination` is a prefix ending in '/'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<crate::package::PackageSpec>,
    /// `s3://bucket/key` of the output (`s3://bucket/prefix/` for a package).
    pub destination: String,
}

/// The body of `POST /v1/jobs`.
///
/// Why here: the dispatcher reads it (and validates it into a plan) and the CLI writes it;
/// one type keeps both sides of the API in step. Fields left unset are not written, so a
/// body says only what the user asked for and the server's defaults apply.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiJob {
    /// `s3://bucket/key` of the source.
    pub input: String,
    /// The outputs (1 to 8): the source is decoded once per segment and encoded once per output.
    pub outputs: Vec<ApiOutput>,
    /// Segment length in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_seconds: Option<f64>,
    /// Priority 0 (lowest) to 9, default 5: higher-priority jobs' segments are queued first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// Webhook: the final job view is POSTed here, HMAC-signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// Measure PSNR/SSIM of the output.
    #[serde(default)]
    pub psnr: bool,
    /// Mix every audio track of more than two channels down to stereo (else 5.1 stays 5.1).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stereo_downmix: bool,
    /// "gpu" (NVENC only), "cpu" (software only) or "any" (default: GPU when GPU workers
    /// are consuming, else CPU).
    #[serde(default, skip_serializing_if = "is_any")]
    pub hardware: Hardware,
}

/// Whether `hardware` is the default, which a body need not state.
fn is_any(hardware: &Hardware) -> bool {
    *hardware == Hardware::Any
}

/// A CRF as written, rounded to `f32` away from zero.
///
/// Why: the API states its range (0 to 51 or 63) on the JSON number, and a nearest rounding
/// would take a number just past a bound (51.0000001, -1e-50) to the bound itself, so the
/// server would accept what the schema refuses. Rounded away from zero, a number past a bound
/// stays past it, and one inside stays inside (the bounds are whole numbers).
pub(crate) fn crf_away_from_zero<'de, D>(d: D) -> Result<Option<f32>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(Option::<f64>::deserialize(d)?.map(f32_away_from_zero))
}

/// `x` as the nearest `f32` no closer to zero than `x`.
pub fn f32_away_from_zero(x: f64) -> f32 {
    let y = x as f32;
    let y64 = f64::from(y);
    if y.is_finite() && y64.abs() < x.abs() {
        // One step further from zero (the bit pattern of a finite f32 grows with its size).
        f32::from_bits(y.to_bits() + 1)
    } else {
        y
    }
}

#[cfg(test)]
mod tests {
    use super::f32_away_from_zero;

    #[test]
    fn a_crf_just_past_a_bound_stays_past_it() {
        assert!(f32_away_from_zero(51.000_000_1) > 51.0);
        assert!(f32_away_from_zero(-1e-50) < 0.0);
        assert_eq!(f32_away_from_zero(51.0), 51.0);
        assert_eq!(f32_away_from_zero(0.0), 0.0);
        assert!((f32_away_from_zero(20.1) - 20.1).abs() < 1e-5);
        assert!(f32_away_from_zero(50.999_999_9) <= 51.0);
    }
}
