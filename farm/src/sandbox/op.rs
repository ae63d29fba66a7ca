//! The operations a media child runs, as the parent sends them.
//!
//! Why its own module: the protocol's vocabulary is shared by both sides (the parent's
//! [`super::Sandbox`] and the child's loop), apart from how either side runs it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tessera_model::audio::AudioRequest;
use tessera_model::encode::EncodeRequest;
use tessera_model::probe::SegmentPlan;
use tessera_model::stitch::StitchRequest;

/// One media operation, as sent to the child.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum MediaOp {
    /// Probe an input.
    Probe {
        /// The input file.
        input: PathBuf,
        /// Most video frames accepted (the farm's admission limit; none: the media crate's).
        #[serde(default)]
        max_frames: Option<u64>,
    },
    /// Cut chunks; its progress values are the indices of finished chunks.
    Split {
        /// The input file.
        input: PathBuf,
        /// The plan.
        segments: Vec<SegmentPlan>,
        /// Timestamp bias.
        bias: i64,
        /// How to derive dts from pts (from the probe).
        dts_rule: tessera_model::timestamps::DtsRule,
        /// The probe's pts for a container that stores none.
        #[serde(default)]
        derived_pts: Option<tessera_model::timestamps::DerivedPts>,
        /// Where to write chunks.
        dir: PathBuf,
    },
    /// Encode a segment.
    Encode(EncodeRequest),
    /// Transcode the audio.
    Audio(AudioRequest),
    /// Stitch the output.
    Stitch(StitchRequest),
    /// The frames (presentation-order indices) where a new scene begins.
    Scenes {
        /// The source.
        input: PathBuf,
    },
    /// Measure PSNR/SSIM and VMAF.
    Quality {
        /// The encoded output.
        output: PathBuf,
        /// The source.
        source: PathBuf,
        /// The output's segments' frame counts, in order, for VMAF per segment (empty: the
        /// whole output only).
        #[serde(default)]
        segments: Vec<u64>,
    },
    /// Cut one stream of a stitched rendition into a streaming package's media segments.
    Segment(tessera_model::segmented::SegmentRequest),
    /// Compose a sprite sheet of a package's thumbnail tiles.
    Sprite(tessera_model::images::SpriteRequest),
    /// Probe a card (`tessera_media::probe_card`): its CUDA context, an NVENC session
    /// (with `encode`) and an NVDEC decode. At a GPU worker's start and after a probation.
    GpuProbe {
        /// CUDA ordinal of the card.
        device: u32,
        /// Whether NVENC is tried (false: the worker encodes in software, cards without it).
        #[serde(default = "yes")]
        encode: bool,
    },
    /// Say what the linked FFmpeg build can do ([`tessera_model::capabilities::Capabilities`]).
    Capabilities,
    /// Decode a file on NVDEC into card memory and report frames and speed (`tessera gpu
    /// --nvdec-check`).
    NvdecCheck {
        /// The file.
        input: PathBuf,
        /// CUDA ordinal of the card.
        device: u32,
    },
}

impl MediaOp {
    /// A short name for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            MediaOp::Probe { .. } => "probe",
            MediaOp::Split { .. } => "split",
            MediaOp::Encode(_) => "encode",
            MediaOp::Audio(_) => "audio",
            MediaOp::Stitch(_) => "stitch",
            MediaOp::Quality { .. } => "quality",
            MediaOp::Scenes { .. } => "scenes",
            MediaOp::Segment(_) => "segment package",
            MediaOp::Sprite(_) => "sprite sheet",
            MediaOp::GpuProbe { .. } => "gpu probe",
            MediaOp::Capabilities => "capabilities",
            MediaOp::NvdecCheck { .. } => "nvdec check",
        }
    }
}
/// The default of a flag that older parents leave out.
fn yes() -> bool {
    true
}
