//! The GPU path's public face: what this FFmpeg build offers, which decode path a source
//! takes, the CUDA device cache, and how GPU failures are told apart (failure.rs). What a
//! hardware encode asks for, `HardwareEncode`, is request data in tessera-model; the encode
//! itself is encode/hw.rs. Pure except `hw_capabilities` and the device-cache calls.
//!
//! Why: the worker decides per segment whether to run on a card and must react differently to
//! "no session free" (back off, requeue), "driver fault" (mark the card unhealthy) and "this
//! host cannot do it" (run on the CPU); it needs those answers without FFmpeg types.
//!
//! Beside it: the NVDEC smoke check (nvdec.rs), the card probe (probe.rs) and the GPU path's tests that need no card
//! (tests.rs).

mod failure;
pub(crate) mod nvdec;
pub(crate) mod probe;
#[cfg(test)]
mod tests;

use crate::{ffi, MediaError};
pub(crate) use failure::{classify_gpu_failure, gpu_error, gpu_unavailable, GpuFailure, GpuStage};
use tessera_model::capabilities::DecodePath;
use tessera_model::capabilities::DecodePlan;
use tessera_model::capabilities::HwCapabilities;

/// Asks the linked FFmpeg build what it offers. Cheap; touches no GPU.
pub(crate) fn hw_capabilities() -> HwCapabilities {
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
pub(crate) fn software_encoder_available(codec: tessera_model::encode::VideoCodec) -> bool {
    crate::init();
    ffmpeg_next::encoder::find_by_name(tessera_model::settings::encoder_name(codec)).is_some()
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

/// The decoder to open by name for NVDEC, where FFmpeg's default decoder of the codec has no
/// hwaccel: AV1's default is libdav1d (software only); the native `av1` decoder decodes
/// through NVDEC. `None`: the default decoder takes NVDEC.
pub(crate) fn nvdec_decoder_name(codec: &str) -> Option<&'static str> {
    (codec == "av1").then_some("av1")
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
