//! What to encode and what an encode gives back: codecs, renditions, containers, the GPU
//! knobs, and a segment's encode request and result (the same for the software and GPU paths).
//!
//! Why here, below FFmpeg: the request is planned by the dispatcher, carried by the queue and
//! executed in the media child; all of them read it without linking FFmpeg.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::probe::{ColorInfo, Rational};

/// Video codec of an output rendition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VideoCodec {
    /// H.264 via libx264.
    H264,
    /// HEVC via libx265.
    Hevc,
    /// AV1 via libsvtav1.
    Av1,
}

/// How the encoder spends bits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RateControl {
    /// Constant quality (x264/x265 CRF, SVT-AV1 CRF).
    Crf(f32),
    /// Average bitrate in bits/s with a VBV buffer (max rate = 1.5x, buffer = 2x).
    Bitrate(u64),
}

/// One output rendition: codec, quality and size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenditionSpec {
    /// Name used in object keys (e.g. "720p").
    pub name: String,
    /// Video codec.
    pub codec: VideoCodec,
    /// Rate control.
    pub rate: RateControl,
    /// Encoder preset name (x264/x265: ultrafast..placebo; SVT-AV1: 0..13).
    pub preset: String,
    /// Target height keeping aspect ratio; `None` keeps the source size.
    pub height: Option<u32>,
    /// What becomes of an HDR source (PQ or HLG): kept, or tone-mapped to SDR.
    #[serde(default)]
    pub hdr: crate::hdr::HdrMode,
    /// Peak bit rate cap in bits/s (VBV maximum rate, buffer twice it): with CRF a capped
    /// CRF, with a bit rate it replaces the default 1.5x cap. Streaming ladders set it so
    /// a rung's declared bandwidth holds.
    #[serde(default)]
    pub maxrate: Option<u64>,
    /// Encoder profile ("high", "main", "baseline"; "main", "main10"), the encoder's choice
    /// when absent. Players of a streaming package may support only some.
    #[serde(default)]
    pub profile: Option<String>,
    /// Target quality: each segment searches the rate factor that reaches this VMAF, from
    /// the CRF in `rate` (the first probe); `rate` must be a CRF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetQuality>,
}

/// What a target-quality rendition aims at.
///
/// Why per rendition: each rung of a ladder is watched at its own size, so each searches at
/// its own size and may have a target of its own.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TargetQuality {
    /// The mean VMAF each segment aims at (the window: 0.5 below to 1.0 above).
    pub vmaf: f64,
    /// The lowest rate factor a segment may take (the most bits); the codec's default when
    /// absent (`settings::target_bounds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rate_factor: Option<f64>,
    /// The highest rate factor a segment may take (the fewest bits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rate_factor: Option<f64>,
}

/// A target quality in the API (an output's, a package's or a rung's): the VMAF each segment
/// aims at and the bounds of its CRF search.
///
/// Why its own type: the API names the bounds as the CRF a user knows (`min_crf`,
/// `max_crf`), where the encode spec says rate factor (CRF or NVENC's cq).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiTarget {
    /// The VMAF (1 to 100) each segment's search aims at.
    pub vmaf: f64,
    /// The lowest CRF a segment may take (the most bits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_crf: Option<f64>,
    /// The highest CRF a segment may take (the fewest bits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_crf: Option<f64>,
}

impl From<ApiTarget> for TargetQuality {
    fn from(t: ApiTarget) -> Self {
        Self {
            vmaf: t.vmaf,
            min_rate_factor: t.min_crf,
            max_rate_factor: t.max_crf,
        }
    }
}

/// How a target-quality segment found its rate factor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetResult {
    /// The VMAF aimed at.
    pub target: f64,
    /// The rate factor kept.
    pub rate_factor: f64,
    /// The VMAF the kept encode scored against the segment's source frames (mean): what the
    /// search predicts for the segment in the stitched output.
    pub vmaf: f64,
    /// Every probe, in the order they ran (the kept one among them).
    pub probes: Vec<crate::target::Probe>,
}

/// The container of the final output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Container {
    /// MP4 with faststart.
    Mp4,
    /// Matroska.
    Mkv,
}

impl Container {
    /// Picks the container from a file name's extension.
    pub fn from_path(path: &std::path::Path) -> Option<Self> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "mp4" | "m4v" | "mov" => Some(Container::Mp4),
            "mkv" => Some(Container::Mkv),
            _ => None,
        }
    }

    /// The file extension of the container ("mp4", "mkv"): how output names are written.
    pub fn extension(self) -> &'static str {
        match self {
            Container::Mp4 => "mp4",
            Container::Mkv => "mkv",
        }
    }
}

/// How to run a segment on an NVIDIA card (NVDEC -> scale_cuda -> NVENC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HardwareEncode {
    /// CUDA ordinal of the card (decode and encode both run on it).
    pub device: u32,
    /// Decode on the card's NVDEC; when false (or the source is one NVDEC cannot decode),
    /// decode in software and upload each frame once.
    #[serde(default = "yes")]
    pub nvdec: bool,
    /// NVENC spatial adaptive quantisation.
    #[serde(default)]
    pub spatial_aq: bool,
    /// NVENC temporal adaptive quantisation (turns on look-ahead).
    #[serde(default)]
    pub temporal_aq: bool,
    /// Spatial AQ strength, 1 (low) ..= 15 (aggressive); NVENC's default is 8.
    #[serde(default)]
    pub aq_strength: Option<u8>,
    /// Constant bitrate instead of VBR for bitrate renditions.
    #[serde(default)]
    pub cbr: bool,
    /// Rate-control look-ahead in frames (NVENC's `rc-lookahead`).
    #[serde(default)]
    pub lookahead: Option<u16>,
    /// Decode and scale on the card, encode with the software encoders (scale_cuda ->
    /// hwdownload -> libx264/libx265): for cards without NVENC (A100, H100, H200), whose
    /// NVDEC and CUDA cores still take decoding and scaling off the CPU.
    #[serde(default)]
    pub software_encode: bool,
}

impl Default for HardwareEncode {
    fn default() -> Self {
        HardwareEncode {
            device: 0,
            nvdec: true,
            spatial_aq: false,
            temporal_aq: false,
            aq_strength: None,
            cbr: false,
            software_encode: false,
            lookahead: None,
        }
    }
}

/// One rendition to produce from a segment, and where to write it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenditionOutput {
    /// What to encode.
    pub spec: RenditionSpec,
    /// The NUT file to write.
    pub path: PathBuf,
}

/// The stretch of the source a segment encodes and what the encoder must know of the source,
/// as the dispatcher planned it.
///
/// Why one type: the farm's queue message ([`crate::wire::SegmentEncode`]) and the media
/// child's request ([`EncodeRequest`]) carry the same facts unchanged from the plan to the
/// encoder; both flatten this struct, so their JSON is what it was when each listed the
/// fields, and the two can no longer drift apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentSource {
    /// First source pts to encode (inclusive), in `time_base`.
    pub start_pts: i64,
    /// First source pts not to encode (exclusive).
    pub end_pts: i64,
    /// The source video time base: all pts here are in it, and the encoder keeps it.
    pub time_base: Rational,
    /// The job's timestamp bias, added to timestamps in the chunk (and again in the output).
    pub bias: i64,
    /// The source's frame rate, a hint for rate control.
    pub frame_rate: Rational,
    /// The source's sample aspect ratio.
    pub sample_aspect_ratio: Rational,
    /// The source's size as the probe saw it (its first frames), from which every segment's
    /// output size is made, whatever size the chunk's own frames have: a source whose size
    /// changes mid-stream still gives segments of one size that stitch. `None` (e.g. from an
    /// older dispatcher): the chunk's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_size: Option<(u32, u32)>,
    /// Colour tags to carry to the output.
    pub color: ColorInfo,
    /// Source bits per component (picks 10-bit output for HEVC/AV1).
    pub source_bit_depth: u8,
    /// Source pts (ascending, unbiased) of frames every rendition must encode as an IDR: the
    /// starts of a streaming package's media segments, so all rungs switch at the same frames;
    /// empty for file outputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keyframes: Vec<i64>,
}

/// Everything a worker needs to encode a segment; travels as JSON to the child process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncodeRequest {
    /// The chunk file (NUT) holding the segment's packets and its pre-roll.
    pub chunk: PathBuf,
    /// The stretch of the source to encode, as the task planned it.
    #[serde(flatten)]
    pub source: SegmentSource,
    /// Renditions to produce.
    pub outputs: Vec<RenditionOutput>,
    /// Threads for the decoder and each encoder.
    pub threads: usize,
    /// Run on an NVIDIA card (NVDEC/scale_cuda/NVENC) instead of the software encoders.
    #[serde(default)]
    pub hardware: Option<HardwareEncode>,
    /// Still images to take of frames in the range (posters, thumbnails, sprite tiles),
    /// software path only.
    #[serde(default)]
    pub stills: Vec<crate::images::StillShot>,
}

/// What one rendition of a segment came out as.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenditionResult {
    /// Rendition name.
    pub name: String,
    /// Frames encoded.
    pub frames: u64,
    /// First encoded pts (source time base, unbiased).
    pub first_pts: Option<i64>,
    /// Last encoded pts.
    pub last_pts: Option<i64>,
    /// Output width.
    pub width: u32,
    /// Output height.
    pub height: u32,
    /// Output size in bytes.
    pub bytes: u64,
    /// Whether the first packet is a keyframe (IDR), as stitching needs.
    pub starts_with_keyframe: bool,
    /// The encoder that made it (`h264_nvenc`, `libx264`; empty from older children). Why:
    /// a GPU segment must be seen to have been encoded on NVENC (the smoke test checks it).
    #[serde(default)]
    pub encoder: String,
    /// The target-quality search of this segment, when the rendition has a target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetResult>,
}

/// The result of encoding a segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncodeResult {
    /// Frames the decoder produced (pre-roll included).
    pub decoded_frames: u64,
    /// Frames inside the range (what every rendition encoded).
    pub frames_in_range: u64,
    /// Per rendition.
    pub renditions: Vec<RenditionResult>,
    /// Seconds spent decoding, scaling and encoding.
    pub media_seconds: f64,
    /// Packets of the range the decoder rejected plus frames it flagged damaged: summed over
    /// the job and compared with its `source_corrupt` limit.
    #[serde(default)]
    pub decode_errors: u64,
    /// How a GPU encode decoded its chunk (`None` on the software path and from older
    /// children). Why: NVDEC can fall back to a software decode without an error, and
    /// throughput collapses while every check stays green (GPU re-review, failure 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_decode: Option<GpuDecode>,
}

/// What decoded a GPU encode's chunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuDecode {
    /// Whether the plan put the decode on NVDEC (else a CPU decode and an upload).
    pub nvdec_planned: bool,
    /// The hwaccel the opened decoder used ("h264_nvdec"), if any.
    pub hwaccel: Option<String>,
    /// Frames that came out of the decoder in system memory and were uploaded to the card.
    pub uploaded_frames: u64,
    /// Frames that came out of the decoder on the card.
    pub cuda_frames: u64,
    /// The PCI bus id of the card the child's CUDA context is on, as the driver says
    /// (`None`: it did not say): the worker checks it is the card it booked (finding 9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
}

impl GpuDecode {
    /// Whether NVDEC was planned but some frames were decoded in software: the worker warns.
    pub fn fell_back(&self) -> bool {
        self.nvdec_planned && self.uploaded_frames > 0
    }
}

/// Whether two PCI bus ids name the same card: NVML writes an 8-digit domain
/// ("00000000:5E:00.0"), CUDA a 4-digit one ("0000:5e:00.0"), in either case.
pub fn same_pci_card(a: &str, b: &str) -> bool {
    let norm = |s: &str| -> Option<(u32, String)> {
        let (domain, rest) = s.trim().split_once(':')?;
        let domain = u32::from_str_radix(domain, 16).ok()?;
        (!rest.is_empty()).then(|| (domain, rest.to_ascii_lowercase()))
    };
    matches!((norm(a), norm(b)), (Some(x), Some(y)) if x == y)
}

fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::same_pci_card;

    #[test]
    fn nvml_and_cuda_spellings_of_one_card_match_and_others_do_not() {
        assert!(same_pci_card("00000000:5E:00.0", "0000:5e:00.0"));
        assert!(same_pci_card("0000:1A:00.0", "0000:1a:00.0"));
        assert!(!same_pci_card("00000000:5E:00.0", "0000:1a:00.0"));
        assert!(!same_pci_card("00000001:5E:00.0", "0000:5e:00.0"));
        assert!(!same_pci_card("", "0000:5e:00.0"));
        assert!(!same_pci_card("garbage", "garbage"));
        assert!(!same_pci_card("0000:", "0000:"));
    }
}
