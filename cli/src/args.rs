//! Argument values shared by the local and the remote commands: codec, GPU and progress
//! choices, and bitrate parsing.
//!
//! Why a leaf module: `config.rs` (the `transcode` flags and the command list) and
//! `remote.rs` (the `submit` flags) both use these; here neither imports the other for them.

use anyhow::{bail, Context};
use clap::ValueEnum;
use serde::Deserialize;
use tessera_model::encode::VideoCodec;

/// Whether `tessera transcode` encodes on NVENC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuChoice {
    /// NVENC when NVML finds a card with free sessions, else the software encoders.
    #[default]
    Auto,
    /// Software encoders only.
    Off,
    /// NVENC only: fail when there is no usable card.
    Require,
    /// Decode and scale on a card (NVDEC, scale_cuda), encode with the software encoders:
    /// for cards without NVENC (A100, H100, H200); fail when there is no usable card.
    Decode,
}

/// HDR handling on the command line (see `tessera_model::hdr::HdrMode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HdrArg {
    /// Keep HDR in HEVC/AV1; tone-map to SDR for H.264.
    #[default]
    Auto,
    /// Keep HDR whatever the codec.
    Keep,
    /// Tone-map to BT.709 SDR.
    Tonemap,
}

impl From<HdrArg> for tessera_model::hdr::HdrMode {
    fn from(a: HdrArg) -> Self {
        match a {
            HdrArg::Auto => Self::Auto,
            HdrArg::Keep => Self::Keep,
            HdrArg::Tonemap => Self::Tonemap,
        }
    }
}

/// Video codecs on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CodecArg {
    /// H.264 (libx264).
    H264,
    /// HEVC (libx265).
    Hevc,
    /// AV1 (libsvtav1).
    Av1,
}

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProgressMode {
    /// A bar on a terminal, plain lines otherwise.
    Auto,
    /// A progress bar.
    Bar,
    /// One plain line per second.
    Plain,
    /// JSON lines.
    Json,
    /// Nothing.
    None,
}

impl From<CodecArg> for VideoCodec {
    fn from(codec: CodecArg) -> Self {
        match codec {
            CodecArg::H264 => VideoCodec::H264,
            CodecArg::Hevc => VideoCodec::Hevc,
            CodecArg::Av1 => VideoCodec::Av1,
        }
    }
}

/// Parses "2500k", "4M", "800000" into bits per second.
pub fn parse_bitrate(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1_000.0),
        Some('m' | 'M') => (&t[..t.len() - 1], 1_000_000.0),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .with_context(|| format!("bitrate '{s}' is not a number"))?;
    if !(v.is_finite() && v > 0.0) {
        bail!("bitrate '{s}' must be positive");
    }
    Ok((v * mult).round() as u64)
}
