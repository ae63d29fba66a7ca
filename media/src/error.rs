//! The media crate's error type: a stable code and a retry/abort class for every failure.

use std::path::Path;

use tessera_model::error_code::{ErrorClass, ErrorCode};

/// Every way a media operation can fail.
///
/// Why: callers (worker, dispatcher, CLI) need a stable machine-readable code, a class that
/// decides retry vs abort, and a message that names the input and the reason.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// The input file does not exist or cannot be read.
    #[error("{path}: cannot read input: {reason}")]
    InputUnreadable {
        /// The input as the user named it.
        path: String,
        /// What the OS said.
        reason: String,
    },
    /// The input file has zero bytes.
    #[error("{path}: input is empty (0 bytes)")]
    InputEmpty {
        /// The input as the user named it.
        path: String,
    },
    /// FFmpeg cannot recognise or parse the container.
    #[error("{path}: not a readable media file: {reason}")]
    InputInvalid {
        /// The input as the user named it.
        path: String,
        /// FFmpeg's reason, in words.
        reason: String,
    },
    /// The container has no video stream (audio-only, subtitles, data).
    #[error("{path}: no video stream to transcode ({found})")]
    NoVideo {
        /// The input as the user named it.
        path: String,
        /// What the file does contain.
        found: String,
    },
    /// The input uses a codec or format this build cannot decode, or its properties are absurd.
    #[error("{path}: unsupported input: {reason}")]
    Unsupported {
        /// The input as the user named it.
        path: String,
        /// Which property is unsupported.
        reason: String,
    },
    /// Decoding failed part-way (corrupt or truncated data).
    #[error("{path}: decoding failed: {reason}")]
    Decode {
        /// The input as the user named it.
        path: String,
        /// FFmpeg's reason.
        reason: String,
    },
    /// The source is damaged beyond what a transcode should paper over: truncated (its header
    /// promises more than its packets hold) or with more undecodable packets than the job
    /// allows. Retrying cannot help; the user must upload the file again.
    #[error("{path}: source is corrupt: {reason}")]
    SourceCorrupt {
        /// The input as the user named it.
        path: String,
        /// What is missing or broken, with figures.
        reason: String,
    },
    /// An output failed the quality-control gate (wrong frame count, timestamps out of order,
    /// a track missing): it is not published.
    #[error("{what}: quality control failed: {reason}")]
    QcFailed {
        /// Which output or segment.
        what: String,
        /// What was expected and what was found.
        reason: String,
    },
    /// The encoder could not be opened or failed while encoding.
    #[error("encoder {codec}: {reason}")]
    Encode {
        /// Encoder name (libx264, libx265, libsvtav1, aac).
        codec: String,
        /// FFmpeg's reason.
        reason: String,
    },
    /// A request that makes no sense (bad range, unknown codec name, empty segment list).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Writing an output or intermediate file failed.
    #[error("{path}: write failed: {reason}")]
    Write {
        /// The file being written.
        path: String,
        /// The reason.
        reason: String,
    },
    /// The GPU path cannot run on this host or card: no CUDA driver, no such device, a card
    /// without NVENC, or an FFmpeg build without the encoder or filter asked for. The job is
    /// not at fault: another worker (or the software path) can do it.
    #[error("gpu {device}: unavailable: {reason}")]
    GpuUnavailable {
        /// CUDA ordinal of the card.
        device: u32,
        /// What was missing, with FFmpeg's words.
        reason: String,
    },
    /// No NVENC session could be opened (all of the card's sessions are taken, or it is short
    /// of memory: `OpenEncodeSessionEx failed: out of memory (10)`), or the device is busy.
    /// Release, back off, requeue, lower the card's budget; never fail the job for it.
    #[error("gpu {device}: no encode session available: {reason}")]
    GpuSessionUnavailable {
        /// CUDA ordinal of the card.
        device: u32,
        /// FFmpeg's and the driver's words.
        reason: String,
    },
    /// The card's NVENC refused what this request asks (a feature, bit depth or size it
    /// lacks, a parameter it rejects): every attempt on such a card would fail the same way.
    #[error("gpu {device}: the card cannot encode this request: {reason}")]
    GpuRequestUnsupported {
        /// CUDA ordinal of the card.
        device: u32,
        /// FFmpeg's and the driver's words.
        reason: String,
    },
    /// The driver reported a fault on the card (illegal address, ECC error, launch failure):
    /// requeue the work and mark the card unhealthy.
    #[error("gpu {device}: device fault: {reason}")]
    GpuDeviceFault {
        /// CUDA ordinal of the card.
        device: u32,
        /// FFmpeg's and the driver's words.
        reason: String,
    },
}

impl MediaError {
    /// The stable code of this error, for APIs, events and logs.
    pub fn code(&self) -> ErrorCode {
        match self {
            MediaError::InputUnreadable { .. } => ErrorCode::InputUnreadable,
            MediaError::InputEmpty { .. } => ErrorCode::InputEmpty,
            MediaError::InputInvalid { .. } => ErrorCode::InputInvalid,
            MediaError::NoVideo { .. } => ErrorCode::InputNoVideo,
            MediaError::Unsupported { .. } => ErrorCode::InputUnsupported,
            MediaError::Decode { .. } => ErrorCode::DecodeFailed,
            MediaError::SourceCorrupt { .. } => ErrorCode::SourceCorrupt,
            MediaError::QcFailed { .. } => ErrorCode::QcFailed,
            MediaError::Encode { .. } => ErrorCode::EncodeFailed,
            MediaError::InvalidRequest(_) => ErrorCode::InvalidRequest,
            MediaError::Write { .. } => ErrorCode::WriteFailed,
            MediaError::GpuUnavailable { .. } => ErrorCode::GpuUnavailable,
            MediaError::GpuSessionUnavailable { .. } => ErrorCode::GpuSessionUnavailable,
            MediaError::GpuDeviceFault { .. } => ErrorCode::GpuDeviceFault,
            MediaError::GpuRequestUnsupported { .. } => ErrorCode::GpuRequestUnsupported,
        }
    }

    /// Whether a retry can help: the catalog's class of the code (writes and GPU conditions
    /// retry, bad inputs and requests abort).
    pub fn class(&self) -> ErrorClass {
        self.code().class()
    }

    /// The card a GPU error is about, so the worker can release it, lower its budget or mark
    /// it unhealthy; `None` for every other error.
    pub fn gpu_device(&self) -> Option<u32> {
        match self {
            MediaError::GpuUnavailable { device, .. }
            | MediaError::GpuSessionUnavailable { device, .. }
            | MediaError::GpuDeviceFault { device, .. }
            | MediaError::GpuRequestUnsupported { device, .. } => Some(*device),
            _ => None,
        }
    }

    pub(crate) fn invalid(path: &Path, err: impl std::fmt::Display) -> Self {
        MediaError::InputInvalid {
            path: path.display().to_string(),
            reason: err.to_string(),
        }
    }

    pub(crate) fn decode(path: &Path, err: impl std::fmt::Display) -> Self {
        MediaError::Decode {
            path: path.display().to_string(),
            reason: err.to_string(),
        }
    }

    pub(crate) fn write(path: &Path, err: impl std::fmt::Display) -> Self {
        MediaError::Write {
            path: path.display().to_string(),
            reason: err.to_string(),
        }
    }

    pub(crate) fn encode(codec: &str, err: impl std::fmt::Display) -> Self {
        MediaError::Encode {
            codec: codec.to_string(),
            reason: err.to_string(),
        }
    }

    /// The same error told about the user's input and the stage that failed, instead of an
    /// intermediate file (a chunk, an encoded segment) the user never named.
    ///
    /// Why: "<work dir>/chunks/000000.nut: write failed" sends users looking for a file that
    /// is gone; "in.mkv: write failed: split: packet ..." points at their upload and the step.
    pub fn for_input(self, input: &Path, stage: &str) -> MediaError {
        let path = input.display().to_string();
        let staged = |reason: String| format!("{stage}: {reason}");
        match self {
            MediaError::Write { reason, .. } => MediaError::Write {
                path,
                reason: staged(reason),
            },
            MediaError::Decode { reason, .. } => MediaError::Decode {
                path,
                reason: staged(reason),
            },
            MediaError::InputInvalid { reason, .. } => MediaError::InputInvalid {
                path,
                reason: staged(reason),
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_classes_sensible() {
        let e = MediaError::InputEmpty {
            path: "a.mp4".into(),
        };
        assert_eq!(e.code(), "input_empty");
        assert_eq!(e.class(), ErrorClass::Abort);
        assert!(e.to_string().contains("a.mp4"));
        let w = MediaError::write(Path::new("/x/out.mp4"), "disk full");
        assert_eq!(w.class(), ErrorClass::Retry);
        assert_eq!(w.to_string(), "/x/out.mp4: write failed: disk full");
        let named = MediaError::write(Path::new("/work/j/chunks/000000.nut"), "packet: EINVAL")
            .for_input(Path::new("upload.mkv"), "split");
        assert_eq!(
            named.to_string(),
            "upload.mkv: write failed: split: packet: EINVAL"
        );
        assert_eq!(named.class(), ErrorClass::Retry);
    }

    #[test]
    fn gpu_errors_retry_and_name_the_card() {
        let s = MediaError::GpuSessionUnavailable {
            device: 1,
            reason: "OpenEncodeSessionEx failed: out of memory (10)".into(),
        };
        assert_eq!(s.code(), "gpu_session_unavailable");
        assert_eq!(s.class(), ErrorClass::Retry);
        assert_eq!(s.gpu_device(), Some(1));
        let f = MediaError::GpuDeviceFault {
            device: 0,
            reason: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        };
        assert_eq!(f.code(), "gpu_device_fault");
        assert_eq!(f.class(), ErrorClass::Retry);
        let u = MediaError::GpuUnavailable {
            device: 0,
            reason: "Cannot load libcuda.so.1".into(),
        };
        assert_eq!(u.code(), "gpu_unavailable");
        assert_eq!(u.class(), ErrorClass::Retry);
        assert!(u.to_string().starts_with("gpu 0: unavailable"));
        assert_eq!(MediaError::InvalidRequest("x".into()).gpu_device(), None);
    }
}
