//! HDR data: a rendition's HDR handling, an HDR source's static metadata, and which
//! transfers are HDR (the encode's rules on them are `settings::hdr`).
//!
//! Why at the bottom: the probe's colour info and the rendition spec both carry these, so
//! they sit below both.

use serde::{Deserialize, Serialize};

/// A rendition's HDR handling (job setting `hdr`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HdrMode {
    /// Keep HDR where the codec carries it at 10 bits (HEVC, AV1); tone-map to SDR for H.264,
    /// whose 8-bit output would otherwise band or, on SDR screens, look washed out.
    #[default]
    Auto,
    /// Keep the transfer, primaries and static metadata whatever the codec.
    Keep,
    /// Tone-map to BT.709 SDR, 8 bits.
    Tonemap,
}

/// Mastering display colour volume (SMPTE ST 2086) in the units HEVC's SEI uses: chromaticity
/// in 1/50000, luminance in 1/10000 cd/m².
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasteringDisplay {
    /// Green, blue and red primaries (x, y), in that order (x265's G B R).
    pub primaries: [[u32; 2]; 3],
    /// White point (x, y).
    pub white: [u32; 2],
    /// Largest luminance.
    pub max_luminance: u32,
    /// Smallest luminance.
    pub min_luminance: u32,
}

/// HDR10 static metadata of a source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HdrMetadata {
    /// The mastering display, if stated.
    pub mastering: Option<MasteringDisplay>,
    /// Content light level (MaxCLL, MaxFALL) in cd/m², if stated.
    pub light_level: Option<(u32, u32)>,
}

/// Whether a transfer (FFmpeg name) is HDR: PQ (HDR10) or HLG.
pub fn is_hdr_transfer(transfer: Option<&str>) -> bool {
    matches!(transfer, Some("smpte2084" | "arib-std-b67"))
}
