//! Small media fixtures made with the `ffmpeg` CLI (lavfi `testsrc2` video
//! and `sine` audio), one per input kind the farm must handle.
//!
//! Each fixture is built at most once per test process (a `OnceLock` per
//! kind) and cached on disk under `target/tessera-fixtures/` (or
//! `$TESSERA_FIXTURE_DIR`), named by a hash of the exact recipe, so a changed
//! recipe makes a new file and later test runs skip the encode. Builds go to
//! a private temporary directory and are renamed into place, so parallel
//! test processes never see a half-written fixture.

mod hdr;
pub use hdr::hdr_source;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::run::{run_ffmpeg_tool, target_dir};

/// The input kinds. Durations are short (3-5 s, 25 s for the sparse one)
/// and frames small so the whole suite stays quick on two cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fixture {
    /// H.264 High, closed GOP (keyframe every 1 s), 2 B-frames, BT.709
    /// colour tags, AAC; MP4, 4 s at 25 fps.
    ClosedGopH264,
    /// x264 with `open-gop=1`: non-IDR I-frames every 32 frames with leading
    /// B-frames that reference the previous GOP; AAC; MP4, 4 s.
    OpenGopH264,
    /// HEVC from x265 with open GOPs (CRA pictures with RASL leading
    /// pictures every 30 frames); AAC; MP4, 4 s.
    HevcOpenGop,
    /// H.264 at 160x120 with keyint 600: keyframes only at 0 s and 24 s in a
    /// 25 s clip; AAC; MP4.
    SparseKeyframes,
    /// MPEG-TS, MPEG-2 video with B-frames + MP2 audio, timestamps starting
    /// near 11.4 s (`-output_ts_offset 10` on top of the 1.4 s default).
    MpegTsOffset,
    /// Variable frame rate: 30 fps source with frames dropped irregularly in
    /// the middle (intervals of 1/30 and 2/30 s); H.264 + AAC in MP4.
    VariableFrameRate,
    /// VP9 + Opus in WebM (Opus pre-skip makes audio start before 0), 3 s.
    Vp9OpusWebm,
    /// H.264 + AAC MP4 whose video carries a 90-degree display matrix.
    Rotated90,
    /// MP4 cut by stream copy with `-ss 1.3` from a 5 s source with a
    /// keyframe every second and B-frames: an edit list hides the first
    /// decoded frames.
    EditList,
    /// 321x241 4:4:4 H.264 (High 4:4:4 Predictive) + AAC, 3 s.
    Odd444,
    /// ProRes 422 HQ, 10-bit 4:2:2, BT.709 tags, PCM audio, in MOV, 3 s.
    ProRes422Hq10,
    /// H.264 MP4 without any audio stream, 3 s.
    NoAudio,
    /// H.264 + AAC MP4 with 3 s of video and 5 s of audio.
    AudioLongerThanVideo,
    /// H.264 MP4 with two AAC tracks tagged `eng` and `fra`, 3 s.
    TwoAudioLanguages,
    /// A normal H.264 + AAC MP4 written without faststart (moov at the end),
    /// for truncation tests.
    MoovAtEnd,
    /// An audio-only AAC `.m4a`, 3 s.
    AudioOnlyM4a,
    /// H.264 MP4 with one 5.1 AAC track, 3 s (AAC that would be stream-copied as it is).
    SurroundAac,
    /// 1280x720 H.264 + AAC, 12 s, a keyframe every second: segments slow enough to
    /// interrupt (worker kill and drain tests).
    Hd720Long,
    /// 640x360 H.264 at 25 fps, 13 s, keyframes every 1.6 s (so most 2 s package
    /// boundaries fall between source keyframes), two AAC tracks (eng, fra): the
    /// streaming-package source.
    StreamingSource,
}

const KINDS: usize = 19;

/// lavfi test-pattern video input: `testsrc2` of `size` at `rate` fps.
fn video(size: &str, rate: u32, secs: u32) -> String {
    format!("-f lavfi -i testsrc2=size={size}:rate={rate}:duration={secs}")
}

/// lavfi sine-tone audio input at 48 kHz.
fn audio(freq: u32, secs: u32) -> String {
    format!("-f lavfi -i sine=frequency={freq}:sample_rate=48000:duration={secs}")
}

const X264: &str = "-c:v libx264 -preset veryfast -pix_fmt yuv420p";
const AAC: &str = "-c:a aac -b:a 96k";
const S: &str = "320x240";

/// How to make one fixture: the file extension and ffmpeg steps, each a
/// whitespace-separated argument string (no argument contains a space).
/// In a step `{prev}` is the previous step's output and `{stepN}` (also inside an
/// argument) step N's; the step's own output path is appended. A step `cat A B ...` joins
/// files byte for byte instead of running ffmpeg. Shared with the generated matrix ([`crate::matrix`]).
pub(crate) struct Recipe {
    pub(crate) ext: &'static str,
    pub(crate) steps: Vec<String>,
}

fn one(ext: &'static str, parts: &[&str]) -> Recipe {
    Recipe {
        ext,
        steps: vec![parts.join(" ")],
    }
}

impl Fixture {
    /// Every kind, for listing and sanity tests.
    pub const ALL: [Fixture; KINDS] = [
        Fixture::ClosedGopH264,
        Fixture::OpenGopH264,
        Fixture::HevcOpenGop,
        Fixture::SparseKeyframes,
        Fixture::MpegTsOffset,
        Fixture::VariableFrameRate,
        Fixture::Vp9OpusWebm,
        Fixture::Rotated90,
        Fixture::EditList,
        Fixture::Odd444,
        Fixture::ProRes422Hq10,
        Fixture::NoAudio,
        Fixture::AudioLongerThanVideo,
        Fixture::TwoAudioLanguages,
        Fixture::MoovAtEnd,
        Fixture::AudioOnlyM4a,
        Fixture::SurroundAac,
        Fixture::Hd720Long,
        Fixture::StreamingSource,
    ];

    #[rustfmt::skip] // a recipe per line reads better than rustfmt's columns
    fn recipe(self) -> Recipe {
        let (v3, v4, a3, a4) = (video(S, 25, 3), video(S, 25, 4), audio(440, 3), audio(440, 4));
        match self {
            Fixture::ClosedGopH264 => one("mp4", &[&v4, &a4, X264, AAC,
                "-bf 2 -x264-params keyint=25:min-keyint=25:scenecut=0",
                "-color_primaries bt709 -color_trc bt709 -colorspace bt709"]),
            Fixture::OpenGopH264 => one("mp4", &[&v4, &a4, X264, AAC,
                "-x264-params keyint=32:min-keyint=32:scenecut=0:open-gop=1:bframes=3:b-adapt=0"]),
            Fixture::HevcOpenGop => one("mp4", &[&v4, &a4, AAC,
                "-c:v libx265 -preset veryfast -pix_fmt yuv420p -tag:v hvc1 -x265-params",
                "keyint=30:min-keyint=30:scenecut=0:open-gop=1:log-level=error"]),
            Fixture::SparseKeyframes => one("mp4", &[&video("160x120", 25, 25), &audio(440, 25),
                X264, AAC, "-x264-params keyint=600:min-keyint=600:scenecut=0"]),
            Fixture::MpegTsOffset => one("ts", &[&v4, &a4,
                "-c:v mpeg2video -q:v 4 -bf 2 -g 12 -c:a mp2 -b:a 128k -output_ts_offset 10"]),
            // Every frame of the first 1.5 s and the last second; in between
            // only even frames plus every 7th: intervals of 1/30 and 2/30 s.
            Fixture::VariableFrameRate => one("mp4", &[
                "-f lavfi -i testsrc2=size=320x240:rate=30:duration=4,\
                 select='lt(t\\,1.5)+gt(t\\,3)+not(mod(n\\,2))+eq(mod(n\\,7)\\,3)'",
                &a4, X264, AAC, "-fps_mode vfr"]),
            Fixture::Vp9OpusWebm => one("webm", &[&v3, &a3,
                "-c:v libvpx-vp9 -deadline realtime -cpu-used 8 -b:v 600k -g 30",
                "-c:a libopus -b:a 64k"]),
            // FFmpeg 5.1 has no -display_rotation; the mov muxer turns a
            // `rotate` tag into a display matrix on stream copy.
            Fixture::Rotated90 => Recipe { ext: "mp4", steps: vec![
                [v3.as_str(), &a3, X264, AAC].join(" "),
                "-i {prev} -c copy -metadata:s:v:0 rotate=90".into(),
            ]},
            Fixture::EditList => Recipe { ext: "mp4", steps: vec![
                [video(S, 25, 5).as_str(), &audio(440, 5), X264, AAC,
                    "-bf 2 -x264-params keyint=25:min-keyint=25:scenecut=0"].join(" "),
                "-ss 1.3 -i {prev} -c copy".into(),
            ]},
            Fixture::Odd444 => one("mp4", &[
                "-f lavfi -i testsrc2=size=322x242:rate=25:duration=3,crop=321:241:0:0,format=yuv444p",
                &a3, AAC, "-c:v libx264 -preset veryfast -pix_fmt yuv444p -profile:v high444"]),
            Fixture::ProRes422Hq10 => one("mov", &[&v3, &a3,
                "-vf setparams=colorspace=bt709:color_trc=bt709:color_primaries=bt709",
                "-c:v prores_ks -profile:v 3 -pix_fmt yuv422p10le -c:a pcm_s16le"]),
            Fixture::NoAudio => one("mp4", &[&v3, X264, "-an"]),
            Fixture::AudioLongerThanVideo => one("mp4", &[&v3, &audio(440, 5), X264, AAC]),
            Fixture::TwoAudioLanguages => one("mp4", &[&v3, &a3, &audio(660, 3),
                "-map 0:v -map 1:a -map 2:a", X264, AAC,
                "-metadata:s:a:0 language=eng -metadata:s:a:1 language=fra"]),
            Fixture::MoovAtEnd => one("mp4", &[&v3, &a3, X264, AAC]),
            Fixture::AudioOnlyM4a => one("m4a", &[&a3, AAC]),
            Fixture::SurroundAac => one("mp4", &[&v3, &a3, X264, AAC, "-ac 6"]),
            Fixture::Hd720Long => one("mp4", &[&video("1280x720", 30, 12), &audio(440, 12), X264, AAC,
                "-x264-params keyint=30:min-keyint=30:scenecut=0"]),
            Fixture::StreamingSource => one("mp4", &[&video("640x360", 25, 13), &audio(440, 13),
                &audio(660, 13), "-map 0:v -map 1:a -map 2:a", X264, AAC,
                "-bf 2 -x264-params keyint=40:min-keyint=40:scenecut=0",
                "-metadata:s:a:0 language=eng -metadata:s:a:1 language=fra"]),
        }
    }
}

/// 64-bit FNV-1a: a hash that is stable across Rust versions, for cache names.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Directory holding cached fixtures (created if missing).
pub fn fixture_dir() -> PathBuf {
    let dir = std::env::var_os("TESSERA_FIXTURE_DIR")
        .map(PathBuf::from)
        .or_else(|| target_dir().map(|t| t.join("tessera-fixtures")))
        .unwrap_or_else(|| std::env::temp_dir().join("tessera-fixtures"));
    fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create fixture dir {}: {e}", dir.display()));
    dir
}

/// Path of the fixture of `kind`, building it with ffmpeg if it is not
/// cached yet. Callers must treat the file as read-only.
pub fn fixture(kind: Fixture) -> PathBuf {
    static CELLS: [OnceLock<PathBuf>; KINDS] = [const { OnceLock::new() }; KINDS];
    let index = Fixture::ALL
        .iter()
        .position(|k| *k == kind)
        .expect("every kind is listed in Fixture::ALL");
    CELLS[index].get_or_init(|| build(kind)).clone()
}

fn build(kind: Fixture) -> PathBuf {
    build_recipe(&format!("{kind:?}"), &kind.recipe())
}

/// Builds `recipe` into the fixture dir as `<stem>-<hash of the steps>.<ext>`
/// unless that file exists already; returns its path.
pub(crate) fn build_recipe(stem: &str, recipe: &Recipe) -> PathBuf {
    build_recipe_in(&fixture_dir(), stem, recipe)
}

/// [`build_recipe`] into `dir` (created if missing): the batch benchmark keeps its long
/// uploads in `bench/.cache/batch/`, beside the other benchmark inputs, not among the fixtures.
pub(crate) fn build_recipe_in(dir: &Path, stem: &str, recipe: &Recipe) -> PathBuf {
    fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let key = format!("{:?}", recipe.steps);
    let path = dir.join(format!(
        "{stem}-{:016x}.{}",
        fnv1a(key.as_bytes()),
        recipe.ext
    ));
    if path.is_file() {
        return path;
    }
    let work = tempfile::Builder::new()
        .prefix(".build-")
        .tempdir_in(dir)
        .expect("fixture build dir");
    let mut prev: Option<PathBuf> = None;
    let mut made: Vec<PathBuf> = Vec::new();
    for (i, step) in recipe.steps.iter().enumerate() {
        let out = work.path().join(format!("step{i}.{}", recipe.ext));
        let mut args: Vec<String> = Vec::new();
        for a in step.split_whitespace() {
            match (a, &prev) {
                ("{prev}", Some(p)) => args.push(p.to_string_lossy().into_owned()),
                ("{prev}", None) => panic!("{stem}: first step uses {{prev}}"),
                _ => args.push(step_refs(stem, a, &made)),
            }
        }
        if args.first().is_some_and(|a| a == "tail") {
            // A recording joined mid-stream: the bytes from a share of the file on, at a
            // packet boundary (`tail FILE PERMILLE ALIGN`).
            fs::write(&out, tail_bytes(stem, &args[1..]))
                .unwrap_or_else(|e| panic!("{stem}: write {}: {e}", out.display()));
        } else if args.first().is_some_and(|a| a == "cat") {
            // Files joined byte for byte (recordings appended to one another).
            let mut bytes = Vec::new();
            for f in &args[1..] {
                bytes.extend(fs::read(f).unwrap_or_else(|e| panic!("{stem}: read {f}: {e}")));
            }
            fs::write(&out, bytes)
                .unwrap_or_else(|e| panic!("{stem}: write {}: {e}", out.display()));
        } else {
            let mut full: Vec<String> = ["-hide_banner", "-nostdin", "-v", "error", "-y"]
                .map(String::from)
                .to_vec();
            full.extend(args);
            full.push(out.to_string_lossy().into_owned());
            run_ffmpeg_tool("ffmpeg", &full);
        }
        made.push(out.clone());
        prev = Some(out);
    }
    let made = prev.expect("recipe has at least one step");
    fs::rename(&made, &path)
        .unwrap_or_else(|e| panic!("cannot move {} to {}: {e}", made.display(), path.display()));
    path
}

/// The bytes of `tail FILE PERMILLE ALIGN` (see [`Recipe`]).
fn tail_bytes(stem: &str, args: &[String]) -> Vec<u8> {
    let [file, permille, align] = args else {
        panic!("{stem}: tail takes FILE PERMILLE ALIGN, got {args:?}");
    };
    let num = |s: &str| -> usize {
        s.parse()
            .unwrap_or_else(|e| panic!("{stem}: tail: bad number {s}: {e}"))
    };
    let (permille, align) = (num(permille), num(align).max(1));
    let bytes = fs::read(file).unwrap_or_else(|e| panic!("{stem}: read {file}: {e}"));
    let from = bytes.len() * permille.min(1000) / 1000 / align * align;
    bytes[from..].to_vec()
}

/// `arg` with every `{stepN}` replaced by the output of step N (which must be made already).
fn step_refs(stem: &str, arg: &str, made: &[PathBuf]) -> String {
    let mut out = arg.to_owned();
    while let Some(at) = out.find("{step") {
        let end = out[at..]
            .find('}')
            .map(|e| at + e)
            .unwrap_or_else(|| panic!("{stem}: unclosed step reference in {arg}"));
        let n: usize = out[at + 5..end]
            .parse()
            .unwrap_or_else(|e| panic!("{stem}: bad step reference in {arg}: {e}"));
        let path = made
            .get(n)
            .unwrap_or_else(|| panic!("{stem}: {arg} refers to step {n}, not made yet"));
        out.replace_range(at..=end, &path.to_string_lossy());
    }
    out
}

/// Writes a copy of `src` into `dir` as `name`, cut to `len` bytes.
pub fn truncated_copy(src: &Path, dir: &Path, name: &str, len: u64) -> PathBuf {
    let dest = dir.join(name);
    let mut bytes = fs::read(src).unwrap_or_else(|e| panic!("read {}: {e}", src.display()));
    bytes.truncate(usize::try_from(len).expect("length fits in memory"));
    fs::write(&dest, &bytes).unwrap_or_else(|e| panic!("write {}: {e}", dest.display()));
    dest
}

/// Writes `len` bytes of deterministic pseudo-random data (xorshift64*) to
/// `dir/name`.
pub fn random_file(dir: &Path, name: &str, len: usize, seed: u64) -> PathBuf {
    let mut state = seed | 1;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        bytes.extend_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    bytes.truncate(len);
    let dest = dir.join(name);
    fs::write(&dest, &bytes).unwrap_or_else(|e| panic!("write {}: {e}", dest.display()));
    dest
}

/// Writes a copy of `src` into `dir` as `name` with every `every`-th video packet that is not
/// a keyframe (counting from `first`) damaged: 16 bytes a third of the way into its payload
/// are overwritten, as a bad disk or a broken upload would. Returns the copy and how many
/// packets were damaged. Packet positions come from ffprobe.
pub fn damaged_copy(
    src: &Path,
    dir: &Path,
    name: &str,
    first: usize,
    every: usize,
) -> (PathBuf, usize) {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries"])
        .args(["packet=pos,size,flags", "-of", "csv=p=0"])
        .arg(src)
        .output()
        .unwrap_or_else(|e| panic!("ffprobe {}: {e}", src.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut bytes = fs::read(src).unwrap_or_else(|e| panic!("read {}: {e}", src.display()));
    let mut damaged = 0;
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        let (Some(size), Some(pos), Some(flags)) = (f.first(), f.get(1), f.get(2)) else {
            continue;
        };
        let (Ok(size), Ok(pos)) = (size.parse::<usize>(), pos.parse::<usize>()) else {
            continue;
        };
        if i < first
            || !(i - first).is_multiple_of(every.max(1))
            || flags.contains('K')
            || size < 64
        {
            continue;
        }
        let at = pos + size / 3;
        for (k, b) in bytes[at..at + 16].iter_mut().enumerate() {
            *b ^= 0xa5 ^ (k as u8);
        }
        damaged += 1;
    }
    let dest = dir.join(name);
    fs::write(&dest, &bytes).unwrap_or_else(|e| panic!("write {}: {e}", dest.display()));
    (dest, damaged)
}

/// Runs the ffmpeg CLI quietly (`-v error -y` first) with `args`, panicking with them if it
/// fails: for fixtures a test makes on the spot.
pub fn ffmpeg(args: &[&str]) {
    let ok = std::process::Command::new("ffmpeg")
        .args(["-v", "error", "-y"])
        .args(args)
        .status()
        .expect("run ffmpeg")
        .success();
    assert!(ok, "ffmpeg {args:?} failed");
}
