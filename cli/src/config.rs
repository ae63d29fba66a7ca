//! Command line and configuration: defaults, then a TOML file, then `TESSERA_*` env, then flags.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use serde::Deserialize;
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
    /// Measure PSNR and SSIM of the output against the input.
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

fn read_file(path: Option<&Path>) -> anyhow::Result<FileTranscode> {
    let Some(path) = path else {
        return Ok(FileTranscode::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("config file {}: cannot read", path.display()))?;
    let cfg: FileConfig = toml::from_str(&text)
        .with_context(|| format!("config file {}: invalid", path.display()))?;
    Ok(cfg.transcode)
}

impl TranscodeConfig {
    /// Merges flags/env (`args`) over the config file over the defaults, and validates.
    pub fn resolve(args: TranscodeArgs, config_file: Option<&Path>) -> anyhow::Result<Self> {
        let file = read_file(config_file)?;
        let codec = VideoCodec::from(args.codec.or(file.codec).unwrap_or(CodecArg::H264));
        let bitrate = args.bitrate.or(file.bitrate);
        let crf = args.crf.or(file.crf);
        let rate = match (crf, bitrate) {
            (Some(c), None) => RateControl::Crf(c),
            (None, Some(b)) => RateControl::Bitrate(parse_bitrate(&b)?),
            (None, None) => RateControl::Crf(default_crf(codec)),
            (Some(_), Some(_)) => bail!("give either a crf or a bitrate, not both"),
        };
        let preset = args
            .preset
            .or(file.preset)
            .unwrap_or_else(|| default_preset(codec).to_string());
        let gpu = args.gpu.or(file.gpu).unwrap_or_default();
        if gpu == GpuChoice::Require {
            tessera_media::nvenc_preset(codec, &preset).map_err(|e| anyhow::anyhow!(e))?;
        } else {
            resolve_preset(codec, &preset).map_err(|e| anyhow::anyhow!(e))?;
        }
        let container = match &args.output {
            Some(out) => Container::from_path(out).with_context(|| {
                format!(
                    "output {}: unsupported container (use .mp4 or .mkv)",
                    out.display()
                )
            })?,
            None => Container::Mp4,
        };
        let package = args.package.resolve(file.package_subtitles)?;
        let segment_seconds = args
            .segment_seconds
            .or(file.segment_seconds)
            .unwrap_or(10.0);
        if !(segment_seconds.is_finite() && segment_seconds >= 0.1) {
            bail!("segment length {segment_seconds} s must be at least 0.1 s");
        }
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let workers = args.workers.or(file.workers).unwrap_or(cpus);
        if workers == 0 || workers > 256 {
            bail!("workers {workers} must be within 1..=256");
        }
        let height = args.height.or(file.height);
        if let Some(h) = height {
            if !(2..=16384).contains(&h) {
                bail!("height {h} must be within 2..=16384");
            }
        }
        let max_decode_error_share = args
            .max_decode_error_share
            .or(file.max_decode_error_share)
            .unwrap_or(tessera_engine::DEFAULT_MAX_DECODE_ERROR_SHARE);
        if !(0.0..=1.0).contains(&max_decode_error_share) {
            bail!("max decode error share {max_decode_error_share} must be between 0 and 1");
        }
        let main = RenditionSpec {
            name: "main".into(),
            codec,
            rate,
            preset,
            height,
            hdr: args.hdr.or(file.hdr).unwrap_or_default().into(),
            maxrate: None,
            profile: None,
        };
        let extra_outputs = args
            .also
            .iter()
            .enumerate()
            .map(|(i, a)| extra_output(a, i, &main))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(TranscodeConfig {
            extra_outputs,
            input: args.input,
            output: args.output,
            package,
            container,
            rendition: main,
            segment_seconds,
            workers,
            work_dir: args.work_dir.or(file.work_dir),
            progress: args
                .progress
                .or(file.progress)
                .unwrap_or(ProgressMode::Auto),
            first_audio_only: args.first_audio_only,
            stereo_downmix: args.stereo_downmix.or(file.stereo_downmix).unwrap_or(false),
            quality: args.quality,
            report: args.report,
            segment_timeout: args
                .segment_timeout
                .or(file.segment_timeout)
                .unwrap_or(1200),
            child_memory_bytes: args
                .child_memory_mib
                .or(file.child_memory_mib)
                .unwrap_or(8192)
                << 20,
            gpu,
            max_decode_error_share,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> TranscodeArgs {
        let mut v = vec!["tessera", "transcode", "in.mp4", "-o", "out.mp4"];
        v.extend_from_slice(extra);
        match Cli::try_parse_from(v).unwrap().command {
            Command::Transcode(a) => *a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_file_and_flags_layer() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(
            &file,
            "[transcode]\ncodec = \"hevc\"\nworkers = 3\npreset = \"fast\"\n[client]\nserver = \"http://farm:8080\"\n",
        )
        .unwrap();
        let c = TranscodeConfig::resolve(args(&[]), Some(&file)).unwrap();
        assert_eq!(c.rendition.codec, VideoCodec::Hevc);
        assert_eq!(c.rendition.rate, RateControl::Crf(28.0));
        assert_eq!(c.workers, 3);
        let c =
            TranscodeConfig::resolve(args(&["--workers", "2", "--bitrate", "2.5M"]), Some(&file))
                .unwrap();
        assert_eq!(c.workers, 2);
        assert_eq!(c.rendition.rate, RateControl::Bitrate(2_500_000));
        let c = TranscodeConfig::resolve(args(&[]), None).unwrap();
        assert_eq!(
            (c.rendition.codec, c.rendition.preset.as_str()),
            (VideoCodec::H264, "medium")
        );
    }

    #[test]
    fn package_subtitles_layer_like_the_rest() {
        use tessera_model::package::SubtitleFormat;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "[transcode]\npackage_subtitles = \"none\"\n").unwrap();
        let pkg = dir.path().join("pkg").display().to_string();
        let subtitles = |extra: &[&str], file: Option<&Path>| {
            let c = TranscodeConfig::resolve(args(extra), file).unwrap();
            c.package.unwrap().0.subtitles
        };
        assert_eq!(subtitles(&["--hls", &pkg], None), SubtitleFormat::Webvtt);
        assert_eq!(
            subtitles(&["--hls", &pkg], Some(&file)),
            SubtitleFormat::None
        );
        assert_eq!(
            subtitles(
                &["--hls", &pkg, "--package-subtitles", "webvtt"],
                Some(&file)
            ),
            SubtitleFormat::Webvtt
        );
        std::fs::write(&file, "[transcode]\npackage_subtitles = \"srt\"\n").unwrap();
        assert!(TranscodeConfig::resolve(args(&["--hls", &pkg]), Some(&file)).is_err());
    }

    #[test]
    fn bad_values_are_refused_with_reasons() {
        let e = TranscodeConfig::resolve(args(&["--preset", "warp"]), None).unwrap_err();
        assert!(e.to_string().contains("warp"));
        let mut a = args(&[]);
        a.output = Some("x.avi".into());
        let e = TranscodeConfig::resolve(a, None).unwrap_err();
        assert!(e.to_string().contains("x.avi"));
        assert!(parse_bitrate("fast").is_err());
        assert_eq!(parse_bitrate("800k").unwrap(), 800_000);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "[transcode]\ncodek = 1\n").unwrap();
        assert!(TranscodeConfig::resolve(args(&[]), Some(&file)).is_err());
    }

    #[test]
    fn also_outputs_are_the_main_rendition_at_other_heights() {
        let main = RenditionSpec {
            name: "main".into(),
            codec: tessera_model::encode::VideoCodec::H264,
            rate: RateControl::Crf(23.0),
            preset: "fast".into(),
            height: None,
            hdr: Default::default(),
            maxrate: None,
            profile: None,
        };
        let (r, c, p) = extra_output("480=small.mkv", 0, &main).unwrap();
        assert_eq!(
            (r.name.as_str(), r.height, r.preset.as_str()),
            ("also1", Some(480), "fast")
        );
        assert_eq!((c, p), (Container::Mkv, PathBuf::from("small.mkv")));
        for bad in ["480", "x=a.mp4", "1=a.mp4", "480=a.avi"] {
            let e = extra_output(bad, 0, &main).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }
}
