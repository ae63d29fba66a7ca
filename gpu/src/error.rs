//! The GPU crate's error type: a stable code and a retry/abort class for every failure (the
//! class is the catalog's own `ErrorClass`).

use tessera_model::error_code::ErrorClass;

/// Every way a GPU inventory or scheduling call can fail.
///
/// Why: the worker turns these into one log line each (e.g. "no NVIDIA driver: CPU-only")
/// and needs a machine-readable code for events and metrics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuError {
    /// NVML could not be loaded or initialised: no `libnvidia-ml.so`, no driver, no permission.
    /// The worker runs CPU-only.
    #[error("NVML unavailable (no NVIDIA driver?): {reason}")]
    NvmlUnavailable {
        /// What the loader or NVML said.
        reason: String,
    },
    /// NVML loaded, but a machine-wide query (the card count) failed.
    #[error("NVML query {query} failed: {reason}")]
    Nvml {
        /// The query that failed, e.g. `device_count`.
        query: String,
        /// What NVML said.
        reason: String,
    },
    /// A scheduler call named a card index the scheduler does not know.
    #[error("no GPU with index {index} in this worker's inventory")]
    UnknownCard {
        /// The index as given.
        index: u32,
    },
}

impl GpuError {
    /// The stable code of this error, for APIs, events and logs.
    pub fn code(&self) -> &'static str {
        match self {
            GpuError::NvmlUnavailable { .. } => "gpu_nvml_unavailable",
            GpuError::Nvml { .. } => "gpu_nvml_query_failed",
            GpuError::UnknownCard { .. } => "gpu_unknown_card",
        }
    }

    /// Whether a retry can help.
    pub fn class(&self) -> ErrorClass {
        match self {
            GpuError::Nvml { .. } => ErrorClass::Retry,
            GpuError::NvmlUnavailable { .. } | GpuError::UnknownCard { .. } => ErrorClass::Abort,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_classes_sensible() {
        let e = GpuError::NvmlUnavailable {
            reason: "libnvidia-ml.so.1: cannot open shared object file".into(),
        };
        assert_eq!(e.code(), "gpu_nvml_unavailable");
        assert_eq!(e.class(), ErrorClass::Abort);
        assert!(e.to_string().contains("libnvidia-ml.so.1"));
        let q = GpuError::Nvml {
            query: "device_count".into(),
            reason: "Unknown".into(),
        };
        assert_eq!(q.code(), "gpu_nvml_query_failed");
        assert_eq!(q.class(), ErrorClass::Retry);
        let u = GpuError::UnknownCard { index: 7 };
        assert_eq!(u.code(), "gpu_unknown_card");
        assert_eq!(
            u.to_string(),
            "no GPU with index 7 in this worker's inventory"
        );
    }
}
