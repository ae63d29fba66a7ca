//! The GPU path's public face: what this FFmpeg build offers, which decode path a source
//! takes, and how GPU failures are told apart (what a hardware encode asks for,
//! `HardwareEncode`, is request data in types.rs). Pure except `hw_capabilities` and the
//! device-cache calls.
//!
//! Why: the worker decides per segment whether to run on a card and must react differently to
//! "no session free" (back off, requeue), "driver fault" (mark the card unhealthy) and "this
//! host cannot do it" (run on the CPU); it needs those answers without FFmpeg types.

use serde::{Deserialize, Serialize};

use crate::{ffi, MediaError};

/// What the linked FFmpeg build offers for the GPU path (not whether a card is present).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    pub fn has_encoder(&self, codec: crate::VideoCodec) -> bool {
        match codec {
            crate::VideoCodec::H264 => self.h264_nvenc,
            crate::VideoCodec::Hevc => self.hevc_nvenc,
            crate::VideoCodec::Av1 => self.av1_nvenc,
        }
    }

    /// Whether the GPU path can run at all (it needs CUDA and scale_cuda).
    pub fn gpu_path(&self) -> bool {
        self.cuda_hwaccel && self.scale_cuda
    }
}

/// Asks the linked FFmpeg build what it offers. Cheap; touches no GPU.
pub fn hw_capabilities() -> HwCapabilities {
    crate::init();
    let enc = |n: &str| ffmpeg_next::encoder::find_by_name(n).is_some();
    HwCapabilities {
        cuda_hwaccel: ffi::cuda::cuda_hwaccel_built(),
        h264_nvenc: enc("h264_nvenc"),
        hevc_nvenc: enc("hevc_nvenc"),
        av1_nvenc: enc("av1_nvenc"),
        scale_cuda: ffmpeg_next::filter::find("scale_cuda").is_some(),
    }
}

/// Whether the linked FFmpeg has the software encoder of `codec` (libx264, libx265,
/// libsvtav1). Cheap; touches no input. Why: a worker whose build lacks an encoder must
/// hand the task to another worker, not fail the job as if the request were bad.
pub fn software_encoder_available(codec: crate::types::VideoCodec) -> bool {
    crate::init();
    ffmpeg_next::encoder::find_by_name(crate::settings::encoder_name(codec)).is_some()
}

/// Creates (or finds) the CUDA device context of card `device` and keeps it for later
/// segments of this process: creating one takes hundreds of milliseconds.
pub fn warm_cuda_device(device: u32) -> Result<(), MediaError> {
    crate::init();
    let _capture = ffi::cuda::LogCapture::start();
    ffi::cuda::device(device)
        .map(drop)
        .map_err(|f| gpu_error(device, GpuStage::Device, &f, |r| gpu_unavailable(device, r)))
}

/// Drops every cached CUDA device context (after a device fault, or before exiting).
pub fn release_cuda_devices() {
    ffi::cuda::forget_all_devices();
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

/// Codecs FFmpeg 5.1's NVDEC hwaccel decodes (the card may support fewer: that is `nvdec`).
const NVDEC_CODECS: [&str; 11] = [
    "h264",
    "hevc",
    "vp8",
    "vp9",
    "av1",
    "mpeg1video",
    "mpeg2video",
    "mpeg4",
    "vc1",
    "wmv3",
    "mjpeg",
];

/// Chooses NVDEC or software decode + upload for a source.
///
/// `nvdec` is the caller's knowledge that this card's NVDEC supports the codec (AV1 is not
/// decoded on a T4); `ten_bit_output` whether any rendition encodes 10-bit. NVDEC gets
/// 4:2:0 sources of 8 or 10 bits (not 10-bit H.264, which NVDEC never decodes); 4:2:2, 4:4:4,
/// 12-bit and other codecs are decoded in software and uploaded as nv12 (or p010 when a
/// rendition is 10-bit), so scale_cuda and NVENC only ever see nv12/p010.
pub fn choose_decode_path(
    codec: &str,
    pix_fmt: &str,
    bit_depth: u8,
    nvdec: bool,
    ten_bit_output: bool,
) -> DecodePlan {
    let upload_format = if ten_bit_output { "p010le" } else { "nv12" };
    let software = |reason: String| DecodePlan {
        path: DecodePath::SoftwareUpload,
        gpu_format: upload_format,
        reason,
    };
    if !nvdec {
        return software("NVDEC not used for this input on this card".into());
    }
    if !NVDEC_CODECS.contains(&codec) {
        return software(format!("NVDEC does not decode {codec}"));
    }
    let is_420 = matches!(
        pix_fmt,
        "yuv420p" | "yuvj420p" | "nv12" | "yuv420p10le" | "yuv420p10be" | "p010le" | "p010be"
    );
    if !is_420 || bit_depth > 10 {
        return software(format!("NVDEC does not decode {pix_fmt} ({bit_depth}-bit)"));
    }
    if bit_depth > 8 && codec == "h264" {
        return software("NVDEC does not decode 10-bit H.264".into());
    }
    DecodePlan {
        path: DecodePath::Nvdec,
        gpu_format: if bit_depth > 8 { "p010le" } else { "nv12" },
        reason: format!("NVDEC decodes {codec} {pix_fmt}"),
    }
}

/// Where on the GPU path a failure happened (it weighs how a bare error code is read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GpuStage {
    /// Creating the CUDA device context.
    Device,
    /// Opening the NVENC encoder (the encode session is opened here).
    EncoderOpen,
    /// Decoding, filtering, uploading or encoding frames.
    Running,
}

/// How a GPU failure is classified from FFmpeg's and the driver's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GpuFailure {
    /// No encode session free, memory short or device busy: back off and requeue.
    SessionUnavailable,
    /// The driver reported a fault: mark the card unhealthy.
    DeviceFault,
    /// No driver, no such device, no NVENC on the card.
    Unavailable,
    /// Not a GPU condition (bad data, bad option).
    Other,
}

const SESSION_MARKS: [&str; 8] = [
    "openencodesessionex failed: out of memory",
    "out of memory (10)",
    "incompatible client key (21)",
    "encoder busy",
    "lock busy",
    "cuda_error_out_of_memory",
    "cuda_error_device_unavailable",
    "cuda_error_launch_out_of_resources",
];
const FAULT_MARKS: [&str; 14] = [
    "cuda_error_illegal_address",
    "cuda_error_illegal_instruction",
    "cuda_error_misaligned_address",
    "cuda_error_invalid_pc",
    "cuda_error_launch_failed",
    "cuda_error_launch_timeout",
    "cuda_error_ecc_uncorrectable",
    "cuda_error_hardware_stack_error",
    "cuda_error_unknown",
    "cuda_error_system_not_ready",
    "cuda_error_contexts_destroyed",
    "device does not exist",
    "map failed",
    "resource register failed",
];
const UNAVAILABLE_MARKS: [&str; 13] = [
    "cannot load libcuda",
    "cannot load libnvidia-encode",
    "cannot load libnvcuvid",
    "could not dynamically load cuda",
    "cuda_error_no_device",
    "cuda_error_invalid_device",
    "cuda_error_insufficient_driver",
    "cuda_error_not_supported",
    "cuda_error_system_driver_mismatch",
    "no capable devices found",
    "no nvenc capable devices found",
    "doesn't support required nvenc features",
    "driver does not support the required nvenc api version",
];

/// Classifies a failure from its stage, FFmpeg's error code and the captured log text.
pub(crate) fn classify_gpu_failure(stage: GpuStage, averror: i32, text: &str) -> GpuFailure {
    let t = text.to_ascii_lowercase();
    let has = |marks: &[&str]| marks.iter().any(|m| t.contains(m));
    if has(&FAULT_MARKS) {
        GpuFailure::DeviceFault
    } else if has(&SESSION_MARKS) {
        GpuFailure::SessionUnavailable
    } else if has(&UNAVAILABLE_MARKS) || stage == GpuStage::Device {
        GpuFailure::Unavailable
    } else if stage == GpuStage::EncoderOpen && averror == -libc::ENOMEM {
        // NVENC maps NV_ENC_ERR_OUT_OF_MEMORY (the session limit) to AVERROR(ENOMEM).
        GpuFailure::SessionUnavailable
    } else if stage == GpuStage::EncoderOpen && averror == -libc::ENOSYS {
        // NV_ENC_ERR_UNSUPPORTED_DEVICE / NO_ENCODE_DEVICE style answers.
        GpuFailure::Unavailable
    } else {
        GpuFailure::Other
    }
}

/// Turns a failed FFmpeg call on the GPU path into the right `MediaError`; `other` builds the
/// error for failures that are not GPU conditions.
pub(crate) fn gpu_error(
    device: u32,
    stage: GpuStage,
    failure: &ffi::cuda::AvFailure,
    other: impl FnOnce(String) -> MediaError,
) -> MediaError {
    let reason = failure.describe();
    match classify_gpu_failure(stage, failure.code, &reason) {
        GpuFailure::SessionUnavailable => MediaError::GpuSessionUnavailable { device, reason },
        GpuFailure::DeviceFault => {
            // A faulted context must not serve the next segment.
            ffi::cuda::forget_device(device);
            MediaError::GpuDeviceFault { device, reason }
        }
        GpuFailure::Unavailable => gpu_unavailable(device, reason),
        GpuFailure::Other => other(reason),
    }
}

pub(crate) fn gpu_unavailable(device: u32, reason: impl Into<String>) -> MediaError {
    MediaError::GpuUnavailable {
        device,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::HardwareEncode;

    #[test]
    fn nvdec_for_420_sources_it_knows() {
        let p = choose_decode_path("h264", "yuv420p", 8, true, false);
        assert_eq!((p.path, p.gpu_format), (DecodePath::Nvdec, "nv12"));
        let p = choose_decode_path("hevc", "yuv420p10le", 10, true, true);
        assert_eq!((p.path, p.gpu_format), (DecodePath::Nvdec, "p010le"));
        let p = choose_decode_path("vp9", "yuvj420p", 8, true, true);
        assert_eq!(p.path, DecodePath::Nvdec);
    }

    #[test]
    fn software_upload_where_nvdec_cannot() {
        // AV1 on a T4: the caller says the card cannot.
        let p = choose_decode_path("av1", "yuv420p", 8, false, false);
        assert_eq!((p.path, p.gpu_format), (DecodePath::SoftwareUpload, "nv12"));
        let p = choose_decode_path("prores", "yuv422p10le", 10, true, true);
        assert_eq!(
            (p.path, p.gpu_format),
            (DecodePath::SoftwareUpload, "p010le")
        );
        let p = choose_decode_path("hevc", "yuv444p", 8, true, false);
        assert_eq!(p.path, DecodePath::SoftwareUpload);
        assert!(p.reason.contains("yuv444p"));
        let p = choose_decode_path("h264", "yuv420p10le", 10, true, false);
        assert_eq!((p.path, p.gpu_format), (DecodePath::SoftwareUpload, "nv12"));
        let p = choose_decode_path("hevc", "yuv420p12le", 12, true, true);
        assert_eq!(p.path, DecodePath::SoftwareUpload);
    }

    #[test]
    fn failures_are_told_apart() {
        use GpuFailure::*;
        use GpuStage::*;
        let c = classify_gpu_failure;
        let oom =
            "[h264_nvenc @ 0x55] OpenEncodeSessionEx failed: out of memory (10): (no details)";
        assert_eq!(c(EncoderOpen, -libc::ENOMEM, oom), SessionUnavailable);
        assert_eq!(c(EncoderOpen, -libc::ENOMEM, ""), SessionUnavailable);
        assert_eq!(
            c(Running, -libc::EAGAIN, "nvenc: encoder busy"),
            SessionUnavailable
        );
        let fault = "cuMemcpy2DAsync(...) failed -> CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered";
        assert_eq!(c(Running, -1, fault), DeviceFault);
        assert_eq!(c(Device, -1, "CUDA_ERROR_ECC_UNCORRECTABLE"), DeviceFault);
        assert_eq!(c(Device, -1, "Cannot load libcuda.so.1"), Unavailable);
        assert_eq!(c(Device, -12, ""), Unavailable);
        assert_eq!(c(EncoderOpen, -1, "No capable devices found"), Unavailable);
        assert_eq!(
            c(
                Device,
                -1,
                "cuInit(0) failed -> CUDA_ERROR_NO_DEVICE: no CUDA-capable device"
            ),
            Unavailable
        );
        assert_eq!(c(Running, -libc::EINVAL, "Invalid data found"), Other);
        assert_eq!(c(Running, -libc::ENOMEM, ""), Other);
    }

    #[test]
    fn hardware_request_defaults_from_json() {
        let hw: HardwareEncode = serde_json::from_str(r#"{"device":1}"#).unwrap();
        assert_eq!(
            hw,
            HardwareEncode {
                device: 1,
                ..HardwareEncode::default()
            }
        );
        assert!(hw.nvdec);
    }
}
