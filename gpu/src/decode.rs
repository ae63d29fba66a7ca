//! What NVDEC can decode, by GPU generation: codec, chroma subsampling and bit depth.
//!
//! The worker asks this before planning a GPU decode: an input NVDEC cannot take (e.g. AV1
//! on a T4, 4:2:2 H.264 anywhere before Blackwell) is decoded in software and uploaded.
//! Source: NVIDIA's Video Codec SDK decoder support matrix, simplified and kept on the
//! conservative side (a format left out only costs a software decode, a format wrongly
//! claimed fails the segment).

use serde::{Deserialize, Serialize};

/// A compressed video codec the worker may need to decode.
///
/// Why: NVDEC support differs per codec and generation; the worker maps the probed input
/// codec to one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Codec {
    /// MPEG-2 Video.
    Mpeg2,
    /// H.264 / AVC.
    H264,
    /// H.265 / HEVC.
    Hevc,
    /// VP8.
    Vp8,
    /// VP9.
    Vp9,
    /// AV1.
    Av1,
}

/// Chroma subsampling of the decoded pictures.
///
/// Why: NVDEC on the supported models decodes 4:2:0 (and HEVC 4:4:4) but not 4:2:2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChromaFormat {
    /// 4:2:0 (almost all distribution video).
    Yuv420,
    /// 4:2:2 (broadcast and camera masters).
    Yuv422,
    /// 4:4:4 (screen content, some masters).
    Yuv444,
}

/// One input's decode requirements: codec, chroma format and bit depth.
///
/// Why: this is the unit the support check and a [`crate::SessionNeed`] speak in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DecodeFormat {
    /// The compressed codec.
    pub codec: Codec,
    /// The chroma subsampling.
    pub chroma: ChromaFormat,
    /// Bits per sample (8, 10 or 12).
    pub bit_depth: u8,
}

impl DecodeFormat {
    /// A format from its three parts.
    pub fn new(codec: Codec, chroma: ChromaFormat, bit_depth: u8) -> Self {
        DecodeFormat {
            codec,
            chroma,
            bit_depth,
        }
    }

    /// 8-bit 4:2:0 of `codec`: the common case.
    pub fn yuv420_8bit(codec: Codec) -> Self {
        DecodeFormat::new(codec, ChromaFormat::Yuv420, 8)
    }
}

/// The NVIDIA architecture of a card, as far as NVDEC/NVENC features go.
///
/// Why: codec support follows the chip generation, not the marketing name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Generation {
    /// Turing (T4, RTX 20xx, GTX 16xx, Quadro RTX).
    Turing,
    /// Ampere (A2/A10/A16/A30/A40/A100, RTX 30xx, RTX A-series).
    Ampere,
    /// Ada Lovelace (L4, L20, L40, L40S, RTX 40xx, RTX Ada).
    Ada,
    /// Hopper (H100, H200, GH200).
    Hopper,
    /// Blackwell (RTX 50xx).
    Blackwell,
    /// Not recognised: assume the least.
    Unknown,
}

impl Generation {
    /// Whether this generation's NVDEC decodes `format`.
    ///
    /// Why: the single place the codec/chroma/bit-depth matrix lives.
    pub fn nvdec_decodes(self, format: &DecodeFormat) -> bool {
        use ChromaFormat::*;
        use Codec::*;
        let depth = format.bit_depth;
        let chroma = format.chroma;
        if self == Generation::Unknown {
            // Conservative: what every NVDEC since Pascal decodes.
            return matches!(format.codec, H264 | Hevc) && chroma == Yuv420 && depth == 8;
        }
        let blackwell = self == Generation::Blackwell;
        match format.codec {
            Mpeg2 => self != Generation::Hopper && chroma == Yuv420 && depth == 8,
            H264 => match chroma {
                Yuv420 => depth == 8 || (blackwell && depth == 10),
                Yuv422 => blackwell && matches!(depth, 8 | 10),
                Yuv444 => false,
            },
            Hevc => match chroma {
                Yuv420 | Yuv444 => matches!(depth, 8 | 10 | 12),
                Yuv422 => blackwell && matches!(depth, 8 | 10 | 12),
            },
            Vp8 => self != Generation::Hopper && chroma == Yuv420 && depth == 8,
            Vp9 => chroma == Yuv420 && matches!(depth, 8 | 10 | 12),
            Av1 => self != Generation::Turing && chroma == Yuv420 && matches!(depth, 8 | 10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turing_has_no_av1_decode() {
        let av1 = DecodeFormat::yuv420_8bit(Codec::Av1);
        assert!(!Generation::Turing.nvdec_decodes(&av1));
        assert!(Generation::Ada.nvdec_decodes(&av1));
        assert!(Generation::Ampere.nvdec_decodes(&av1));
        assert!(Generation::Hopper.nvdec_decodes(&av1));
    }

    #[test]
    fn h264_422_and_10bit_only_on_blackwell() {
        let f422 = DecodeFormat::new(Codec::H264, ChromaFormat::Yuv422, 8);
        let f10 = DecodeFormat::new(Codec::H264, ChromaFormat::Yuv420, 10);
        for g in [Generation::Turing, Generation::Ampere, Generation::Ada] {
            assert!(!g.nvdec_decodes(&f422));
            assert!(!g.nvdec_decodes(&f10));
        }
        assert!(Generation::Blackwell.nvdec_decodes(&f422));
        assert!(Generation::Blackwell.nvdec_decodes(&f10));
    }

    #[test]
    fn hevc_444_yes_422_no_before_blackwell() {
        let f444 = DecodeFormat::new(Codec::Hevc, ChromaFormat::Yuv444, 10);
        let f422 = DecodeFormat::new(Codec::Hevc, ChromaFormat::Yuv422, 10);
        assert!(Generation::Turing.nvdec_decodes(&f444));
        assert!(!Generation::Ada.nvdec_decodes(&f422));
        assert!(!Generation::Ada.nvdec_decodes(&DecodeFormat::new(
            Codec::Vp9,
            ChromaFormat::Yuv444,
            8
        )));
    }

    #[test]
    fn unknown_generation_is_conservative() {
        let g = Generation::Unknown;
        assert!(g.nvdec_decodes(&DecodeFormat::yuv420_8bit(Codec::H264)));
        assert!(g.nvdec_decodes(&DecodeFormat::yuv420_8bit(Codec::Hevc)));
        assert!(!g.nvdec_decodes(&DecodeFormat::yuv420_8bit(Codec::Vp9)));
        assert!(!g.nvdec_decodes(&DecodeFormat::new(Codec::Hevc, ChromaFormat::Yuv420, 10)));
    }
}
