//! The four axes of the matrix and which of their values fit together in
//! FFmpeg 5.1 (checked by muxing each pair and reading it back).

use std::sync::OnceLock;
use std::time::Duration;

use crate::run::run_command;

/// Declares one axis: an enum with `ALL`, a short `token` for case names
/// and a `label` for tables (also the variant's doc).
macro_rules! axis {
    ($(#[$m:meta])* $name:ident { $($v:ident = $tok:literal, $label:literal;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $(#[doc = $label] $v,)* }
        impl $name {
            /// Every value, in table order.
            pub const ALL: &'static [$name] = &[$($name::$v),*];
            /// Short name used in case names (`mkv-h264b3-aac-vfr`).
            pub fn token(self) -> &'static str { match self { $($name::$v => $tok,)* } }
            /// Human-readable description, for tables.
            pub fn label(self) -> &'static str { match self { $($name::$v => $label,)* } }
        }
    };
}

axis! {
    /// The container (output format) of a matrix clip.
    Container {
        Mp4 = "mp4", "MP4"; Mov = "mov", "QuickTime MOV"; Mkv = "mkv", "Matroska";
        Webm = "webm", "WebM"; MpegTs = "mpegts", "MPEG-TS"; M2ts = "m2ts", "M2TS (192-byte TS)";
        Flv = "flv", "FLV"; Avi = "avi", "AVI"; Nut = "nut", "NUT"; Mxf = "mxf", "MXF OP1a";
    }
}

axis! {
    /// The video codec (and encoder settings) of a matrix clip.
    Video {
        H264B0 = "h264b0", "H.264, no B-frames";
        H264B3 = "h264b3", "H.264, 3 B-frames, closed GOP";
        H264OpenGop = "h264open", "H.264, x264 open-gop";
        H264IntraRefresh = "h264ir", "H.264, x264 intra-refresh";
        Hevc = "hevc", "HEVC, x265 default (open GOP)";
        Hevc10 = "hevc10", "HEVC 10-bit, x265";
        Vp9 = "vp9", "VP9 (libvpx)";
        Av1 = "av1", "AV1";
        Mpeg2 = "mpeg2", "MPEG-2, 2 B-frames";
        Mpeg4 = "mpeg4", "MPEG-4 Part 2, 2 B-frames";
        ProRes = "prores", "ProRes 422 10-bit";
        Dnxhd = "dnxhd", "DNxHD 36, 1920x1080";
        Mjpeg = "mjpeg", "MJPEG";
    }
}

axis! {
    /// The audio of a matrix clip.
    Audio {
        Aac = "aac", "AAC"; Mp3 = "mp3", "MP3"; Opus = "opus", "Opus"; Vorbis = "vorbis", "Vorbis";
        Ac3 = "ac3", "AC-3"; Flac = "flac", "FLAC"; Pcm = "pcm", "PCM 16-bit";
        None = "none", "no audio"; TwoTracks = "2trk", "two tracks (eng, fra)";
    }
}

axis! {
    /// The timing (or geometry) variant of a matrix clip.
    Timing {
        Plain = "plain", "constant 25 fps from 0";
        StartOffset = "start", "timestamps start at 10 s";
        Vfr = "vfr", "variable frame rate";
        SparseKeys = "sparse", "one keyframe only";
        EditList = "edit", "edit list (stream-copy cut at 1.3 s)";
        OddSize = "odd", "odd size 321x241";
        Rotation = "rot", "90-degree display matrix";
    }
}

impl Container {
    /// The file extension, which picks FFmpeg's muxer.
    pub fn ext(self) -> &'static str {
        match self {
            Container::MpegTs => "ts",
            other => other.token(),
        }
    }
}

impl Video {
    fn is_h264(self) -> bool {
        matches!(
            self,
            Video::H264B0 | Video::H264B3 | Video::H264OpenGop | Video::H264IntraRefresh
        )
    }

    /// Intra-only codecs: every frame is a keyframe.
    fn is_intra(self) -> bool {
        matches!(self, Video::ProRes | Video::Dnxhd | Video::Mjpeg)
    }
}

/// Whether FFmpeg 5.1 muxes `v` into `c` and demuxes it back as `v`.
pub fn video_fits(c: Container, v: Video) -> bool {
    use Video::*;
    match c {
        Container::Mp4 => !matches!(v, ProRes | Dnxhd),
        Container::Mov => !matches!(v, Vp9 | Av1),
        Container::Mkv => true,
        // NUT has no tag for DNxHD 1080p (only DNxHR).
        Container::Nut => v != Dnxhd,
        Container::Webm => matches!(v, Vp9 | Av1),
        Container::MpegTs | Container::M2ts => {
            v.is_h264() || matches!(v, Hevc | Hevc10 | Mpeg2 | Mpeg4)
        }
        Container::Flv => v.is_h264(),
        // AVI reads HEVC and DNxHD 1080p back as `rawvideo`.
        Container::Avi => !matches!(v, Hevc | Hevc10 | Dnxhd),
        Container::Mxf => v.is_h264() || matches!(v, Mpeg2 | Dnxhd),
    }
}

/// Whether FFmpeg 5.1 muxes audio `a` into `c` and reads it back.
pub fn audio_fits(c: Container, a: Audio) -> bool {
    use Audio::*;
    match (c, a) {
        (_, None) => true,
        (Container::Flv, TwoTracks) => false,
        (_, TwoTracks) => true,
        (Container::Mp4, _) => matches!(a, Aac | Mp3 | Opus | Vorbis | Ac3),
        (Container::Mov, _) => matches!(a, Aac | Mp3 | Vorbis | Ac3 | Pcm),
        (Container::Mkv | Container::Nut, _) => true,
        (Container::Webm, _) => matches!(a, Opus | Vorbis),
        (Container::MpegTs, _) => matches!(a, Aac | Mp3 | Opus | Ac3),
        (Container::M2ts, _) => matches!(a, Aac | Mp3 | Opus | Ac3 | Pcm),
        (Container::Flv, _) => matches!(a, Aac | Mp3 | Pcm),
        // Vorbis muxes into AVI but reads back ~1 s too long.
        (Container::Avi, _) => matches!(a, Aac | Mp3 | Ac3 | Flac | Pcm),
        (Container::Mxf, _) => a == Pcm,
    }
}

/// Whether timing variant `t` can be expressed for `v` in `c`: AVI and MXF
/// have no per-frame timestamps (no VFR, no start offset), edit lists and
/// display matrices are written only to MP4/MOV, intra-only codecs have no
/// sparse keyframes, DNxHD and MXF need fixed sizes.
pub fn timing_fits(c: Container, v: Video, t: Timing) -> bool {
    let stamped = !matches!(c, Container::Avi | Container::Mxf);
    match t {
        Timing::Plain => true,
        Timing::StartOffset | Timing::Vfr => stamped,
        Timing::SparseKeys => !v.is_intra(),
        Timing::EditList | Timing::Rotation => matches!(c, Container::Mp4 | Container::Mov),
        Timing::OddSize => v != Video::Dnxhd && c != Container::Mxf,
    }
}

/// The AV1 encoder this FFmpeg has (`ffmpeg -encoders`), fastest first;
/// `None` drops AV1 from the matrix.
pub fn av1_encoder() -> Option<&'static str> {
    static ENC: OnceLock<Option<&'static str>> = OnceLock::new();
    *ENC.get_or_init(|| {
        let run = run_command(
            "ffmpeg".as_ref(),
            ["-hide_banner", "-encoders"],
            Duration::from_secs(60),
        );
        let has = |name: &str| run.stdout.split_whitespace().any(|w| w == name);
        ["libaom-av1", "librav1e", "libsvtav1"]
            .into_iter()
            .find(|e| has(e))
    })
}

/// What a table row says about its input, besides the name: a label per axis (a field
/// case, which is no point of the cross product, gives its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Labels {
    /// The container.
    pub container: &'static str,
    /// The video.
    pub video: &'static str,
    /// The audio.
    pub audio: &'static str,
    /// The timing (or geometry) variant.
    pub timing: &'static str,
}
