//! Command line and configuration: defaults, then a TOML file, then `TESSERA_*` env, then flags.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use serde::Deserialize;
use tessera_farm::config::{read_toml_file, Setting};
use tessera_model::encode::{Container, RateControl, RenditionSpec, VideoCodec};
use tessera_model::settings::{default_crf, default_preset, resolve_preset};

use crate::args::{parse_bitrate, CodecArg, GpuChoice, HdrArg, ProgressMode};

/// tessera: split, encode in parallel, stitch. Frame-exact.
#[derive(Debug, Parser)]
#[command(name = "tessera", version, about)]
pub struct Cli {
    /// A TOML config file: `[transcode]` gives defaults for `transcode`'s flags, `[client]`
    /// the `server` and `token` of the remote commands.
    #[arg(long, global = true, env = "TESSERA_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log filter (e.g. `info`, `tessera=debug`).
    #[arg(long, global = true, env = "TESSERA_LOG", default_value = "warn")]
    pub log: String,
    /// Log lines as `text`, or `json`: one object a line with the job, plan, segment and
    /// worker ids of the work it is about (docs/operations.md, "JSON logs").
    #[arg(
        long,
        global = true,
        env = "TESSERA_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: tessera_farm::signals::LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Transcode one file with the whole farm in this process.
    Transcode(Box<TranscodeArgs>),
    /// Submit a job to a farm's API (uploading a local input first); prints the job id.
    Submit(crate::remote::SubmitArgs),
    /// Show one job of a farm.
    Status(crate::remote::JobArgs),
    /// List a farm's recent jobs.
    List(crate::remote::ListArgs),
    /// Cancel a job of a farm.
    Cancel(crate::remote::JobArgs),
    /// Show what this machine's NVIDIA cards offer (NVML, session budgets, NVENC/NVDEC).
    Gpu(crate::gpu::GpuArgs),
    /// Show what tessera sees in a file: streams, keyframes, the segment plan, what it keeps.
    Probe(crate::probe::ProbeArgs),
    /// Measure an encoded file against its source (PSNR, SSIM, VMAF), as `--quality` does.
    Quality(crate::quality::QualityArgs),
}

/// `tessera transcode` flags. Every value is optional here so the config file can fill gaps.
#[derive(Debug, Clone, clap::Args)]
pub struct TranscodeArgs {
    /// The input video.
    pub input: PathBuf,
    /// The output file (.mp4 or .mkv); optional with a package (--hls/--dash/--cmaf).
    #[arg(short, long, required_unless_present_any = ["hls", "dash", "cmaf"])]
    pub output: Option<PathBuf>,
    /// A streaming package besides (or instead of) the output file.
    #[command(flatten)]
    pub package: crate::package_args::PackageArgs,
    /// Video codec [default: h264].
    #[arg(long, env = "TESSERA_CODEC")]
    pub codec: Option<CodecArg>,
    /// Constant quality (default per codec: 23 h264, 28 hevc, 35 av1).
    #[arg(long, env = "TESSERA_CRF", conflicts_with = "bitrate")]
    pub crf: Option<f32>,
    /// Average bitrate, e.g. 2500k or 4M (VBV max 1.5x, buffer 2x).
    #[arg(long, env = "TESSERA_BITRATE")]
    pub bitrate: Option<String>,
    /// Target quality: each segment searches the CRF that reaches this mean VMAF (1-100),
    /// starting from --crf or the codec's default.
    #[arg(long, env = "TESSERA_TARGET_VMAF", conflicts_with = "bitrate")]
    pub target_vmaf: Option<f64>,
    /// The lowest CRF the target's search may take [default: 16 h264, 18 hevc, 20 av1].
    #[arg(long, env = "TESSERA_MIN_CRF")]
    pub min_crf: Option<f64>,
    /// The highest CRF the target's search may take [default: 40 h264, 42 hevc, 55 av1].
    #[arg(long, env = "TESSERA_MAX_CRF")]
    pub max_crf: Option<f64>,
    /// Peak bitrate cap, e.g. 6M (VBV max rate, buffer 2x), with a CRF or a target.
    #[arg(long, env = "TESSERA_MAX_BITRATE")]
    pub max_bitrate: Option<String>,
    /// Encoder preset (x264/x265 names; SVT-AV1 0-13 or an x264 name).
    #[arg(long, env = "TESSERA_PRESET")]
    pub preset: Option<String>,
    /// Output height, keeping the aspect ratio.
    #[arg(long, env = "TESSERA_HEIGHT")]
    pub height: Option<u32>,
    /// Another output at another height from the same decode (same codec and settings),
    /// as HEIGHT=FILE, e.g. `--also 480=small.mp4`; repeatable.
    #[arg(long, value_name = "HEIGHT=FILE")]
    pub also: Vec<String>,
    /// HDR sources: auto keeps HDR in HEVC/AV1 and tone-maps to SDR for H.264 [default: auto].
    #[arg(long, env = "TESSERA_HDR")]
    pub hdr: Option<HdrArg>,
    /// Target segment length in seconds [default: 10].
    #[arg(long, env = "TESSERA_SEGMENT_SECONDS")]
    pub segment_seconds: Option<f64>,
    /// Segments encoded at once [default: CPU count].
    #[arg(long, env = "TESSERA_WORKERS")]
    pub workers: Option<usize>,
    /// Work directory for chunks and segments [default: system temp dir].
    #[arg(long, env = "TESSERA_WORK_DIR")]
    pub work_dir: Option<PathBuf>,
    /// Progress display [default: auto].
    #[arg(long, env = "TESSERA_PROGRESS")]
    pub progress: Option<ProgressMode>,
    /// Keep only the first audio track.
    #[arg(long)]
    pub first_audio_only: bool,
    /// Mix every audio track of more than two channels down to stereo (5.1 stays 5.1
    /// without it) [default: false].
    #[arg(long, env = "TESSERA_STEREO_DOWNMIX")]
    pub stereo_downmix: Option<bool>,
    /// Measure PSNR, SSIM and VMAF of the output against the input.
    #[arg(long)]
    pub quality: bool,
    /// Write a JSON report of the job here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Seconds one segment's encode may take before it is killed and retried [default: 1200].
    #[arg(long, env = "TESSERA_SEGMENT_TIMEOUT")]
    pub segment_timeout: Option<u64>,
    /// Memory limit of each media child process, in MiB [default: 8192].
    #[arg(long, env = "TESSERA_CHILD_MEMORY_MIB")]
    pub child_memory_mib: Option<u64>,
    /// NVIDIA GPU use [default: auto].
    #[arg(long, env = "TESSERA_GPU")]
    pub gpu: Option<GpuChoice>,
    /// Largest share (0-1) of the source's frames the decoder may reject or conceal before
    /// the job fails as `source_corrupt`; fewer are a warning [default: 0.01].
    #[arg(long, env = "TESSERA_MAX_DECODE_ERROR_SHARE")]
    pub max_decode_error_share: Option<f64>,
}

/// The `[transcode]` table of the config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileTranscode {
    codec: Option<CodecArg>,
    crf: Option<f32>,
    bitrate: Option<String>,
    target_vmaf: Option<f64>,
    min_crf: Option<f64>,
    max_crf: Option<f64>,
    max_bitrate: Option<String>,
    preset: Option<String>,
    height: Option<u32>,
    hdr: Option<HdrArg>,
    segment_seconds: Option<f64>,
    workers: Option<usize>,
    work_dir: Option<PathBuf>,
    progress: Option<ProgressMode>,
    segment_timeout: Option<u64>,
    child_memory_mib: Option<u64>,
    gpu: Option<GpuChoice>,
    max_decode_error_share: Option<f64>,
    package_subtitles: Option<crate::package_args::SubtitlesArg>,
    stereo_downmix: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    transcode: FileTranscode,
    /// The `[client]` table belongs to the remote commands (`client.rs` checks it).
    #[serde(default, rename = "client")]
    _client: toml::Table,
}

/// A fully resolved `transcode` configuration.
#[derive(Debug, Clone)]
pub struct TranscodeConfig {
    /// The input.
    pub input: PathBuf,
    /// The output file (none when only a package is asked for).
    pub output: Option<PathBuf>,
    /// The streaming package and its folder.
    pub package: Option<(tessera_model::package::PackageSpec, PathBuf)>,
    /// Its container.
    pub container: Container,
    /// The rendition.
    pub rendition: RenditionSpec,
    /// Further outputs from the same decode (`--also`): rendition, container, file.
    pub extra_outputs: Vec<(RenditionSpec, Container, PathBuf)>,
    /// Segment length.
    pub segment_seconds: f64,
    /// Parallel segment encodes.
    pub workers: usize,
    /// Work directory root.
    pub work_dir: Option<PathBuf>,
    /// Progress display.
    pub progress: ProgressMode,
    /// Keep only the first audio track.
    pub first_audio_only: bool,
    /// Mix tracks of more than two channels down to stereo.
    pub stereo_downmix: bool,
    /// Measure quality.
    pub quality: bool,
    /// Report file.
    pub report: Option<PathBuf>,
    /// Per-segment timeout in seconds.
    pub segment_timeout: u64,
    /// Child memory limit in bytes.
    pub child_memory_bytes: u64,
    /// NVENC use.
    pub gpu: GpuChoice,
    /// Share of damaged source frames tolerated (with a warning).
    pub max_decode_error_share: f64,
}

/// One `--also HEIGHT=FILE`: the main rendition at another height, written to FILE.
fn extra_output(
    arg: &str,
    i: usize,
    main: &RenditionSpec,
) -> anyhow::Result<(RenditionSpec, Container, PathBuf)> {
    let (h, file) = arg
        .split_once('=')
        .with_context(|| format!("--also {arg}: give HEIGHT=FILE, e.g. 480=small.mp4"))?;
    let height: u32 = h
        .trim()
        .parse()
        .with_context(|| format!("--also {arg}: {h} is not a height"))?;
    if !(2..=16384).contains(&height) {
        bail!("--also {arg}: height {height} must be within 2..=16384");
    }
    let path = PathBuf::from(file);
    let container = Container::from_path(&path)
        .with_context(|| format!("--also {arg}: unsupported container (use .mp4 or .mkv)"))?;
    let rendition = RenditionSpec {
        name: format!("also{}", i + 1),
        height: Some(height),
        ..main.clone()
    };
    Ok((rendition, container, path))
}

/// The `[transcode]` table of the config file (none without a file).
fn read_file(path: Option<&Path>) -> anyhow::Result<FileTranscode> {
    Ok(read_toml_file::<FileConfig>(path)?.transcode)
}

/// Rate control: a crf or a bitrate (flag/env over file), else the codec's default crf.
fn rate_control(
    codec: VideoCodec,
    crf: Setting<Option<f32>>,
    bitrate: Setting<Option<String>>,
) -> anyhow::Result<RateControl> {
    Ok(match (crf.optional(), bitrate.optional()) {
        (Some(c), None) => RateControl::Crf(c),
        (None, Some(b)) => RateControl::Bitrate(parse_bitrate(&b)?),
        (None, None) => RateControl::Crf(default_crf(codec)),
        (Some(_), Some(_)) => bail!("give either a crf or a bitrate, not both"),
    })
}

/// Checks the preset against NVENC's names when the GPU is required, else the software
/// encoder's.
fn check_preset(codec: VideoCodec, preset: &str, gpu: GpuChoice) -> anyhow::Result<()> {
    if gpu == GpuChoice::Require {
        tessera_media::nvenc_preset(codec, preset).map_err(|e| anyhow::anyhow!(e))?;
    } else {
        resolve_preset(codec, preset).map_err(|e| anyhow::anyhow!(e))?;
    }
    Ok(())
}

/// The output file's container (MP4 when only a package is written).
fn output_container(output: Option<&Path>) -> anyhow::Result<Container> {
    match output {
        Some(out) => Container::from_path(out).with_context(|| {
            format!(
                "output {}: unsupported container (use .mp4 or .mkv)",
                out.display()
            )
        }),
        None => Ok(Container::Mp4),
    }
}

/// The codec, its rate control and its preset (checked), each layered.
fn video_encoding(
    args: &TranscodeArgs,
    file: &FileTranscode,
    gpu: GpuChoice,
) -> anyhow::Result<(VideoCodec, RateControl, String)> {
    let codec = Setting::layered("codec", args.codec, file.codec).or(CodecArg::H264);
    let codec = VideoCodec::from(codec.get());
    let rate = rate_control(
        codec,
        Setting::layered("crf", args.crf, file.crf),
        Setting::layered("bitrate", args.bitrate.clone(), file.bitrate.clone()),
    )?;
    let preset = Setting::layered("preset", args.preset.clone(), file.preset.clone())
        .or_else(|| default_preset(codec).to_string())
        .get();
    check_preset(codec, &preset, gpu)?;
    Ok((codec, rate, preset))
}

/// The checked numbers of a run: segment length, workers, output height, and the share of
/// damaged source frames tolerated.
struct RunNumbers {
    segment_seconds: f64,
    workers: usize,
    height: Option<u32>,
    max_decode_error_share: f64,
}

/// Layers and checks [`RunNumbers`]; each refusal names the setting and its range.
fn run_numbers(args: &TranscodeArgs, file: &FileTranscode) -> anyhow::Result<RunNumbers> {
    let segment_seconds =
        Setting::layered("segment length", args.segment_seconds, file.segment_seconds)
            .or(10.0)
            .check(
                |s| s.is_finite() && *s >= 0.1,
                |s| format!("{s} s must be at least 0.1 s"),
            )?
            .get();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let workers = Setting::layered("workers", args.workers, file.workers)
        .or(cpus)
        .check(
            |w| (1..=256).contains(w),
            |w| format!("{w} must be within 1..=256"),
        )?
        .get();
    let height = Setting::layered("height", args.height, file.height)
        .check_set(
            |h| (2..=16384).contains(h),
            |h| format!("{h} must be within 2..=16384"),
        )?
        .optional();
    let max_decode_error_share = Setting::layered(
        "max decode error share",
        args.max_decode_error_share,
        file.max_decode_error_share,
    )
    .or(tessera_engine::DEFAULT_MAX_DECODE_ERROR_SHARE)
    .check(
        |v| (0.0..=1.0).contains(v),
        |v| format!("{v} must be between 0 and 1"),
    )?
    .get();
    Ok(RunNumbers {
        segment_seconds,
        workers,
        height,
        max_decode_error_share,
    })
}

impl TranscodeConfig {
    /// Merges flags/env (`args`) over the config file over the defaults, and validates.
    pub fn resolve(args: TranscodeArgs, config_file: Option<&Path>) -> anyhow::Result<Self> {
        let file = read_file(config_file)?;
        let gpu = Setting::layered("gpu", args.gpu, file.gpu)
            .or_else(Default::default)
            .get();
        let (codec, rate, preset) = video_encoding(&args, &file, gpu)?;
        let container = output_container(args.output.as_deref())?;
        let mut package = args.package.resolve(file.package_subtitles)?;
        let numbers = run_numbers(&args, &file)?;
        let mut main = RenditionSpec {
            name: "main".into(),
            codec,
            rate,
            preset,
            height: numbers.height,
            hdr: Setting::layered("hdr", args.hdr, file.hdr)
                .or_else(Default::default)
                .get()
                .into(),
            maxrate: None,
            profile: None,
            target: None,
        };
        target::apply(&mut main, &args, &file)?;
        if let Some((spec, _)) = package.as_mut() {
            target::apply_to_package(spec, &main)?;
        }
        let extra_outputs = args
            .also
            .iter()
            .enumerate()
            .map(|(i, a)| extra_output(a, i, &main))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let stereo_downmix =
            Setting::layered("stereo_downmix", args.stereo_downmix, file.stereo_downmix);
        let segment_timeout = Setting::layered(
            "segment_timeout",
            args.segment_timeout,
            file.segment_timeout,
        );
        let child_memory_mib = Setting::layered(
            "child_memory_mib",
            args.child_memory_mib,
            file.child_memory_mib,
        );
        Ok(TranscodeConfig {
            extra_outputs,
            input: args.input,
            output: args.output,
            package,
            container,
            rendition: main,
            segment_seconds: numbers.segment_seconds,
            workers: numbers.workers,
            work_dir: Setting::layered("work_dir", args.work_dir, file.work_dir).optional(),
            progress: Setting::layered("progress", args.progress, file.progress)
                .or(ProgressMode::Auto)
                .get(),
            first_audio_only: args.first_audio_only,
            stereo_downmix: stereo_downmix.or(false).get(),
            quality: args.quality,
            report: args.report,
            segment_timeout: segment_timeout.or(1200).get(),
            child_memory_bytes: child_memory_mib.or(8192).get() << 20,
            gpu,
            max_decode_error_share: numbers.max_decode_error_share,
        })
    }
}

mod target;
#[cfg(test)]
mod tests;
