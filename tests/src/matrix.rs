//! A generated input matrix: containers x video codecs x audio x timing
//! variants, made with the `ffmpeg` CLI and checked with the same oracle as
//! the hand-written fixtures ([`crate::check`]).
//!
//! The full cross product is far too big, so [`matrix`] keeps every
//! (container, video) pair that FFmpeg 5.1 can mux *and read back as the
//! same codec* (checked by hand: MPEG-TS stores VP9/AV1/ProRes/DNxHD/MJPEG
//! as unreadable private data, AVI reads HEVC and DNxHD back as `rawvideo`,
//! ...) and
//! gives each pair one audio and one timing variant, chosen deterministically
//! from a seed among the values valid for that container: the least-used
//! value so far wins, ties broken by a seeded hash, so every value of every
//! axis appears several times. Containers with fewer than four pairs (WebM)
//! get two cases per pair. [`sample`] picks a small fixed-seed subset
//! covering every container, for CI.
//!
//! Clips are 3 s of 320x240 at 25 fps (DNxHD: 2 s of 1920x1080, the size
//! its 36 Mb/s profile needs), built once and cached in
//! [`crate::fixture::fixture_dir`] like the fixtures. [`check`] runs
//! `tessera` on a case with 1 s segments and 2 workers and returns a
//! [`Row`] (pass/fail, the reason, frame counts, timestamp error, PSNR)
//! instead of panicking; [`bad_inputs`] makes inputs that must be refused.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::fixture::{build_recipe, Recipe};
use crate::sync::{beep_source, flash_filter};

mod axes;
mod bad;
mod edges;
mod field;
mod row;

pub use axes::{
    audio_fits, av1_encoder, timing_fits, video_fits, Audio, Container, Labels, Timing, Video,
};
pub use bad::{bad_inputs, BadInput};
pub use edges::{
    edge_cases, edge_cases_with_seed, edge_sample, CutCodec, CutContainer, EdgeCase, EdgeClass,
    Layout, EDGE_SEGMENT_SECONDS, LAYOUTS,
};
pub use field::{field_cases, FieldCase, FieldClass, FIELD_SEGMENT_SECONDS};
pub use row::{
    check, check_edge, check_field, check_with, markdown_report, matrix_target, summary_line, Row,
    TABLE_HEADER,
};

/// The seed [`matrix`] uses (the full matrix in `scripts/input-matrix.sh`).
pub const MATRIX_SEED: u64 = 0x7e55_e2a0;

/// One combination of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Case {
    /// The container.
    pub container: Container,
    /// The video codec.
    pub video: Video,
    /// The audio.
    pub audio: Audio,
    /// The timing variant.
    pub timing: Timing,
}

/// Audio sample rate of a clip: FLV takes MP3/PCM only at 44.1 kHz.
fn sample_rate(c: Container) -> u32 {
    if c == Container::Flv {
        44_100
    } else {
        48_000
    }
}

/// The codec of both tracks of [`Audio::TwoTracks`] in `c`.
fn two_track_codec(c: Container) -> Audio {
    match c {
        Container::Webm => Audio::Opus,
        Container::Avi => Audio::Mp3,
        Container::Mxf => Audio::Pcm,
        _ => Audio::Aac,
    }
}

fn audio_args(c: Container, a: Audio) -> String {
    match a {
        Audio::Aac => "-c:a aac -b:a 96k".into(),
        Audio::Mp3 => "-c:a libmp3lame -b:a 96k".into(),
        Audio::Opus => "-c:a libopus -b:a 64k".into(),
        Audio::Vorbis => "-c:a libvorbis -q:a 3".into(),
        Audio::Ac3 => "-c:a ac3 -b:a 128k".into(),
        Audio::Flac => "-c:a flac".into(),
        Audio::Pcm if c == Container::M2ts => "-c:a pcm_bluray".into(),
        Audio::Pcm => "-c:a pcm_s16le".into(),
        Audio::None => String::new(),
        Audio::TwoTracks => format!(
            "{} -metadata:s:a:0 language=eng -metadata:s:a:1 language=fra",
            audio_args(c, two_track_codec(c))
        ),
    }
}

/// Encoder arguments for `v` with a keyframe every `gop` frames; `odd`
/// (321x241) needs 4:4:4 for x264/x265, which refuse odd 4:2:0 sizes.
fn video_args(c: Container, v: Video, gop: u32, odd: bool) -> String {
    let x264 = |pix: &str, extra: &str| {
        format!("-c:v libx264 -preset veryfast -pix_fmt {pix} -x264-params keyint={gop}:{extra}")
    };
    let fixed = format!("min-keyint={gop}:scenecut=0");
    let h264_pix = if odd { "yuv444p" } else { "yuv420p" };
    let x265 = |pix: &str| {
        let tag = if matches!(c, Container::Mp4 | Container::Mov) {
            " -tag:v hvc1"
        } else {
            ""
        };
        format!(
            "-c:v libx265 -preset veryfast -pix_fmt {pix}{tag} \
             -x265-params keyint={gop}:min-keyint={gop}:scenecut=0:log-level=error"
        )
    };
    let gops = format!("-g {gop} -keyint_min {gop} -pix_fmt yuv420p");
    match v {
        Video::H264B0 => x264(h264_pix, &format!("{fixed}:bframes=0")),
        Video::H264B3 => x264(h264_pix, &format!("{fixed}:bframes=3:b-adapt=0")),
        Video::H264OpenGop => x264(h264_pix, &format!("{fixed}:open-gop=1:bframes=3:b-adapt=0")),
        Video::H264IntraRefresh => x264(h264_pix, "intra-refresh=1"),
        Video::Hevc => x265(if odd { "yuv444p" } else { "yuv420p" }),
        Video::Hevc10 => x265(if odd { "yuv444p10le" } else { "yuv420p10le" }),
        Video::Vp9 => format!("-c:v libvpx-vp9 -deadline realtime -cpu-used 8 -b:v 600k {gops}"),
        Video::Av1 => match av1_encoder() {
            Some("librav1e") => format!("-c:v librav1e -speed 10 {gops}"),
            Some("libsvtav1") => format!("-c:v libsvtav1 -preset 12 {gops}"),
            _ => format!("-c:v libaom-av1 -usage realtime -cpu-used 8 -row-mt 1 -b:v 500k {gops}"),
        },
        Video::Mpeg2 => format!("-c:v mpeg2video -q:v 4 -bf 2 {gops}"),
        Video::Mpeg4 => format!("-c:v mpeg4 -q:v 4 -bf 2 {gops}"),
        Video::ProRes => "-c:v prores_ks -profile:v 2 -pix_fmt yuv422p10le".into(),
        Video::Dnxhd => "-c:v dnxhd -b:v 36M -pix_fmt yuv422p".into(),
        Video::Mjpeg => "-c:v mjpeg -q:v 3 -pix_fmt yuvj420p".into(),
    }
}

impl Case {
    /// The stable name, `container-video-audio-timing` (e.g.
    /// `mkv-h264b3-aac-vfr`).
    pub fn name(&self) -> String {
        format!(
            "{}-{}-{}-{}",
            self.container.token(),
            self.video.token(),
            self.audio.token(),
            self.timing.token()
        )
    }

    /// Whether every axis value fits the others (see [`video_fits`],
    /// [`audio_fits`], [`timing_fits`]).
    pub fn is_valid(&self) -> bool {
        let av1_ok = self.video != Video::Av1 || av1_encoder().is_some();
        av1_ok
            && video_fits(self.container, self.video)
            && audio_fits(self.container, self.audio)
            && timing_fits(self.container, self.video, self.timing)
    }

    /// The ffmpeg steps that make the clip, one whitespace-separated
    /// argument string per step (without `-y` and the output path); in a
    /// later step `{prev}` stands for the previous step's output.
    pub fn recipe(&self) -> Vec<String> {
        self.fixture_recipe().steps
    }

    fn fixture_recipe(&self) -> Recipe {
        let secs = match (self.video, self.timing) {
            (Video::Dnxhd, Timing::EditList) => 3,
            (Video::Dnxhd, _) => 2,
            (_, Timing::EditList) => 4,
            _ => 3,
        };
        self.sized_recipe(secs, (320, 240))
    }

    /// The clip at another length and size, built unless cached, into `dir` (see
    /// [`crate::fixture::build_recipe_in`]): the same container, codecs and timing variant,
    /// `secs` seconds of `width`x`height` (even; the odd-size variant is one more each way,
    /// DNxHD stays 1920x1080). Why: the batch benchmark (issue 31) needs uploads of real
    /// lengths with the matrix's variety, made by the same recipe as the 3 s clips.
    pub fn build_sized(&self, secs: u32, size: (u32, u32), dir: &std::path::Path) -> PathBuf {
        let name = format!("{}-{secs}s-{}x{}", self.name(), size.0, size.1);
        crate::fixture::build_recipe_in(dir, &name, &self.sized_recipe(secs, size))
    }

    fn sized_recipe(&self, secs: u32, (width, height): (u32, u32)) -> Recipe {
        let (c, v, t) = (self.container, self.video, self.timing);
        let odd = t == Timing::OddSize;
        let size = match v {
            Video::Dnxhd => "1920x1080".to_string(),
            _ if odd => format!("{}x{}", width + 2, height + 2),
            _ => format!("{width}x{height}"),
        };
        // A white frame and a beep at every second: the sync oracle's markers.
        let flash = flash_filter("25");
        let mut src = format!("testsrc2=size={size}:rate=25:duration={secs},{flash}");
        if odd {
            // Crop in 4:4:4: in 4:2:0 crop rounds the size down to even.
            src.push_str(&format!(
                ",format=yuv444p,crop={}:{}:0:0",
                width + 1,
                height + 1
            ));
        }
        if t == Timing::Vfr {
            // All frames of the first and last second; in between only even
            // frames plus every 7th: intervals of 40 and 80 ms.
            src.push_str(",select='lt(t\\,1)+gt(t\\,2)+not(mod(n\\,2))+eq(mod(n\\,7)\\,3)'");
        }
        let tracks = match self.audio {
            Audio::None => 0,
            Audio::TwoTracks => 2,
            _ => 1,
        };
        let mut args = vec![format!("-f lavfi -i {src}")];
        // Mono, as the `sine` tone was: the channel counts stay what the encoders make.
        for _ in 0..tracks {
            args.push(beep_source("mono", sample_rate(c), secs));
        }
        args.push("-map 0:v".into());
        args.extend((1..=tracks).map(|i| format!("-map {i}:a")));
        let gop = if t == Timing::SparseKeys { 250 } else { 25 };
        args.push(video_args(c, v, gop, odd));
        args.push(audio_args(c, self.audio));
        match t {
            Timing::Vfr => args.push("-fps_mode vfr".into()),
            Timing::StartOffset => args.push("-output_ts_offset 10".into()),
            _ => {}
        }
        let mut steps = vec![args.join(" ")];
        match t {
            Timing::EditList => steps.push("-ss 1.3 -i {prev} -map 0 -c copy".into()),
            // FFmpeg 5.1 has no -display_rotation; the mov muxer turns a
            // `rotate` tag into a display matrix on stream copy.
            Timing::Rotation => {
                steps.push("-i {prev} -map 0 -c copy -metadata:s:v:0 rotate=90".into());
            }
            _ => {}
        }
        Recipe {
            ext: self.container.ext(),
            steps,
        }
    }

    /// Path of the clip, building it with ffmpeg unless it is cached.
    /// Panics (with ffmpeg's stderr) if ffmpeg fails.
    pub fn build(&self) -> PathBuf {
        build_recipe(&self.name(), &self.fixture_recipe())
    }
}

/// 64-bit FNV-1a of `parts`, for seeded tie-breaks stable across Rust
/// versions.
fn hash(seed: u64, parts: &[&str]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325_u64 ^ seed;
    for b in parts.iter().flat_map(|p| p.bytes().chain([0])) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The least-used value of `options` (ties: lowest seeded hash of `key`).
fn pick<T: Copy + Eq + std::hash::Hash>(
    options: impl Iterator<Item = T>,
    used: &HashMap<T, usize>,
    token: impl Fn(T) -> &'static str,
    seed: u64,
    key: &str,
) -> Option<T> {
    options.min_by_key(|o| {
        (
            used.get(o).copied().unwrap_or(0),
            hash(seed, &[key, token(*o)]),
        )
    })
}

/// The whole matrix for [`MATRIX_SEED`].
pub fn matrix() -> Vec<Case> {
    matrix_with_seed(MATRIX_SEED)
}

/// The whole matrix: every valid (container, video) pair, each with an
/// audio and a timing variant chosen from `seed` (see the module docs).
pub fn matrix_with_seed(seed: u64) -> Vec<Case> {
    let mut audio_used: HashMap<Audio, usize> = HashMap::new();
    let mut timing_used: HashMap<Timing, usize> = HashMap::new();
    let mut cases = Vec::new();
    for &c in Container::ALL {
        let videos: Vec<Video> = Video::ALL
            .iter()
            .copied()
            .filter(|&v| video_fits(c, v) && (v != Video::Av1 || av1_encoder().is_some()))
            .collect();
        let reps = if videos.len() < 4 { 2 } else { 1 };
        for &v in &videos {
            let mut taken: Vec<Case> = Vec::new();
            for r in 0..reps {
                let key = format!("{}-{}-{r}", c.token(), v.token());
                let audios = Audio::ALL
                    .iter()
                    .copied()
                    .filter(|&a| audio_fits(c, a) && taken.iter().all(|k| k.audio != a));
                let timings = Timing::ALL
                    .iter()
                    .copied()
                    .filter(|&t| timing_fits(c, v, t));
                let (Some(audio), Some(timing)) = (
                    pick(audios, &audio_used, Audio::token, seed, &key),
                    pick(timings, &timing_used, Timing::token, seed, &key),
                ) else {
                    continue;
                };
                *audio_used.entry(audio).or_default() += 1;
                *timing_used.entry(timing).or_default() += 1;
                taken.push(Case {
                    container: c,
                    video: v,
                    audio,
                    timing,
                });
            }
            cases.extend(taken);
        }
    }
    cases
}

/// A fixed-seed subset of [`matrix`], in matrix order: `n` cases, or one
/// per container if `n` is smaller. Cases are taken in seeded order, first
/// one per container, then those adding the most not-yet-covered
/// video/audio/timing values.
pub fn sample(seed: u64, n: usize) -> Vec<Case> {
    let mut pool = matrix();
    pool.sort_by_key(|c| hash(seed, &[&c.name()]));
    let mut chosen: Vec<Case> = Vec::new();
    for &c in Container::ALL {
        if let Some(i) = pool.iter().position(|k| k.container == c) {
            chosen.push(pool.remove(i));
        }
    }
    while chosen.len() < n && !pool.is_empty() {
        let new = |k: &Case| {
            usize::from(chosen.iter().all(|c| c.video != k.video))
                + usize::from(chosen.iter().all(|c| c.audio != k.audio))
                + usize::from(chosen.iter().all(|c| c.timing != k.timing))
        };
        let best = (0..pool.len())
            .max_by_key(|&i| (new(&pool[i]), std::cmp::Reverse(i)))
            .expect("pool is not empty");
        chosen.push(pool.remove(best));
    }
    chosen.truncate(n.max(Container::ALL.len()));
    chosen.sort();
    chosen
}
