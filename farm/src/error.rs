//! Errors of the farm plumbing: queue, store, sandbox. Each has a stable code and a class.

use tessera_model::error_code::ErrorClass;
use tessera_model::error_code::ErrorCode;
/// Every failure of the shared plumbing.
///
/// Why: the worker and dispatcher decide retry vs abort from `class()`, and report `code()`
/// to users and metrics; the message says what failed and why.
#[derive(Debug, thiserror::Error)]
pub enum FarmError {
    /// A media operation failed in the child process with a classified error.
    #[error("{message}")]
    Media {
        /// The stable code from the catalog.
        code: ErrorCode,
        /// Retry or abort.
        class: ErrorClass,
        /// The child's message (names the input and the reason).
        message: String,
    },
    /// The job was cancelled (by request or shutdown); not retried.
    #[error("job {job} cancelled")]
    Cancelled {
        /// The job id.
        job: String,
    },
    /// The child process crashed, was killed, or broke the protocol.
    #[error("media child process {what}: {detail}")]
    ChildCrashed {
        /// Which operation it was running.
        what: String,
        /// Exit status or signal, and the tail of its stderr.
        detail: String,
    },
    /// The child process ran past its time limit and was killed.
    #[error("media child process {what} timed out after {seconds} s")]
    ChildTimeout {
        /// Which operation.
        what: String,
        /// The limit.
        seconds: u64,
    },
    /// The queue (embedded or RabbitMQ) failed.
    #[error("queue {queue}: {reason}")]
    Queue {
        /// Queue name.
        queue: String,
        /// What went wrong.
        reason: String,
    },
    /// The broker refused a declaration (an argument its version or an operator's policy
    /// does not allow, a same-named queue declared otherwise). Why apart from `Queue`: a
    /// refusal is the same on every try, so a process starting stops and says so instead of
    /// waiting for a broker that is up and answering.
    #[error("queue {queue}: the broker refused it: {reason}")]
    QueueRefused {
        /// Queue name.
        queue: String,
        /// The broker's reply (its code and text) and what to do about it.
        reason: String,
    },
    /// The object store failed.
    #[error("store {key}: {reason}")]
    Store {
        /// Object key.
        key: String,
        /// What went wrong.
        reason: String,
    },
    /// The object store could not be reached or answered "try later" (connection refused or
    /// reset, timeout, HTTP 5xx). Why apart from `Store`: it says nothing about the task, so a
    /// worker waits for the store instead of spending the task's deliveries on it.
    #[error("store {key}: unavailable: {reason}")]
    StoreUnavailable {
        /// Object key.
        key: String,
        /// What went wrong.
        reason: String,
    },
    /// An object key that is not allowed (absolute, `..`, empty parts, odd characters).
    #[error("invalid object key '{0}'")]
    InvalidKey(String),
    /// A message that cannot be parsed or has an unknown version.
    #[error("bad message: {0}")]
    BadMessage(String),
    /// Local disk (staging) failed.
    #[error("{path}: {reason}")]
    Io {
        /// The path involved.
        path: String,
        /// The OS error.
        reason: String,
    },
    /// This worker cannot run the task now for a reason of its own (its staging disk is
    /// full, its FFmpeg lacks the encoder): not the task's fault, so the task goes to
    /// another worker without spending a delivery, and a full disk pauses this worker.
    #[error("worker unfit: {reason}")]
    WorkerUnfit {
        /// What is wrong with the worker.
        reason: String,
        /// Whether the worker should stop taking work until the condition clears.
        pause: bool,
    },
}

impl From<tessera_model::wire::BadMessage> for FarmError {
    fn from(e: tessera_model::wire::BadMessage) -> Self {
        FarmError::BadMessage(e.0)
    }
}

impl FarmError {
    /// The stable code of the error.
    pub fn code(&self) -> ErrorCode {
        match self {
            FarmError::Media { code, .. } => code.clone(),
            FarmError::Cancelled { .. } => ErrorCode::Cancelled,
            FarmError::ChildCrashed { .. } => ErrorCode::ChildCrashed,
            FarmError::ChildTimeout { .. } => ErrorCode::ChildTimeout,
            FarmError::Queue { .. } => ErrorCode::QueueError,
            FarmError::QueueRefused { .. } => ErrorCode::QueueRefused,
            FarmError::Store { .. } => ErrorCode::StoreError,
            FarmError::StoreUnavailable { .. } => ErrorCode::StoreUnavailable,
            FarmError::InvalidKey(_) => ErrorCode::InvalidKey,
            FarmError::BadMessage(_) => ErrorCode::BadMessage,
            FarmError::Io { .. } => ErrorCode::IoError,
            FarmError::WorkerUnfit { .. } => ErrorCode::WorkerUnfit,
        }
    }

    /// Retry or abort: a media failure keeps the class it was raised with, the rest take
    /// their code's class from the catalog. A crashed or timed-out child is retried (it
    /// counts as an attempt, and the queue's delivery limit ends the loop for an input that
    /// always crashes it); a bad key or message and a cancelled job are not.
    pub fn class(&self) -> ErrorClass {
        match self {
            FarmError::Media { class, .. } => *class,
            other => other.code().class(),
        }
    }

    /// A stitched output whose frame count differs from what its segments reported: retried,
    /// as a stitch that lost frames may succeed on another worker.
    pub fn frame_count_mismatch(output: u32, stitched: u64, expected: u64) -> Self {
        FarmError::Media {
            code: ErrorCode::FrameCountMismatch,
            class: ErrorClass::Retry,
            message: format!(
                "output {output}: stitched {stitched} frames but the segments reported {expected}"
            ),
        }
    }

    /// This error with `note` after its message, its code and class unchanged. Why here: a
    /// caller adding what it knows (e.g. what a rollback left behind) must not change how
    /// the error is classed, and only the enum knows where each variant keeps its text.
    pub fn with_note(self, note: &str) -> FarmError {
        use FarmError as E;
        match self {
            E::Media {
                code,
                class,
                message,
            } => E::Media {
                code,
                class,
                message: message + note,
            },
            E::ChildCrashed { what, detail } => E::ChildCrashed {
                what,
                detail: detail + note,
            },
            E::Queue { queue, reason } => E::Queue {
                queue,
                reason: reason + note,
            },
            E::QueueRefused { queue, reason } => E::QueueRefused {
                queue,
                reason: reason + note,
            },
            E::Store { key, reason } => E::Store {
                key,
                reason: reason + note,
            },
            E::StoreUnavailable { key, reason } => E::StoreUnavailable {
                key,
                reason: reason + note,
            },
            E::Io { path, reason } => E::Io {
                path,
                reason: reason + note,
            },
            E::BadMessage(m) => E::BadMessage(m + note),
            other => E::Media {
                code: other.code(),
                class: other.class(),
                message: format!("{other}{note}"),
            },
        }
    }

    /// Builds an I/O error naming the path.
    pub fn io(path: &std::path::Path, err: impl std::fmt::Display) -> Self {
        FarmError::Io {
            path: path.display().to_string(),
            reason: err.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        let media = FarmError::Media {
            code: "input_invalid".into(),
            class: ErrorClass::Abort,
            message: "x.mp4: not a readable media file".into(),
        };
        assert_eq!(media.code(), "input_invalid");
        assert_eq!(media.class(), ErrorClass::Abort);
        let crash = FarmError::ChildCrashed {
            what: "encode".into(),
            detail: "signal 11".into(),
        };
        assert_eq!(crash.class(), ErrorClass::Retry);
        assert_eq!(
            FarmError::InvalidKey("../x".into()).class(),
            ErrorClass::Abort
        );
    }
}
