//! What one segment needs from a card: encode sessions, AV1 encode, an NVDEC session.

use crate::decode::DecodeFormat;
use serde::{Deserialize, Serialize};

/// The sessions one segment needs, all on one card and all at once.
///
/// Why: a segment encoding three renditions opens three NVENC sessions in one process; if
/// only two could open it would fail part-way, so the scheduler grants all or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SessionNeed {
    /// Encode sessions: one per rendition encoded on NVENC.
    pub encode_sessions: u32,
    /// Whether any of those renditions is AV1 (only Ada and later NVENC encode AV1).
    pub needs_av1_encode: bool,
    /// `Some(format)`: decode on NVDEC, which takes one decode session on a card whose
    /// NVDEC decodes `format`. `None`: decode in software and upload (no decode session).
    pub nvdec: Option<DecodeFormat>,
}

impl SessionNeed {
    /// `renditions` encode sessions, software decode, no AV1.
    pub fn encode(renditions: u32) -> Self {
        SessionNeed {
            encode_sessions: renditions,
            needs_av1_encode: false,
            nvdec: None,
        }
    }

    /// The same need, decoding `format` on NVDEC.
    pub fn with_nvdec(mut self, format: DecodeFormat) -> Self {
        self.nvdec = Some(format);
        self
    }

    /// The same need, with an AV1 rendition.
    pub fn with_av1_encode(mut self) -> Self {
        self.needs_av1_encode = true;
        self
    }

    /// Whether the need asks for nothing (no encode session, no NVDEC): such a need is not
    /// scheduled on a GPU at all (`try_acquire` gives `None`, `capacity_for` 0).
    pub fn is_empty(&self) -> bool {
        self.encode_sessions == 0 && self.nvdec.is_none()
    }
}
