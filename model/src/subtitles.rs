//! Subtitle tracks as probe finds them: text cues with their times.
//!
//! Why plain data: the probe reads cues once; the stitch writes them back and the packager
//! turns them into WebVTT without FFmpeg.

use serde::{Deserialize, Serialize};

/// Text subtitle codecs tessera keeps (FFmpeg names).
const TEXT_CODECS: [&str; 7] = ["subrip", "srt", "ass", "ssa", "mov_text", "webvtt", "text"];

/// One cue: when it shows (seconds, the source's timeline) and its ASS event line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cue {
    /// Start in seconds.
    pub start_seconds: f64,
    /// End in seconds.
    pub end_seconds: f64,
    /// The event as FFmpeg's decoders write it ("ReadOrder,Layer,Style,...,Text").
    pub ass: String,
}

/// A text subtitle track of the source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubtitleTrack {
    /// The source stream index.
    pub source_index: usize,
    /// The source codec (FFmpeg name).
    pub codec: String,
    /// ISO 639 language, kept.
    pub language: Option<String>,
    /// The track's ASS header (styles), from its decoder.
    pub header: String,
    /// The cues, in order.
    pub cues: Vec<Cue>,
}

/// Whether a subtitle codec (FFmpeg name) is text tessera keeps.
pub fn is_text(codec: &str) -> bool {
    TEXT_CODECS.contains(&codec)
}
