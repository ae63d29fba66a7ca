//! What the linked FFmpeg build and a card can do, and which decode path a source takes.
//!
//! Why plain data: only the media child links FFmpeg; the worker, the dispatcher and the CLI
//! ask it once and decide from these answers.

use serde::{Deserialize, Serialize};

use crate::encode::VideoCodec;
use crate::images::ImageFormat;

/// Every question the parent processes ask of the linked FFmpeg build.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// The GPU path: CUDA hwaccel, scale_cuda and the NVENC encoders built in.
    pub hw: HwCapabilities,
    /// The video codecs whose software encoder (libx264, libx265, libsvtav1) is built in.
    pub software_encoders: Vec<VideoCodec>,
    /// The still-image formats whose encoder is built in.
    pub image_encoders: Vec<ImageFormat>,
}

impl Capabilities {
    /// Whether the software encoder of `codec` is built in.
    pub fn software_encoder(&self, codec: VideoCodec) -> bool {
        self.software_encoders.contains(&codec)
    }

    /// Whether still images of `format` can be written.
    pub fn image_encoder(&self, format: ImageFormat) -> bool {
        self.image_encoders.contains(&format)
    }
}

/// What the linked FFmpeg build offers for the GPU path (not whether a card is present).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HwCapabilities {
    /// The CUDA hwdevice type and NVDEC hwaccel are built in.
    pub cuda_hwaccel: bool,
    /// h264_nvenc is built in.
    pub h264_nvenc: bool,
    /// hevc_nvenc is built in.
    pub hevc_nvenc: bool,
    /// av1_nvenc is built in (FFmpeg 6.0 and later).
    pub av1_nvenc: bool,
    /// libavfilter has scale_cuda (resize and pixel-format conversion on the card).
    pub scale_cuda: bool,
}

impl HwCapabilities {
    /// Whether the build can encode `codec` on NVENC.
    pub fn has_encoder(&self, codec: crate::encode::VideoCodec) -> bool {
        match codec {
            crate::encode::VideoCodec::H264 => self.h264_nvenc,
            crate::encode::VideoCodec::Hevc => self.hevc_nvenc,
            crate::encode::VideoCodec::Av1 => self.av1_nvenc,
        }
    }

    /// Whether the GPU path can run at all (it needs CUDA and scale_cuda).
    pub fn gpu_path(&self) -> bool {
        self.cuda_hwaccel && self.scale_cuda
    }
}

/// Where a segment's frames are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecodePath {
    /// NVDEC: frames are CUDA frames from the start.
    Nvdec,
    /// Software decode, one conversion to the GPU format on the CPU, one upload per frame.
    SoftwareUpload,
}

/// The decode path and the GPU pixel format the frames have on the card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecodePlan {
    /// Where decoding runs.
    pub path: DecodePath,
    /// Pixel format of the frames on the card: "nv12" or "p010le".
    pub gpu_format: &'static str,
    /// Why this path, in words (for logs).
    pub reason: String,
}

/// What the probe of a card found (`tessera_media::probe_card`): each part a segment needs
/// worked. Why a report and not a bool: the worker logs which encoder and decoder ran, so a
/// card that came back from probation says what it was checked with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardProbeReport {
    /// The card's CUDA ordinal.
    pub device: u32,
    /// The encoder that made the probe's pictures (`h264_nvenc`, or `libx264` on a worker
    /// that encodes in software).
    pub encoder: String,
    /// The decoder and hwaccel that decoded them on the card ("h264 via h264_nvdec").
    pub decoder: String,
    /// Pictures decoded into card memory.
    pub frames: u64,
    /// The PCI bus id of the card the CUDA context is on, as the driver says (finding 9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
}

/// What an NVDEC decode of a file did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvdecReport {
    /// Frames decoded (all of them CUDA frames).
    pub frames: u64,
    /// Wall-clock seconds of the decode (device context creation excluded).
    pub seconds: f64,
    /// Frames per second.
    pub fps: f64,
    /// The decoder and hwaccel, e.g. "h264 via h264_nvdec".
    pub decoder: String,
    /// Frame width.
    pub width: u32,
    /// Frame height.
    pub height: u32,
    /// Pixel format of the frames on the card (nv12, p010le).
    pub gpu_format: String,
}
