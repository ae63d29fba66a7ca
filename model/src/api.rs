//! The job body of the dispatcher's HTTP API (`POST /v1/jobs`), which the server reads and
//! the CLI writes.
//!
//! Why in the model: one type keeps both sides of the API in step.

use serde::{Deserialize, Serialize};

use crate::encode::{Container, VideoCodec};
use crate::wire::Hardware;

/// One requested output of an [`ApiJob`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiOutput {
    /// h264 (default), hevc or av1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codec: Option<VideoCodec>,
    /// Constant quality.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crf: Option<f32>,
    /// Bits per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<u64>,
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
