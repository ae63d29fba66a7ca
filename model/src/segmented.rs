//! One track cut into package segments (CMAF fragments or MPEG-TS files): the request and
//! the segments written.
//!
//! Why plain data: the media child cuts, the packager writes the manifests from the result.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Which stream of the input to package.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamPick {
    /// The (first) video stream.
    Video,
    /// The n-th audio stream (0-based among audio streams).
    Audio(usize),
}

/// One track to cut into media segments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentRequest {
    /// The stitched rendition (MP4).
    pub input: PathBuf,
    /// The stream to package.
    pub stream: StreamPick,
    /// The package root; files go to `root/dir/`.
    pub root: PathBuf,
    /// The track's folder under the root (e.g. "v0").
    pub dir: String,
    /// MPEG-TS segments instead of fMP4.
    pub ts: bool,
    /// Media segment length in seconds (cuts at the first keyframe at or after each multiple).
    pub segment_seconds: f64,
}

/// What was written for one track.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentedTrack {
    /// The init segment, relative to the root (fMP4 only).
    pub init: Option<String>,
    /// Media segments relative to the root, with the muxer's duration (seconds) for each.
    pub segments: Vec<(String, f64)>,
    /// Codec name (FFmpeg's: "h264", "hevc", "av1", "aac").
    pub codec: String,
    /// The codec configuration (avcC / hvcC / av1C record, AAC AudioSpecificConfig).
    pub config: Vec<u8>,
    /// Video width and height (0 for audio).
    pub size: (u32, u32),
    /// Video frame rate (num, den) as measured: the rendition's average (frames over its
    /// duration, which may miss part of a frame: 30.003 for a 30/1 source); (0, 1) for
    /// audio. A package states the source's nominal rate instead when the source has a
    /// constant one (`tessera_package::assemble::frame_rate`).
    pub frame_rate: (u32, u32),
    /// Audio channels and sample rate (0 for video).
    pub audio: (u32, u32),
    /// The stream's language tag ("und" when none).
    pub language: String,
    /// Pts of the first packet in seconds as written (for video, the media time of the first
    /// frame: what a WebVTT X-TIMESTAMP-MAP names).
    pub first_seconds: f64,
}
