//! What a written package holds, as the manifest writers and the validator see it.
//!
//! Why one set of types: the segmenter (media crate) fills them from the files it wrote and
//! the boxes in them; the writers turn them into playlists and an MPD; the validator checks
//! the text against them. All times are integers in the track's timescale, so the DASH
//! timeline is exact and HLS durations are rounded only when printed.

use serde::{Deserialize, Serialize};

/// What kind of media a track carries, with what its manifest entries need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TrackKind {
    /// A video rendition (one rung of the ladder).
    Video {
        /// Coded width in pixels.
        width: u32,
        /// Coded height in pixels.
        height: u32,
        /// Frame rate as a fraction (num, den).
        frame_rate: (u32, u32),
    },
    /// An audio rendition.
    Audio {
        /// ISO 639 language code ("und" when unknown).
        language: String,
        /// Channel count.
        channels: u32,
        /// Sample rate in Hz.
        sample_rate: u32,
    },
    /// A WebVTT subtitle rendition.
    Subtitles {
        /// ISO 639 language code ("und" when unknown).
        language: String,
        /// The whole WebVTT file a DASH manifest side-loads (root-relative); `None`: the
        /// track's first segment is the whole file.
        #[serde(default)]
        file: Option<String>,
    },
}

impl TrackKind {
    /// Whether this is a video rendition.
    pub fn is_video(&self) -> bool {
        matches!(self, TrackKind::Video { .. })
    }
}

/// One media segment file of a track.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaSegment {
    /// File name relative to the track's playlist / the MPD (e.g. "v0/seg-00003.m4s").
    pub uri: String,
    /// Start (earliest presentation time; fMP4: the tfdt) in the track timescale.
    pub start: u64,
    /// Duration in the track timescale.
    pub duration: u64,
    /// Size in bytes.
    pub bytes: u64,
    /// Byte length of the segment's first (key) frame from the start of the file, when known:
    /// what an I-frame playlist's EXT-X-BYTERANGE covers.
    #[serde(default)]
    pub key_frame_bytes: Option<u64>,
}

/// One track of a package: a video rung, an audio language or a subtitle language.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Track {
    /// Stable id, used in file names and as the DASH Representation id (e.g. "v0", "a0").
    pub id: String,
    /// What it carries.
    pub kind: TrackKind,
    /// RFC 6381 codec string ("avc1.64001f", "mp4a.40.2", "wvtt").
    pub codec: String,
    /// The fMP4 initialisation segment (EXT-X-MAP / DASH Initialization), relative; `None`
    /// for MPEG-TS and WebVTT.
    pub init: Option<String>,
    /// The media playlist of this track, relative to the master playlist.
    pub playlist: String,
    /// Ticks per second of `MediaSegment::start`/`duration`.
    pub timescale: u32,
    /// The segments in order.
    pub segments: Vec<MediaSegment>,
}

impl Track {
    /// Total duration in seconds.
    pub fn seconds(&self) -> f64 {
        let ticks: u64 = self.segments.iter().map(|s| s.duration).sum();
        ticks as f64 / f64::from(self.timescale.max(1))
    }

    /// Peak bit rate over its segments (bits/s): what HLS BANDWIDTH must be at least.
    pub fn peak_bitrate(&self) -> u64 {
        self.segments
            .iter()
            .filter(|s| s.duration > 0)
            .map(|s| {
                let secs = s.duration as f64 / f64::from(self.timescale.max(1));
                (s.bytes as f64 * 8.0 / secs).ceil() as u64
            })
            .max()
            .unwrap_or(0)
    }

    /// Average bit rate over the whole track (bits/s): HLS AVERAGE-BANDWIDTH.
    pub fn average_bitrate(&self) -> u64 {
        let secs = self.seconds();
        if secs <= 0.0 {
            return 0;
        }
        let bytes: u64 = self.segments.iter().map(|s| s.bytes).sum();
        (bytes as f64 * 8.0 / secs).ceil() as u64
    }
}

/// A whole package: its tracks and the names of its manifests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Package {
    /// Video rungs (highest first), audio languages, subtitle languages.
    pub tracks: Vec<Track>,
    /// The HLS master playlist's name, when the package has HLS ("master.m3u8").
    pub hls_master: Option<String>,
    /// The DASH manifest's name, when the package has DASH ("manifest.mpd").
    pub dash_manifest: Option<String>,
    /// Whether the HLS segments are MPEG-TS (no EXT-X-MAP; HLS version 3 players).
    pub ts: bool,
    /// The target media segment length in seconds (the spec's `segment_seconds`).
    pub segment_seconds: f64,
    /// Sprite sheets to list in the MPD as a thumbnail track, when the package has them.
    #[serde(default)]
    pub tiles: Option<TileTrack>,
}

/// Sprite sheets as a DASH-IF thumbnail track (DASH-IF IOP 4.3, 6.2.6): each sheet is one
/// segment of `columns` x `rows` tiles, each tile `interval` seconds of the video.
///
/// Why in the MPD: DASH players (dash.js, Shaka) show scrub previews only from an image
/// AdaptationSet; the WebVTT thumbnails track serves HLS players and web pages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TileTrack {
    /// Root-relative media template of the sheets ("thumbnails/sprite-$Number%04d$.jpg").
    pub template: String,
    /// The number of the first sheet in `template`.
    pub start_number: u64,
    /// "image/jpeg" or "image/webp".
    pub mime: String,
    /// One tile's width and height in pixels (a sheet is `columns` x `rows` tiles).
    pub tile: (u32, u32),
    /// Tiles across a sheet.
    pub columns: u32,
    /// Tiles down a sheet.
    pub rows: u32,
    /// Seconds of video per tile.
    pub interval: f64,
    /// The largest sheet's size in bytes (for the Representation's bandwidth).
    pub largest_bytes: u64,
}

impl TileTrack {
    /// Milliseconds of video one sheet covers (the SegmentTemplate duration, timescale 1000).
    pub fn sheet_millis(&self) -> u64 {
        (self.interval * f64::from(self.columns * self.rows) * 1000.0).round() as u64
    }

    /// Bits per second of the largest sheet over the time it covers.
    pub fn bandwidth(&self) -> u64 {
        let seconds = self.sheet_millis().max(1) as f64 / 1000.0;
        ((self.largest_bytes as f64 * 8.0 / seconds).ceil() as u64).max(1)
    }
}
