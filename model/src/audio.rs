//! A job's audio: what to encode from which tracks, and the tracks it gave.
//!
//! Why plain data: the dispatcher encodes audio once per job in the media child and hands the
//! tracks to every output's stitch through the queue.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::probe::Rational;

/// What to do with the input's audio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AudioRequest {
    /// The source file.
    pub input: PathBuf,
    /// Container stream indices of the tracks to keep, in output order.
    pub tracks: Vec<usize>,
    /// Seconds added to every timestamp (the job's bias), keeping intermediate times >= 0.
    pub bias_seconds: f64,
    /// Tracks (stream indices) that may be stream-copied when already AAC; the others are
    /// re-encoded.
    pub copy_tracks: Vec<usize>,
    /// AAC bitrate per channel in bits/s.
    pub bitrate_per_channel: u64,
    /// The NUT file to write, one stream per kept track.
    pub output: PathBuf,
    /// Mix tracks of more than two channels down to stereo (else every layout up to 7.1 keeps
    /// its channels).
    #[serde(default)]
    pub stereo_downmix: bool,
    /// Seconds the probe moved each later run of the video's timestamps by (recordings joined
    /// byte for byte whose timestamps start over, [`crate::probe::ProbeInfo::run_shifts_seconds`]):
    /// the audio's runs move by the same, so each recording keeps its own sync.
    #[serde(default)]
    pub run_shifts_seconds: Vec<f64>,
}

/// What became of one track.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AudioTrackResult {
    /// The source stream index.
    pub source_index: usize,
    /// Output codec name.
    pub codec: String,
    /// Whether it was stream-copied.
    pub copied: bool,
    /// ISO 639 language, kept from the source.
    pub language: Option<String>,
    /// Encoder priming samples the final muxer must skip (AAC: 1024), 0 when copied.
    pub initial_padding: i32,
    /// The bias in this track's time base (what readers subtract).
    pub bias: i64,
    /// This track's time base in the intermediate file.
    pub time_base: Rational,
    /// Packets written.
    pub packets: u64,
}

/// The result of the audio step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AudioResult {
    /// Per kept track, in output order.
    pub tracks: Vec<AudioTrackResult>,
}
