//! Plain data types of the media API: what probe finds, what a segment is, what to encode,
//! and what an encode request and its result are (the same for the software and GPU paths).
//!
//! Why: these cross process boundaries (child processes, queue messages) as JSON, so they are
//! serde types with no FFmpeg types inside.

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
    /// Whether a packet starts before the one ahead of it (recordings joined byte for byte,
    /// timestamps that overlap or start over): a stream copy would write time backwards, so
    /// such a track is re-encoded, its samples laid end to end.
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
    pub derived_pts: Option<crate::reorder::DerivedPts>,
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

/// Video codec of an output rendition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VideoCodec {
    /// H.264 via libx264.
    H264,
    /// HEVC via libx265.
    Hevc,
    /// AV1 via libsvtav1.
    Av1,
}

/// How the encoder spends bits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RateControl {
    /// Constant quality (x264/x265 CRF, SVT-AV1 CRF).
    Crf(f32),
    /// Average bitrate in bits/s with a VBV buffer (max rate = 1.5x, buffer = 2x).
    Bitrate(u64),
}

/// One output rendition: codec, quality and size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenditionSpec {
    /// Name used in object keys (e.g. "720p").
    pub name: String,
    /// Video codec.
    pub codec: VideoCodec,
    /// Rate control.
    pub rate: RateControl,
    /// Encoder preset name (x264/x265: ultrafast..placebo; SVT-AV1: 0..13).
    pub preset: String,
    /// Target height keeping aspect ratio; `None` keeps the source size.
    pub height: Option<u32>,
    /// What becomes of an HDR source (PQ or HLG): kept, or tone-mapped to SDR.
    #[serde(default)]
    pub hdr: crate::hdr::HdrMode,
    /// Peak bit rate cap in bits/s (VBV maximum rate, buffer twice it): with CRF a capped
    /// CRF, with a bit rate it replaces the default 1.5x cap. Streaming ladders set it so
    /// a rung's declared bandwidth holds.
    #[serde(default)]
    pub maxrate: Option<u64>,
    /// Encoder profile ("high", "main", "baseline"; "main", "main10"), the encoder's choice
    /// when absent. Players of a streaming package may support only some.
    #[serde(default)]
    pub profile: Option<String>,
}

/// The container of the final output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Container {
    /// MP4 with faststart.
    Mp4,
    /// Matroska.
    Mkv,
}

impl Container {
    /// Picks the container from a file name's extension.
    pub fn from_path(path: &std::path::Path) -> Option<Self> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "mp4" | "m4v" | "mov" => Some(Container::Mp4),
            "mkv" => Some(Container::Mkv),
            _ => None,
        }
    }

    /// The file extension of the container ("mp4", "mkv"): how output names are written.
    pub fn extension(self) -> &'static str {
        match self {
            Container::Mp4 => "mp4",
            Container::Mkv => "mkv",
        }
    }
}

/// How to run a segment on an NVIDIA card (NVDEC -> scale_cuda -> NVENC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HardwareEncode {
    /// CUDA ordinal of the card (decode and encode both run on it).
    pub device: u32,
    /// Decode on the card's NVDEC; when false (or the source is one NVDEC cannot decode),
    /// decode in software and upload each frame once.
    #[serde(default = "yes")]
    pub nvdec: bool,
    /// NVENC spatial adaptive quantisation.
    #[serde(default)]
    pub spatial_aq: bool,
    /// NVENC temporal adaptive quantisation (turns on look-ahead).
    #[serde(default)]
    pub temporal_aq: bool,
    /// Spatial AQ strength, 1 (low) ..= 15 (aggressive); NVENC's default is 8.
    #[serde(default)]
    pub aq_strength: Option<u8>,
    /// Constant bitrate instead of VBR for bitrate renditions.
    #[serde(default)]
    pub cbr: bool,
    /// Rate-control look-ahead in frames (NVENC's `rc-lookahead`).
    #[serde(default)]
    pub lookahead: Option<u16>,
    /// Decode and scale on the card, encode with the software encoders (scale_cuda ->
    /// hwdownload -> libx264/libx265): for cards without NVENC (A100, H100, H200), whose
    /// NVDEC and CUDA cores still take decoding and scaling off the CPU.
    #[serde(default)]
    pub software_encode: bool,
}

fn yes() -> bool {
    true
}

impl Default for HardwareEncode {
    fn default() -> Self {
        HardwareEncode {
            device: 0,
            nvdec: true,
            spatial_aq: false,
            temporal_aq: false,
            aq_strength: None,
            cbr: false,
            software_encode: false,
            lookahead: None,
        }
    }
}

/// One rendition to produce from a segment, and where to write it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenditionOutput {
    /// What to encode.
    pub spec: RenditionSpec,
    /// The NUT file to write.
    pub path: PathBuf,
}

/// Everything a worker needs to encode a segment; travels as JSON to the child process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncodeRequest {
    /// The chunk file (NUT) holding the segment's packets and its pre-roll.
    pub chunk: PathBuf,
    /// First source pts to encode (inclusive), in `time_base`.
    pub start_pts: i64,
    /// First source pts not to encode (exclusive).
    pub end_pts: i64,
    /// The source video time base: all pts here are in it, and the encoder keeps it.
    pub time_base: Rational,
    /// The bias added to timestamps in the chunk (and added again in the output).
    pub bias: i64,
    /// The source's frame rate, a hint for rate control.
    pub frame_rate: Rational,
    /// The source's sample aspect ratio.
    pub sample_aspect_ratio: Rational,
    /// The source's size as the probe saw it (its first frames), from which every segment's
    /// output size is made, whatever size the chunk's own frames have: a source whose size
    /// changes mid-stream still gives segments of one size that stitch. `None`: the chunk's.
    #[serde(default)]
    pub source_size: Option<(u32, u32)>,
    /// Colour tags to carry to the output.
    pub color: ColorInfo,
    /// Source bits per component (picks 10-bit output for HEVC/AV1).
    pub source_bit_depth: u8,
    /// Renditions to produce.
    pub outputs: Vec<RenditionOutput>,
    /// Threads for the decoder and each encoder.
    pub threads: usize,
    /// Run on an NVIDIA card (NVDEC/scale_cuda/NVENC) instead of the software encoders.
    #[serde(default)]
    pub hardware: Option<HardwareEncode>,
    /// Source pts (ascending, unbiased) of frames every rendition must encode as an IDR: the
    /// starts of a streaming package's media segments, so all rungs switch at the same frames.
    #[serde(default)]
    pub keyframes: Vec<i64>,
    /// Still images to take of frames in the range (posters, thumbnails, sprite tiles),
    /// software path only.
    #[serde(default)]
    pub stills: Vec<crate::stills::StillShot>,
}

/// What one rendition of a segment came out as.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenditionResult {
    /// Rendition name.
    pub name: String,
    /// Frames encoded.
    pub frames: u64,
    /// First encoded pts (source time base, unbiased).
    pub first_pts: Option<i64>,
    /// Last encoded pts.
    pub last_pts: Option<i64>,
    /// Output width.
    pub width: u32,
    /// Output height.
    pub height: u32,
    /// Output size in bytes.
    pub bytes: u64,
    /// Whether the first packet is a keyframe (IDR), as stitching needs.
    pub starts_with_keyframe: bool,
}

/// The result of encoding a segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncodeResult {
    /// Frames the decoder produced (pre-roll included).
    pub decoded_frames: u64,
    /// Frames inside the range (what every rendition encoded).
    pub frames_in_range: u64,
    /// Per rendition.
    pub renditions: Vec<RenditionResult>,
    /// Seconds spent decoding, scaling and encoding.
    pub media_seconds: f64,
    /// Packets of the range the decoder rejected plus frames it flagged damaged: summed over
    /// the job and compared with its `source_corrupt` limit.
    #[serde(default)]
    pub decode_errors: u64,
}
