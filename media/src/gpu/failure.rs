//! How a failure on the GPU path is read: the stage it happened at, FFmpeg's error code
//! and the failing call's own log lines decide whether it is a session shortage (requeue,
//! lower the card's budget), a card fault (mark the card unhealthy until probation), a host
//! that cannot run the GPU path, a request the card's NVENC refuses (run the job on the CPU),
//! or not a GPU condition at all.
//!
//! Why apart from gpu.rs: the marks and the rules are the part of the GPU path most likely to
//! change with what cards and drivers say; they are pure and tested here on their own.

use crate::{ffi, MediaError};

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
    /// A sticky CUDA context error after work started: mark the card unhealthy.
    DeviceFault,
    /// No driver, no such device, no NVENC on the card, a driver that is not ready.
    Unavailable,
    /// NVENC refused this request (a feature, bit depth, size or parameter it lacks):
    /// the same on every attempt on such a card.
    RequestUnsupported,
    /// Not a GPU condition (bad data, bad option).
    Other,
}

/// Out of encode sessions or of memory, or busy: passes with time.
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
/// Sticky context errors: the context is unusable and the card may be in trouble. Only
/// these, and only once work started, mark a card unhealthy (and probation brings it back).
const FAULT_MARKS: [&str; 9] = [
    "cuda_error_illegal_address",
    "cuda_error_illegal_instruction",
    "cuda_error_misaligned_address",
    "cuda_error_invalid_pc",
    "cuda_error_launch_failed",
    "cuda_error_launch_timeout",
    "cuda_error_ecc_uncorrectable",
    "cuda_error_hardware_stack_error",
    "cuda_error_contexts_destroyed",
];
/// NVENC's answers to what a request asks: a capability the card lacks, a parameter it
/// rejects, or input surfaces it cannot map (pitch, size or format).
const REQUEST_MARKS: [&str; 11] = [
    "doesn't support required nvenc features",
    "10 bit encode not supported",
    "temporal aq not supported",
    "rc lookahead not supported",
    "exceeds",
    "max b-frames",
    "unsupported param",
    "invalid param",
    "map failed",
    "resource register failed",
    "yuv444p not supported",
];
/// This host or card cannot run the GPU path at all (now).
const UNAVAILABLE_MARKS: [&str; 19] = [
    "cannot load libcuda",
    "cannot load libnvidia-encode",
    "cannot load libnvcuvid",
    "could not dynamically load cuda",
    "cuda_error_no_device",
    "cuda_error_invalid_device",
    "cuda_error_insufficient_driver",
    "cuda_error_not_supported",
    "cuda_error_system_driver_mismatch",
    "cuda_error_unknown",
    "cuda_error_system_not_ready",
    "cuda_error_operating_system",
    "no capable devices found",
    "no nvenc capable devices found",
    "unsupported device (2)",
    "no encode device (1)",
    "device does not exist",
    "driver does not support the required nvenc api version",
    "cuda_error_not_initialized",
];

/// Classifies a failure from its stage, FFmpeg's error code and the log lines of the
/// failing call (the caller clears the capture before the call, so older text, such as a
/// fallen-back NVDEC init, never decides).
pub(crate) fn classify_gpu_failure(stage: GpuStage, averror: i32, text: &str) -> GpuFailure {
    let t = text.to_ascii_lowercase();
    let has = |marks: &[&str]| marks.iter().any(|m| t.contains(m));
    if stage == GpuStage::Device {
        // No context exists yet, so nothing on the card can have faulted: memory short
        // passes (other contexts end); anything else means this host cannot use the card.
        return if has(&SESSION_MARKS) || averror == -libc::ENOMEM {
            GpuFailure::SessionUnavailable
        } else {
            GpuFailure::Unavailable
        };
    }
    if has(&FAULT_MARKS) {
        GpuFailure::DeviceFault
    } else if has(&SESSION_MARKS) {
        GpuFailure::SessionUnavailable
    } else if has(&UNAVAILABLE_MARKS) {
        GpuFailure::Unavailable
    } else if has(&REQUEST_MARKS) {
        GpuFailure::RequestUnsupported
    } else if stage == GpuStage::EncoderOpen && averror == -libc::ENOMEM {
        // NVENC maps NV_ENC_ERR_OUT_OF_MEMORY (the session limit) to AVERROR(ENOMEM).
        GpuFailure::SessionUnavailable
    } else if stage == GpuStage::EncoderOpen
        && (averror == -libc::ENOSYS || averror == -libc::ENOENT)
    {
        // NV_ENC_ERR_UNSUPPORTED_DEVICE (ENOSYS) and NV_ENC_ERR_NO_ENCODE_DEVICE (ENOENT).
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
        GpuFailure::RequestUnsupported => MediaError::GpuRequestUnsupported { device, reason },
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
        // Before a context exists nothing can have faulted.
        assert_eq!(c(Device, -1, "CUDA_ERROR_ECC_UNCORRECTABLE"), Unavailable);
        assert_eq!(c(Device, -1, fault), Unavailable);
        assert_eq!(c(Device, -1, "Cannot load libcuda.so.1"), Unavailable);
        assert_eq!(c(Device, -12, ""), SessionUnavailable);
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

    /// The review's cases (gpu-path-review H2, M2, B3): misconfigurations and API errors are
    /// not card faults, request-specific NVENC refusals are told apart, and an address-space
    /// OOM at context creation passes instead of marking the card.
    #[test]
    fn only_sticky_context_errors_are_faults() {
        use GpuFailure::*;
        use GpuStage::*;
        let c = classify_gpu_failure;
        // cuInit without /dev/nvidia-uvm, NVSwitch without fabric manager: the host, not the card.
        let uvm = "cuInit(0) failed -> CUDA_ERROR_UNKNOWN: unknown error";
        assert_eq!(c(Device, -1, uvm), Unavailable);
        assert_eq!(c(Running, -1, uvm), Unavailable);
        let fm = "cuCtxCreate failed -> CUDA_ERROR_SYSTEM_NOT_READY: system not yet initialized";
        assert_eq!(c(Device, -1, fm), Unavailable);
        let oom = "cuCtxCreate(...) failed -> CUDA_ERROR_OUT_OF_MEMORY: out of memory";
        assert_eq!(c(Device, -1, oom), SessionUnavailable);
        assert_eq!(c(Device, -libc::ENOMEM, ""), SessionUnavailable);
        // NVENC API errors from a bad pitch, size or format: the request, not the card.
        let map = "[h264_nvenc @ 0x1] MapInputResource failed: map failed (12)";
        assert_eq!(c(Running, -1, map), RequestUnsupported);
        let reg = "[hevc_nvenc @ 0x1] RegisterResource failed: resource register failed (13)";
        assert_eq!(c(Running, -1, reg), RequestUnsupported);
        // Capability failures at open (nvenc.c check_capabilities), ENOSYS.
        for why in [
            "10 bit encode not supported",
            "Temporal AQ not supported",
            "Width 8192 exceeds 4096",
            "Max B-frames 3 exceed 0",
            "RC lookahead not supported",
        ] {
            let text = format!("[h264_nvenc @ 0x1] {why}\n[h264_nvenc @ 0x1] Provided device doesn't support required NVENC features");
            assert_eq!(
                c(EncoderOpen, -libc::ENOSYS, &text),
                RequestUnsupported,
                "{why}"
            );
        }
        let param = "InitializeEncoder failed: unsupported param (12): Invalid Level.";
        assert_eq!(c(EncoderOpen, -libc::ENOSYS, param), RequestUnsupported);
        // A card without NVENC, through the hw-frames path.
        let nodev = "OpenEncodeSessionEx failed: unsupported device (2): (no details)";
        assert_eq!(c(EncoderOpen, -libc::ENOSYS, nodev), Unavailable);
        let noenc = "OpenEncodeSessionEx failed: no encode device (1): (no details)";
        assert_eq!(c(EncoderOpen, -libc::ENOENT, noenc), Unavailable);
        assert_eq!(c(EncoderOpen, -libc::ENOENT, ""), Unavailable);
        // The session cap still reads as a session shortage.
        let cap = "OpenEncodeSessionEx failed: incompatible client key (21): (no details)";
        assert_eq!(c(EncoderOpen, -libc::EINVAL, cap), SessionUnavailable);
    }

    fn log_error(text: &std::ffi::CStr) {
        // SAFETY: a printf-style call with a "%s" format and one NUL-terminated string.
        unsafe {
            ffmpeg_next::ffi::av_log(
                std::ptr::null_mut(),
                ffmpeg_next::ffi::AV_LOG_ERROR as libc::c_int,
                c"%s".as_ptr(),
                text.as_ptr(),
            )
        };
    }

    /// A failure is read from the failing call's own log lines: an earlier CUDA OOM (a
    /// fallen-back NVDEC init) must not turn a later data error into a session shortage.
    #[test]
    fn a_failure_is_classified_by_its_own_calls_lines_only() {
        crate::init();
        let _capture = ffi::cuda::LogCapture::start();
        log_error(c"cuvidCreateDecoder(...) failed -> CUDA_ERROR_OUT_OF_MEMORY: out of memory\n");
        let stale = ffi::cuda::AvFailure::new(-libc::EINVAL, "decoding");
        assert_eq!(
            classify_gpu_failure(GpuStage::Running, stale.code, &stale.describe()),
            GpuFailure::SessionUnavailable,
            "without clearing, the old line decides"
        );
        log_error(c"cuvidCreateDecoder(...) failed -> CUDA_ERROR_OUT_OF_MEMORY: out of memory\n");
        ffi::cuda::clear_log();
        log_error(c"Invalid NAL unit size\n");
        let own = ffi::cuda::AvFailure::new(-libc::EINVAL, "decoding");
        let text = own.describe();
        assert!(text.contains("Invalid NAL unit size"), "{text}");
        assert!(!text.contains("OUT_OF_MEMORY"), "{text}");
        assert_eq!(
            classify_gpu_failure(GpuStage::Running, own.code, &text),
            GpuFailure::Other
        );
    }
}
