//! Sources at the edges of A/V sync (issue 44): recordings that begin in the middle of a GOP,
//! every channel layout up to 7.1, recordings joined byte for byte whose audio overlaps or
//! leaves a gap at the join, and the three inputs the issue reported, made again from their
//! description.
//!
//! Why a generator of its own: these axes hid three classes of failure that the cross product
//! (3 s clips cut every second) and the field recordings could not express. A cut lands at a
//! seeded transport packet (or program stream pack) offset, so the pictures before the first
//! keyframe are whatever the seed gives; a join's overlap or gap is seeded in size. Every
//! source carries a flash and a beep at each whole second ([`crate::sync`]), so the oracle
//! checks sync at every second, not only at the start and in total.

use super::{hash, MATRIX_SEED};
use crate::fixture::{build_recipe, Recipe};
use crate::probe::{frame_count, packet_count};
use crate::sync::{beep_source, flash_filter};

/// Segment length for edge cases (s): several segments, cuts between keyframes (GOPs are 2 s).
pub const EDGE_SEGMENT_SECONDS: u32 = 2;

/// A container a recording is cut from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CutContainer {
    /// MPEG-TS, cut at a 188-byte transport packet.
    Ts,
    /// An MPEG program stream, cut at a 2048-byte pack.
    Ps,
}

/// A video codec a cut recording is coded in, with B-frames and GOPs as broadcasts have them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CutCodec {
    /// H.264, closed GOP of 50 with 3 B-frames.
    H264,
    /// HEVC from x265, open GOPs of 50 (CRA with RASL leading pictures).
    Hevc,
    /// MPEG-2, open GOPs of 15 with 2 B-frames.
    Mpeg2,
}

/// The audio of a layout case: one track of a layout, or eight mono tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layout {
    /// One track of this FFmpeg layout name (`mono`, `2.1`, `7.1`, ...).
    Track(&'static str),
    /// Eight mono tracks (a field recorder's channels, each its own track).
    EightMono,
}

/// One class of edge source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeClass {
    /// A 12 s recording cut at a seeded offset (20-70 % of its bytes): AAC in TS, AC-3 in PS.
    Cut(CutContainer, CutCodec),
    /// H.264 with 24-bit PCM of a layout in MOV.
    Layout(Layout),
    /// Two MPEG-TS recordings joined byte for byte, video timestamps continuous, the first one's
    /// audio running over its video by a seeded 10-250 ms (`overlap`) or stopping a seeded
    /// 40-600 ms short of it (a gap); the second one 640x360 again or 1280x720.
    Join {
        /// The first audio runs over (else it stops short).
        overlap: bool,
        /// The second recording is 1280x720.
        size_change: bool,
    },
    /// Issue 44's first input: H.264 in MPEG-TS, 1280x720, GOP 50 with 3 B-frames, AAC, cut
    /// at a transport packet 40 % into a 12 s recording.
    ReportedMidGop,
    /// Issue 44's second input: 7.1 24-bit PCM in MOV beside H.264.
    ReportedSevenOne,
    /// Issue 44's third input: two MPEG-TS recordings, 640x360 then 1280x720, continuous
    /// video timestamps, each with its own AAC priming, joined byte for byte.
    ReportedJoin,
}

/// Every channel layout case, in table order.
pub const LAYOUTS: [Layout; 9] = [
    Layout::Track("mono"),
    Layout::Track("stereo"),
    Layout::Track("2.1"),
    Layout::Track("quad"),
    Layout::Track("5.0"),
    Layout::Track("5.1"),
    Layout::Track("6.1"),
    Layout::Track("7.1"),
    Layout::EightMono,
];

impl EdgeClass {
    /// Every class, in table order.
    pub fn all() -> Vec<EdgeClass> {
        let mut all = Vec::new();
        for container in [CutContainer::Ts, CutContainer::Ps] {
            for codec in [CutCodec::H264, CutCodec::Hevc, CutCodec::Mpeg2] {
                all.push(EdgeClass::Cut(container, codec));
            }
        }
        all.extend(LAYOUTS.map(EdgeClass::Layout));
        for overlap in [true, false] {
            for size_change in [false, true] {
                all.push(EdgeClass::Join {
                    overlap,
                    size_change,
                });
            }
        }
        all.extend([
            EdgeClass::ReportedMidGop,
            EdgeClass::ReportedSevenOne,
            EdgeClass::ReportedJoin,
        ]);
        all
    }

    /// The axis of the class, for the CI sample (one case of each).
    pub fn axis(self) -> &'static str {
        match self {
            EdgeClass::Cut(..) => "cut",
            EdgeClass::Layout(_) => "layout",
            EdgeClass::Join { .. } => "join",
            _ => "reported",
        }
    }

    /// The class's token (the case name adds its seeded figure).
    pub fn token(self) -> String {
        let codec = |c: CutCodec| match c {
            CutCodec::H264 => "h264",
            CutCodec::Hevc => "hevc",
            CutCodec::Mpeg2 => "mpeg2",
        };
        match self {
            EdgeClass::Cut(CutContainer::Ts, c) => format!("cut-ts-{}", codec(c)),
            EdgeClass::Cut(CutContainer::Ps, c) => format!("cut-ps-{}", codec(c)),
            EdgeClass::Layout(Layout::Track(l)) => format!("mov-pcm24-{l}"),
            EdgeClass::Layout(Layout::EightMono) => "mov-pcm24-8xmono".into(),
            EdgeClass::Join {
                overlap,
                size_change,
            } => format!(
                "join-ts-{}{}",
                if overlap { "overlap" } else { "gap" },
                if size_change { "-sizechange" } else { "" }
            ),
            EdgeClass::ReportedMidGop => "issue44-ts-h264-720p-midgop".into(),
            EdgeClass::ReportedSevenOne => "issue44-mov-pcm24-7.1".into(),
            EdgeClass::ReportedJoin => "issue44-ts-join-360p-720p".into(),
        }
    }
}

/// One edge case: a class and the seed of its figures (cut offset, overlap or gap size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EdgeCase {
    /// The class.
    pub class: EdgeClass,
    /// The seed.
    pub seed: u64,
}

impl EdgeCase {
    /// The seeded figure of the case: a cut's offset in thousandths of the recording's bytes,
    /// a join's overlap or gap in ms; 0 for the others.
    pub fn figure(&self) -> u32 {
        let h = hash(self.seed, &["edge", &self.class.token()]);
        match self.class {
            EdgeClass::Cut(..) => 200 + (h % 501) as u32,
            EdgeClass::Join { overlap: true, .. } => 10 + (h % 241) as u32,
            EdgeClass::Join { overlap: false, .. } => 40 + (h % 561) as u32,
            _ => 0,
        }
    }

    /// The case name: the class token and its figure (`cut-ts-hevc-at437`, `join-ts-gap-212ms`).
    pub fn name(&self) -> String {
        let t = self.class.token();
        match self.class {
            EdgeClass::Cut(..) => format!("{t}-at{}", self.figure()),
            EdgeClass::Join { .. } => format!("{t}-{}ms", self.figure()),
            _ => t,
        }
    }

    /// Container, video, audio and timing as the table shows them.
    pub fn labels(&self) -> super::axes::Labels {
        let l = |container, video, audio, timing| super::axes::Labels {
            container,
            video,
            audio,
            timing,
        };
        let codec = |c| match c {
            CutCodec::H264 => "H.264, GOP 50, 3 B-frames",
            CutCodec::Hevc => "HEVC, open GOP 50",
            CutCodec::Mpeg2 => "MPEG-2, open GOP 15",
        };
        match self.class {
            EdgeClass::Cut(CutContainer::Ts, c) => l("MPEG-TS", codec(c), "AAC", "starts mid-GOP"),
            EdgeClass::Cut(CutContainer::Ps, c) => l("MPEG-PS", codec(c), "AC-3", "starts mid-GOP"),
            EdgeClass::Layout(Layout::Track(_)) => {
                l("QuickTime MOV", "H.264", "PCM 24-bit", "channel layout")
            }
            EdgeClass::Layout(Layout::EightMono) => l(
                "QuickTime MOV",
                "H.264",
                "8 mono PCM tracks",
                "channel layout",
            ),
            EdgeClass::Join { overlap, .. } => l(
                "MPEG-TS",
                "H.264, two recordings joined",
                "AAC",
                if overlap {
                    "audio overlaps at the join"
                } else {
                    "audio gap at the join"
                },
            ),
            EdgeClass::ReportedMidGop => l("MPEG-TS", "H.264 1280x720", "AAC", "starts mid-GOP"),
            EdgeClass::ReportedSevenOne => l("QuickTime MOV", "H.264", "PCM 24-bit 7.1", "7.1"),
            EdgeClass::ReportedJoin => l(
                "MPEG-TS",
                "H.264 640x360 then 1280x720",
                "AAC",
                "joined, own priming",
            ),
        }
    }

    /// What the report must say about the case: an undecodable head (when the cut left one:
    /// FFmpeg decodes fewer frames than the demuxer reads packets) and each audio repair are
    /// warned.
    pub fn expected_warning(&self) -> Option<&'static str> {
        match self.class {
            EdgeClass::Cut(..) | EdgeClass::ReportedMidGop => {
                let head = std::panic::catch_unwind(|| {
                    let src = self.build();
                    packet_count(&src) > frame_count(&src)
                });
                head.unwrap_or(false).then_some("cannot be decoded")
            }
            EdgeClass::Join { overlap: true, .. } | EdgeClass::ReportedJoin => Some("overlap"),
            EdgeClass::Join { overlap: false, .. } => Some("filled with silence"),
            _ => None,
        }
    }

    /// Path of the clip, building it with ffmpeg unless it is cached.
    pub fn build(&self) -> std::path::PathBuf {
        build_recipe(&self.name(), &self.recipe())
    }

    fn recipe(&self) -> Recipe {
        match self.class {
            EdgeClass::Cut(container, codec) => cut(container, codec, "640x360", self.figure()),
            EdgeClass::ReportedMidGop => cut(CutContainer::Ts, CutCodec::H264, "1280x720", 400),
            EdgeClass::Layout(layout) => with_layout(layout),
            EdgeClass::ReportedSevenOne => with_layout(Layout::Track("7.1")),
            EdgeClass::Join {
                overlap,
                size_change,
            } => {
                let ms = self.figure() as i64;
                let second = if size_change { "1280x720" } else { "640x360" };
                joined(["640x360", second], if overlap { ms } else { -ms })
            }
            EdgeClass::ReportedJoin => joined(["640x360", "1280x720"], 0),
        }
    }
}

/// A flashing test pattern of `size` at 25 fps for `secs` seconds.
fn flashing(size: &str, secs: f64) -> String {
    format!(
        "-f lavfi -i testsrc2=size={size}:rate=25:duration={secs},{}",
        flash_filter("25")
    )
}

/// A 12 s recording of `codec` in `container`, cut `permille` thousandths into its bytes.
fn cut(container: CutContainer, codec: CutCodec, size: &str, permille: u32) -> Recipe {
    let video = match codec {
        CutCodec::H264 => "-c:v libx264 -preset veryfast -pix_fmt yuv420p \
            -x264-params keyint=50:min-keyint=50:scenecut=0:bframes=3:b-adapt=0"
            .to_string(),
        CutCodec::Hevc => "-c:v libx265 -preset veryfast -pix_fmt yuv420p \
            -x265-params keyint=50:min-keyint=50:scenecut=0:bframes=3:log-level=error"
            .to_string(),
        CutCodec::Mpeg2 => "-c:v mpeg2video -g 15 -bf 2 -b:v 3M".to_string(),
    };
    let (audio, format, align, ext) = match container {
        CutContainer::Ts => ("-c:a aac -b:a 96k", "mpegts", 188, "ts"),
        CutContainer::Ps => ("-c:a ac3 -b:a 192k", "vob", 2048, "mpg"),
    };
    Recipe {
        ext,
        steps: vec![
            format!(
                "{} {} -map 0:v -map 1:a {video} {audio} -f {format}",
                flashing(size, 12.0),
                beep_source("stereo", 48_000, 12)
            ),
            format!("tail {{prev}} {permille} {align}"),
        ],
    }
}

/// 6 s of H.264 with 24-bit PCM of `layout` in MOV.
fn with_layout(layout: Layout) -> Recipe {
    let tracks: Vec<String> = match layout {
        Layout::Track(l) => vec![beep_source(l, 48_000, 6)],
        Layout::EightMono => (0..8).map(|_| beep_source("mono", 48_000, 6)).collect(),
    };
    let maps: Vec<String> = (1..=tracks.len()).map(|i| format!("-map {i}:a")).collect();
    Recipe {
        ext: "mov",
        steps: vec![format!(
            "{} {} -map 0:v {} -c:v libx264 -preset veryfast -pix_fmt yuv420p -c:a pcm_s24le",
            flashing("320x240", 6.0),
            tracks.join(" "),
            maps.join(" ")
        )],
    }
}

/// Two 4 s MPEG-TS recordings of `sizes`, video timestamps continuous (the second one's offset
/// is the first one's plus its length), joined byte for byte; the first one's audio runs
/// `audio_ms` over its video (negative: stops that much short).
fn joined(sizes: [&str; 2], audio_ms: i64) -> Recipe {
    let part = |size: &str, audio_secs: f64, offset: u32| {
        format!(
            "{} -t {audio_secs:.3} {} -map 0:v -map 1:a -c:v libx264 -preset veryfast \
             -pix_fmt yuv420p -c:a aac -b:a 96k -f mpegts -output_ts_offset {offset}",
            flashing(size, 4.0),
            beep_source("stereo", 48_000, 5)
        )
    };
    Recipe {
        ext: "ts",
        steps: vec![
            part(sizes[0], 4.0 + audio_ms as f64 / 1000.0, 10),
            part(sizes[1], 4.0, 14),
            "cat {step0} {step1}".into(),
        ],
    }
}

/// Every edge class once, at the matrix seed.
pub fn edge_cases() -> Vec<EdgeCase> {
    edge_cases_with_seed(MATRIX_SEED)
}

/// Every edge class once, at `seed` (other cut offsets and join sizes: `scripts/input-matrix.sh`
/// takes `TESSERA_EDGE_SEED` to walk the space beyond the seed the report records).
pub fn edge_cases_with_seed(seed: u64) -> Vec<EdgeCase> {
    EdgeClass::all()
        .into_iter()
        .map(|class| EdgeCase { class, seed })
        .collect()
}

/// The CI sample: one case of each axis (cut, layout, join) picked by `seed`, and the three
/// reported inputs.
pub fn edge_sample(seed: u64) -> Vec<EdgeCase> {
    let all = edge_cases();
    let mut chosen = Vec::new();
    for axis in ["cut", "layout", "join"] {
        let of_axis: Vec<&EdgeCase> = all.iter().filter(|c| c.class.axis() == axis).collect();
        let pick = hash(seed, &["edge-sample", axis]) as usize % of_axis.len();
        chosen.push(*of_axis[pick]);
    }
    chosen.extend(all.iter().filter(|c| c.class.axis() == "reported"));
    chosen
}
