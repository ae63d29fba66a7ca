//! What probe finds in a source and what a segment of it is: plain data.
//!
//! Why here, below FFmpeg: these cross process boundaries (the media child, queue messages)
//! as JSON, and the planner, the packager and the dispatcher read them without linking FFmpeg.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// An exact rational number (time bases, frame rates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rational {
    /// Numerator.
    pub num: i32,
    /// Denominator.
    pub den: i32,
}

impl Rational {
    /// Builds a rational.
    pub fn new(num: i32, den: i32) -> Self {
        Rational { num, den }
    }

    /// The value as a float; 0 when the denominator is 0.
    pub fn as_f64(self) -> f64 {
        if self.den == 0 {
            0.0
        } else {
            f64::from(self.num) / f64::from(self.den)
        }
    }

    /// Converts a timestamp in this time base to seconds.
    pub fn seconds(self, ts: i64) -> f64 {
        ts as f64 * self.as_f64()
    }

    /// Converts seconds to the nearest timestamp in this time base.
    pub fn ticks(self, seconds: f64) -> i64 {
        if self.num == 0 {
            return 0;
        }
        (seconds * f64::from(self.den) / f64::from(self.num)).round() as i64
    }
}

/// Colour properties of a video stream, kept from source to output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColorInfo {
    /// Colour primaries (FFmpeg name, e.g. "bt709"), if tagged.
    pub primaries: Option<String>,
    /// Transfer characteristics (e.g. "smpte2084"), if tagged.
    pub transfer: Option<String>,
    /// Matrix coefficients (e.g. "bt709"), if tagged.
    pub matrix: Option<String>,
    /// "tv" (limited) or "pc" (full), if tagged.
    pub range: Option<String>,
    /// HDR10 static metadata of the source (mastering display, content light level), kept in
    /// HEVC and AV1 outputs.
    #[serde(default)]
    pub hdr: Option<crate::hdr::HdrMetadata>,
}

/// Properties of the video stream tessera transcodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VideoInfo {
    /// Stream index in the container.
    pub index: usize,
    /// Codec name (h264, hevc, vp9, mpeg2video, prores, ...).
    pub codec: String,
    /// Coded width in pixels.
    pub width: u32,
    /// Coded height in pixels.
    pub height: u32,
    /// Pixel format name (yuv420p, yuv422p10le, ...).
    pub pix_fmt: String,
    /// Bits per component of the pixel format.
    pub bit_depth: u8,
    /// Average frame rate (0/0 when unknown).
    pub avg_frame_rate: Rational,
    /// The stream's base frame rate (r_frame_rate).
    pub frame_rate: Rational,
    /// The stream's time base: every pts in plans and segments is in this unit.
    pub time_base: Rational,
    /// Sample aspect ratio (0/1 when unknown).
    pub sample_aspect_ratio: Rational,
    /// Rotation from the display matrix, degrees counter-clockwise (0 when none).
    pub rotation: f64,
    /// The raw 36-byte display matrix, when present, copied to the output unchanged.
    pub display_matrix: Option<Vec<u8>>,
    /// Colour tags.
    pub color: ColorInfo,
    /// Number of packets (≈ frames) the scan found, discarded ones excluded.
    pub frames: u64,
}

/// Properties of one audio track.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AudioInfo {
    /// Stream index in the container.
    pub index: usize,
    /// Codec name (aac, opus, mp2, pcm_s16le, ...).
    pub codec: String,
    /// Sample rate in Hz.
    pub sample_rate: u32,
    /// Channel count.
    pub channels: u16,
    /// ISO 639 language tag, when the container has one.
    pub language: Option<String>,
    /// The stream's time base.
    pub time_base: Rational,
    /// Seconds of the first presented packet, if any packet was found.
    pub start_seconds: Option<f64>,
    /// Seconds from the first to the end of the last presented packet.
    pub duration_seconds: f64,
    /// Whether the container trims this track (edit-list discard): a stream copy would not
    /// reproduce the trim exactly, so such a track is re-encoded.
    pub trimmed: bool,
    /// Whether its packets do not follow on (recordings joined byte for byte, timestamps that
    /// overlap, leave a gap or start over): a stream copy would keep the overlap or the gap,
    /// so such a track is re-encoded, each frame laid at its own time (overlaps trimmed, gaps
    /// filled with silence).
    #[serde(default)]
    pub discontinuous: bool,
}

impl AudioInfo {
    /// Whether the track goes into the output by stream copy: AAC the container does not trim,
    /// whose timestamps only rise, with its rate and channels stated (an MPEG-TS demuxer may
    /// leave them unset; then the decoder reads them from the ADTS headers and the track is
    /// re-encoded).
    pub fn stream_copies(&self) -> bool {
        self.codec == "aac"
            && !self.trimmed
            && !self.discontinuous
            && self.sample_rate > 0
            && self.channels > 0
    }
}

/// One video packet from the scan, in decode order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketEntry {
    /// Presentation timestamp in the video time base.
    pub pts: i64,
    /// Decode timestamp in the video time base.
    pub dts: i64,
    /// Decoding may start here: the demuxer flags a keyframe and, for H.264/HEVC, the
    /// bitstream confirms a clean random-access point (see `bitstream`).
    pub key: bool,
    /// Packet the demuxer marks as discard (edit-list pre-roll): decoded but never shown.
    pub discard: bool,
    /// A recovery point (x264 intra-refresh): decoding may start here, and the pictures are
    /// whole again this many packets later in decode order (the probe converts the
    /// bitstream's count of reference pictures into packets).
    #[serde(default)]
    pub recovery: Option<u32>,
}

/// Everything the probe learns about an input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeInfo {
    /// Container format name(s) as FFmpeg reports them.
    pub container: String,
    /// Duration in seconds (container's figure, else derived from packets).
    pub duration_seconds: f64,
    /// Seconds of the earliest presented packet over video and audio: the output's time zero.
    pub start_seconds: f64,
    /// The video stream.
    pub video: VideoInfo,
    /// Every audio track, in container order.
    pub audio: Vec<AudioInfo>,
    /// Size of the input in bytes.
    pub size_bytes: u64,
    /// The streams tessera does not carry into the output, each described in words
    /// ("stream 3: subtitle subrip (fra)"), so a report can say what was left out.
    #[serde(default)]
    pub ignored: Vec<String>,
    /// Chapters, on the source's timeline.
    #[serde(default)]
    pub chapters: Vec<Chapter>,
    /// The container's title, kept in the output.
    #[serde(default)]
    pub title: Option<String>,
    /// Text subtitle tracks with their cues, kept in the output.
    #[serde(default)]
    pub subtitles: Vec<crate::subtitles::SubtitleTrack>,
    /// What the user should know about how the input was read (timestamps that jumped back,
    /// ...), carried into the job's warnings.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Seconds each later run of the video's timestamps was moved by, in order: recordings
    /// joined byte for byte whose timestamps start over are laid one after the other, and the
    /// audio step moves the audio's runs by the same, so each recording keeps its own sync.
    /// Empty when the timestamps never jump back.
    #[serde(default)]
    pub run_shifts_seconds: Vec<f64>,
}

/// One chapter of the source: where it starts and ends (seconds, the source's timeline) and
/// its title. Kept in the output, moved to the output's zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chapter {
    /// Start in seconds.
    pub start_seconds: f64,
    /// End in seconds.
    pub end_seconds: f64,
    /// Its title, if any.
    pub title: Option<String>,
}

/// The probe's full answer: stream info plus the packet index the planner needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Probe {
    /// Stream and container facts.
    pub info: ProbeInfo,
    /// Every video packet in decode order, with dts derived from pts (see `timestamps`).
    #[serde(with = "crate::index_codec")]
    pub packets: Vec<PacketEntry>,
    /// How the split derives the same dts while it streams the packets.
    pub dts_rule: crate::timestamps::DtsRule,
    /// The pts the probe derived for a container that stores none (AVI, MXF without
    /// temporal offsets, B-frames): the split writes these into the chunks.
    #[serde(default)]
    pub derived_pts: Option<crate::timestamps::DerivedPts>,
}

/// One planned segment: a half-open presentation-time range of the video.
///
/// Why: ranges, not frame counts, make segments frame-exact: every frame whose pts lies in
/// `[start_pts, end_pts)` belongs to exactly one segment, whatever the GOP structure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentPlan {
    /// 0-based index.
    pub index: u32,
    /// First pts included (video time base). The first segment starts at the first shown frame.
    pub start_pts: i64,
    /// First pts excluded (for the last segment: one past the last shown frame).
    pub end_pts: i64,
    /// Index into the packet list of the keyframe decoding starts from.
    pub first_packet: usize,
    /// Index into the packet list of the last packet the chunk needs (inclusive).
    pub last_packet: usize,
    /// Frames expected in the range (shown packets with pts in range).
    pub frames: u64,
    /// True when the range starts on a keyframe (no pre-roll to decode and drop).
    pub starts_on_keyframe: bool,
    /// Pts of the first frame shown in the range: the QC gate checks the encoded segment
    /// against it, so a decoder that lost the range's first frames cannot go unnoticed.
    #[serde(default)]
    pub first_frame_pts: Option<i64>,
    /// Pts of the last frame shown in the range (checked the same way).
    #[serde(default)]
    pub last_frame_pts: Option<i64>,
}

/// The file name of a segment's chunk inside the split directory.
///
/// Why here: the split writes the chunks and the engine uploads them by the same name; one
/// definition on the plain-data side keeps the engine free of the media crate.
pub fn chunk_file_name(index: u32) -> String {
    format!("{index:06}.nut")
}

/// What a chunk holds, for the worker that encodes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChunkInfo {
    /// The segment the chunk serves.
    pub index: u32,
    /// Where it was written.
    pub path: PathBuf,
    /// Packets in the chunk (pre-roll included).
    pub packets: u64,
    /// Size in bytes.
    pub bytes: u64,
}
