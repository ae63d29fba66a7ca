//! Recordings from the field: broadcast, legacy and phone sources that the 3 s cross product
//! cannot express. Each [`FieldClass`] is one way real uploads differ from what the encoders
//! of today write (an open-GOP MPEG-2 broadcast, a DVD program stream, an ASF with preroll,
//! a 3GP from an old phone, timestamps that wrap or jump, a size change mid-stream, pixel
//! aspects coded in the bitstream, surround audio, ...).
//!
//! Why long clips at the production segment length: a 3 s clip cut every second never puts
//! a cut inside an open GOP; a 21-29 s clip (the length is seeded per class) at the default
//! 10 s segments gives three segments, and the last round is halved for two workers, so two
//! cuts land between keyframes wherever the seed puts them.

use super::axes::Labels;
use super::{hash, MATRIX_SEED};
use crate::fixture::{build_recipe, Recipe};
use crate::sync::{beep_source, flash_filter};

/// Segment length for field cases: the production default of `tessera transcode`.
pub const FIELD_SEGMENT_SECONDS: u32 = 10;

/// One class of field recording; every class has a case in the full matrix and in the CI
/// sample (the regression guard of issue 27).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FieldClass {
    /// MPEG-2 in MPEG-TS, 720x576 interlaced, GOP 12 with 2 B-frames, open GOPs (the
    /// encoder's default), MP2 audio: a DVB recording.
    Mpeg2TsOpen,
    /// MPEG-2 4:2:2 in MPEG-TS, closed GOPs, 5.1 AC-3: a contribution feed.
    Mpeg2Ts422Closed,
    /// MPEG-2 in an MPEG program stream, NTSC 720x480 at 29.97 with a 16:9 display aspect
    /// (anamorphic), open GOP 15, AC-3: a DVD title.
    Mpeg2PsNtsc,
    /// MPEG-1 in an MPEG program stream, 352x288, 2 B-frames, MP2: a VCD.
    Mpeg1Ps,
    /// WMV2 and WMA2 in ASF.
    AsfWmv2,
    /// H.263 in 3GP at 15 fps with mono AAC: an old phone.
    Phone3gp,
    /// DV (PAL, 16:9 anamorphic) with PCM audio in a raw DIF stream: a camcorder.
    DvPal,
    /// H.264 and AAC in fragmented MP4 (empty moov, a fragment per keyframe).
    FragmentedMp4,
    /// H.264 with default x264 B-frames in Matroska, millisecond time base, every n-th frame
    /// (seeded) moved by 5-15 ms: a variable-rate screen or phone capture.
    VfrMatroska,
    /// VP9 and Opus in WebM with the same timing.
    VfrWebm,
    /// H.264 in Matroska with every n-th frame moved onto the one before: two frames at one
    /// millisecond (a capture whose clock stalled).
    SharedTimes,
    /// H.264 in MPEG-TS whose 33-bit timestamps wrap mid-file.
    TsWrap,
    /// H.264 in MPEG-TS whose size changes mid-stream: two recordings (640x360, then
    /// 1280x720) joined byte for byte, timestamps continuous.
    ResolutionChange,
    /// H.264 in MPEG-TS whose pixel format changes mid-stream: 4:2:0, then 4:2:2 (High
    /// 4:2:2), joined byte for byte, timestamps continuous.
    PixelFormatChange,
    /// Two MPEG-TS recordings joined byte for byte, the second one's timestamps starting
    /// over: they jump back.
    TsJumpBack,
    /// MPEG-4 Part 2 in AVI with a PAL 16:9 pixel aspect (64:45) coded in the bitstream
    /// only.
    Mpeg4PixelAspect,
    /// H.264 with 5.1 E-AC-3 in Matroska.
    Surround,
}

impl FieldClass {
    /// Every class, in table order.
    pub const ALL: &'static [FieldClass] = &[
        FieldClass::Mpeg2TsOpen,
        FieldClass::Mpeg2Ts422Closed,
        FieldClass::Mpeg2PsNtsc,
        FieldClass::Mpeg1Ps,
        FieldClass::AsfWmv2,
        FieldClass::Phone3gp,
        FieldClass::DvPal,
        FieldClass::FragmentedMp4,
        FieldClass::VfrMatroska,
        FieldClass::VfrWebm,
        FieldClass::SharedTimes,
        FieldClass::TsWrap,
        FieldClass::ResolutionChange,
        FieldClass::PixelFormatChange,
        FieldClass::TsJumpBack,
        FieldClass::Mpeg4PixelAspect,
        FieldClass::Surround,
    ];

    /// Short name used in case names.
    pub fn token(self) -> &'static str {
        match self {
            FieldClass::Mpeg2TsOpen => "ts-mpeg2-open-mp2",
            FieldClass::Mpeg2Ts422Closed => "ts-mpeg2-422-closed-ac3x6",
            FieldClass::Mpeg2PsNtsc => "ps-mpeg2-ntsc169-ac3",
            FieldClass::Mpeg1Ps => "ps-mpeg1-mp2",
            FieldClass::AsfWmv2 => "asf-wmv2-wma2",
            FieldClass::Phone3gp => "3gp-h263-aacmono",
            FieldClass::DvPal => "dv-pal169-pcm",
            FieldClass::FragmentedMp4 => "fmp4-h264-aac",
            FieldClass::VfrMatroska => "mkv-h264-vfrms",
            FieldClass::VfrWebm => "webm-vp9-vfrms",
            FieldClass::SharedTimes => "mkv-h264-sharedms",
            FieldClass::TsWrap => "ts-h264-wrap",
            FieldClass::ResolutionChange => "ts-h264-sizechange",
            FieldClass::PixelFormatChange => "ts-h264-pixfmtchange",
            FieldClass::TsJumpBack => "ts-h264-jumpback",
            FieldClass::Mpeg4PixelAspect => "avi-mpeg4-par6445",
            FieldClass::Surround => "mkv-h264-eac3x6",
        }
    }

    /// Container, video, audio and timing as the table shows them.
    pub fn labels(self) -> Labels {
        let l = |c, v, a, t| Labels {
            container: c,
            video: v,
            audio: a,
            timing: t,
        };
        match self {
            FieldClass::Mpeg2TsOpen => l(
                "MPEG-TS",
                "MPEG-2 720x576i, GOP 12, open",
                "MP2",
                "broadcast",
            ),
            FieldClass::Mpeg2Ts422Closed => l(
                "MPEG-TS",
                "MPEG-2 4:2:2, closed GOP 15",
                "AC-3 5.1",
                "broadcast",
            ),
            FieldClass::Mpeg2PsNtsc => l(
                "MPEG-PS (DVD)",
                "MPEG-2 720x480 16:9, open GOP 15",
                "AC-3",
                "29.97 fps",
            ),
            FieldClass::Mpeg1Ps => l("MPEG-PS", "MPEG-1 352x288, 2 B-frames", "MP2", "VCD"),
            FieldClass::AsfWmv2 => l("ASF", "WMV2", "WMA2", "ASF preroll"),
            FieldClass::Phone3gp => l("3GP", "H.263 352x288", "AAC mono", "15 fps"),
            FieldClass::DvPal => l("DV (DIF)", "DV PAL 16:9", "PCM 16-bit", "camcorder"),
            FieldClass::FragmentedMp4 => l("fragmented MP4", "H.264", "AAC", "fragments"),
            FieldClass::VfrMatroska => l(
                "Matroska",
                "H.264, x264 default B-frames",
                "AAC",
                "VFR, 1 ms time base",
            ),
            FieldClass::VfrWebm => l("WebM", "VP9", "Opus", "VFR, 1 ms time base"),
            FieldClass::SharedTimes => l(
                "Matroska",
                "H.264, x264 default B-frames",
                "AAC",
                "two frames at one ms",
            ),
            FieldClass::TsWrap => l("MPEG-TS", "H.264", "AAC", "pts wraps past 2^33"),
            FieldClass::ResolutionChange => l(
                "MPEG-TS",
                "H.264 640x360 then 1280x720",
                "AAC",
                "size change mid-stream",
            ),
            FieldClass::PixelFormatChange => l(
                "MPEG-TS",
                "H.264 4:2:0 then 4:2:2",
                "AAC",
                "pixel format change mid-stream",
            ),
            FieldClass::TsJumpBack => l(
                "MPEG-TS",
                "H.264, two recordings joined",
                "AAC",
                "timestamps jump back",
            ),
            FieldClass::Mpeg4PixelAspect => l(
                "AVI",
                "MPEG-4 Part 2, pixel aspect 64:45 in the bitstream",
                "MP3",
                "anamorphic PAL",
            ),
            FieldClass::Surround => l("Matroska", "H.264", "E-AC-3 5.1", "constant 25 fps"),
        }
    }

    /// What the report must say about the case, if anything: timestamps that jump back are
    /// kept in order with a warning.
    pub fn expected_warning(self) -> Option<&'static str> {
        (self == FieldClass::TsJumpBack).then_some("jump back")
    }

    /// The clip's length in seconds: 21 to 29, seeded per class, so the cuts fall at places
    /// no one picked.
    pub fn seconds(self, seed: u64) -> u32 {
        21 + (hash(seed, &["field", self.token()]) % 9) as u32
    }

    /// The case name: the class token and its length (`ts-mpeg2-open-mp2-25s`).
    pub fn name(self, seed: u64) -> String {
        format!("{}-{}s", self.token(), self.seconds(seed))
    }

    /// How to make the clip (see [`Recipe`]).
    #[rustfmt::skip] // a recipe per arm reads better than rustfmt's columns
    pub(crate) fn recipe(self, seed: u64) -> Recipe {
        let d = self.seconds(seed);
        // One ffmpeg step: a test pattern of `size` at `rate` and mono audio at `hz`, with
        // the sync oracle's flash and beep at every second, then `args`.
        let clip = |ext: &'static str, (size, rate): (&str, &str), hz: u32, args: String| Recipe {
            ext,
            steps: vec![format!(
                "-f lavfi -i testsrc2=size={size}:rate={rate}:duration={d},{} {} {args}",
                flash_filter(rate), beep_source("mono", hz, d)
            )],
        };
        let x264 = "-c:v libx264 -preset veryfast -pix_fmt yuv420p";
        // Every n-th frame moved by a few ms, in a 1 ms time base (seeded: 3rd to 9th frame,
        // 5 to 15 ms, later or earlier).
        let h = hash(seed, &["vfr", self.token()]);
        let (every, by) = (3 + h % 7, 5 + (h >> 8) % 11);
        let sign = if (h >> 16).is_multiple_of(2) { "+" } else { "-" };
        let moved = |sign: &str, by: u64| format!(
            "-vf settb=1/1000,setpts=PTS{sign}if(eq(mod(N\\,{every})\\,1)\\,{by}\\,0) \
             -fps_mode passthrough -enc_time_base:v 1:1000"
        );
        let vfr = moved(sign, by);
        let nhd_420 = ("640x360", "yuv420p");
        let (sd, sd_ntsc, cif, nhd) = (
            ("720x576", "25"),
            ("720x480", "30000/1001"),
            ("352x288", "25"),
            ("640x360", "25"),
        );
        match self {
            FieldClass::Mpeg2TsOpen => clip("ts", sd, 48_000, "-vf setfield=tff -c:v mpeg2video \
                -flags +ildct+ilme -top 1 -g 12 -bf 2 -b:v 4M -c:a mp2 -b:a 192k".into()),
            FieldClass::Mpeg2Ts422Closed => clip("ts", sd, 48_000, "-c:v mpeg2video \
                -pix_fmt yuv422p -flags +cgop -sc_threshold 1000000000 -g 15 -bf 2 -b:v 8M \
                -c:a ac3 -ac 6 -b:a 384k".into()),
            FieldClass::Mpeg2PsNtsc => clip("mpg", sd_ntsc, 48_000, "-c:v mpeg2video \
                -aspect 16:9 -g 15 -bf 2 -b:v 5M -c:a ac3 -b:a 192k -f dvd".into()),
            FieldClass::Mpeg1Ps => clip("mpg", cif, 44_100, "-c:v mpeg1video -g 12 -bf 2 \
                -b:v 1500k -c:a mp2 -b:a 128k -f vob".into()),
            FieldClass::AsfWmv2 => clip("asf", nhd, 44_100,
                "-c:v wmv2 -b:v 2M -c:a wmav2 -b:a 128k".into()),
            FieldClass::Phone3gp => clip("3gp", ("352x288", "15"), 16_000,
                "-c:v h263 -b:v 384k -c:a aac -ac 1 -b:a 32k".into()),
            FieldClass::DvPal => clip("dv", sd, 48_000, "-c:v dvvideo -pix_fmt yuv420p \
                -aspect 16:9 -c:a pcm_s16le -ac 2 -f dv".into()),
            FieldClass::FragmentedMp4 => clip("mp4", ("640x360", "30"), 48_000, format!(
                "{x264} -g 60 -c:a aac -b:a 96k \
                 -movflags +frag_keyframe+empty_moov+default_base_moof")),
            FieldClass::VfrMatroska => clip("mkv", ("640x360", "30"), 48_000,
                format!("{vfr} {x264} -c:a aac -b:a 96k")),
            // 33 ms back at 30 fps: onto the frame before, within the millisecond rounding.
            FieldClass::SharedTimes => clip("mkv", ("640x360", "30"), 48_000,
                format!("{} {x264} -c:a aac -b:a 96k", moved("-", 33))),
            FieldClass::VfrWebm => clip("webm", ("640x360", "30"), 48_000, format!(
                "{vfr} -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -b:v 600k \
                 -c:a libopus -b:a 64k")),
            // 2^33 ticks of 90 kHz are 95443.72 s; the muxer starts 1.4 s after the offset.
            FieldClass::TsWrap => clip("ts", nhd, 48_000, format!(
                "{x264} -c:a aac -b:a 96k -output_ts_offset {}",
                95_443.72 - 1.4 - f64::from(d) / 2.0)),
            FieldClass::ResolutionChange => joined(d, [nhd_420, ("1280x720", "yuv420p")], true),
            FieldClass::PixelFormatChange => joined(d, [nhd_420, ("640x360", "yuv422p")], true),
            FieldClass::TsJumpBack => joined(d, [nhd_420, nhd_420], false),
            FieldClass::Mpeg4PixelAspect => clip("avi", sd, 48_000, "-vf setsar=64/45 \
                -c:v mpeg4 -q:v 4 -bf 2 -g 25 -c:a libmp3lame -b:a 128k".into()),
            FieldClass::Surround => clip("mkv", nhd, 48_000,
                format!("{x264} -c:a eac3 -ac 6 -b:a 384k")),
        }
    }
}

/// Two MPEG-TS recordings of `d` seconds in all (the first one about half), of the two
/// (size, pixel format)s, joined byte for byte. Both carry an explicit offset (so the muxer shifts neither for
/// its B-frame delay). `continuous`: the second one's timestamps follow the first one's;
/// otherwise both start at the same time and the timestamps jump back at the join.
fn joined(d: u32, [first, second]: [(&str, &str); 2], continuous: bool) -> Recipe {
    let half = d / 2;
    // Each recording with the sync oracle's flash and beep at each of its own seconds.
    let part = |(size, pix): (&str, &str), secs: u32, offset: u32| {
        format!(
            "-f lavfi -i testsrc2=size={size}:rate=25:duration={secs},{} {} \
             -c:v libx264 -preset veryfast -pix_fmt {pix} -c:a aac -b:a 96k -f mpegts \
             -output_ts_offset {offset}",
            flash_filter("25"),
            beep_source("mono", 48_000, secs)
        )
    };
    let second_at = if continuous { 10 + half } else { 10 };
    Recipe {
        ext: "ts",
        steps: vec![
            part(first, half, 10),
            part(second, d - half, second_at),
            "cat {step0} {step1}".into(),
        ],
    }
}

/// One field case: a class at the seed's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldCase {
    /// The class.
    pub class: FieldClass,
    /// The seed of its length.
    pub seed: u64,
}

impl FieldCase {
    /// The case name (see [`FieldClass::name`]).
    pub fn name(&self) -> String {
        self.class.name(self.seed)
    }

    /// Path of the clip, building it with ffmpeg unless it is cached.
    pub fn build(&self) -> std::path::PathBuf {
        build_recipe(&self.name(), &self.class.recipe(self.seed))
    }
}

/// Every field class once, at the matrix seed's lengths.
pub fn field_cases() -> Vec<FieldCase> {
    FieldClass::ALL
        .iter()
        .map(|&class| FieldCase {
            class,
            seed: MATRIX_SEED,
        })
        .collect()
}
