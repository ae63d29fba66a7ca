//! The flags of `tessera submit` and the job body they make.
//!
//! Why apart from the commands: the body is the CLI's half of the API contract (an
//! [`ApiJob`] with only what the flags set), and its flags grow with each output setting.

use anyhow::Context;
use serde_json::Value;
use tessera_model::api::{ApiJob, ApiOutput, ApiTarget};
use tessera_model::encode::VideoCodec;
use tessera_model::wire::Hardware;

use crate::args::{parse_bitrate, CodecArg};
use crate::client::ServerArgs;

/// `tessera submit` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct SubmitArgs {
    /// The input: `s3://bucket/key`, or a local file (uploaded first, to the upload bucket).
    pub input: String,
    /// The output `s3://bucket/key` (.mp4 or .mkv) [default:
    /// `s3://<input bucket>/outputs/<input file stem>-<codec>.mp4`, where a local file's
    /// input bucket is the upload bucket].
    #[arg(short, long)]
    pub output: Option<String>,
    /// Video codec [default: h264].
    #[arg(long)]
    pub codec: Option<CodecArg>,
    /// Constant quality (default per codec: 23 h264, 28 hevc, 35 av1).
    #[arg(long, conflicts_with = "bitrate")]
    pub crf: Option<f32>,
    /// Average bitrate, e.g. 2500k or 4M.
    #[arg(long)]
    pub bitrate: Option<String>,
    /// Target quality: each segment searches the CRF that reaches this mean VMAF (1-100),
    /// starting from --crf or the codec's default.
    #[arg(long, conflicts_with = "bitrate")]
    pub target_vmaf: Option<f64>,
    /// The lowest CRF the target's search may take [default: the server's per codec].
    #[arg(long, requires = "target_vmaf")]
    pub min_crf: Option<f64>,
    /// The highest CRF the target's search may take [default: the server's per codec].
    #[arg(long, requires = "target_vmaf")]
    pub max_crf: Option<f64>,
    /// Peak bitrate cap, e.g. 6M (VBV), with a CRF or a target.
    #[arg(long)]
    pub max_bitrate: Option<String>,
    /// Encoder preset (x264/x265 names; SVT-AV1 0-13 or an x264 name).
    #[arg(long)]
    pub preset: Option<String>,
    /// Output height, keeping the aspect ratio.
    #[arg(long)]
    pub height: Option<u32>,
    /// HDR sources: auto, keep or tonemap (the server's default when unset).
    #[arg(long)]
    pub hdr: Option<crate::args::HdrArg>,
    /// Target segment length in seconds [default: the dispatcher's].
    #[arg(long)]
    pub segment_seconds: Option<f64>,
    /// Measure PSNR/SSIM and VMAF of the output against the input.
    #[arg(long)]
    pub psnr: bool,
    /// Mix every audio track of more than two channels down to stereo (5.1 stays 5.1
    /// without it).
    #[arg(long)]
    pub stereo_downmix: bool,
    /// Follow the job until it ends; exit 0 when done, 1 when failed or cancelled.
    #[arg(long)]
    pub wait: bool,
    /// Makes a retried submit return the first job instead of starting a second one.
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// The server.
    #[command(flatten)]
    pub server: ServerArgs,
}

/// The last segment of `name` without its extension, reduced to `[A-Za-z0-9._-]`.
pub fn stem(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let stem = match base.rsplit_once('.') {
        Some((s, _)) if !s.is_empty() => s,
        _ => base,
    };
    let safe = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    let clean: String = stem
        .chars()
        .map(|c| if safe(c) { c } else { '_' })
        .collect();
    match clean.trim_start_matches('.') {
        "" => "output".to_string(),
        s => s.chars().take(100).collect(),
    }
}

/// The default output: `s3://<bucket of input_uri>/outputs/<stem of name>-<codec>.mp4`.
pub fn default_output(input_uri: &str, name: &str, codec: CodecArg) -> anyhow::Result<String> {
    let bucket = input_uri
        .strip_prefix("s3://")
        .and_then(|r| r.split_once('/'))
        .map(|(b, _)| b)
        .filter(|b| !b.is_empty())
        .with_context(|| format!("input '{input_uri}' is not s3://bucket/key"))?;
    let codec = codec_name(codec);
    Ok(format!("s3://{bucket}/outputs/{}-{codec}.mp4", stem(name)))
}

/// The codec's name in the API and in default output names.
fn codec_name(codec: CodecArg) -> &'static str {
    match codec {
        CodecArg::H264 => "h264",
        CodecArg::Hevc => "hevc",
        CodecArg::Av1 => "av1",
    }
}

/// The job JSON of `POST /v1/jobs` for these flags: an [`ApiJob`] with only what the flags
/// set (the server's defaults apply to the rest).
pub fn job_body(args: &SubmitArgs, input: &str, output: &str) -> anyhow::Result<Value> {
    let job = ApiJob {
        input: input.to_string(),
        outputs: vec![ApiOutput {
            codec: args.codec.map(VideoCodec::from),
            crf: args.crf,
            bitrate: args.bitrate.as_deref().map(parse_bitrate).transpose()?,
            target: args.target_vmaf.map(|vmaf| ApiTarget {
                vmaf,
                min_crf: args.min_crf,
                max_crf: args.max_crf,
            }),
            max_bitrate: args.max_bitrate.as_deref().map(parse_bitrate).transpose()?,
            preset: args.preset.clone(),
            height: args.height,
            hdr: args.hdr.map(Into::into),
            container: None,
            package: None,
            destination: output.to_string(),
        }],
        segment_seconds: args.segment_seconds,
        priority: None,
        callback_url: None,
        psnr: args.psnr,
        stereo_downmix: args.stereo_downmix,
        hardware: Hardware::default(),
    };
    Ok(serde_json::to_value(job)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    fn submit_args(extra: &[&str]) -> SubmitArgs {
        let mut v = vec!["tessera", "submit"];
        v.extend_from_slice(extra);
        match crate::Cli::try_parse_from(v).unwrap().command {
            crate::config::Command::Submit(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn default_output_and_body() {
        let a = submit_args(&["clips/My Talk.v2.mov", "--codec", "hevc", "--bitrate", "2M"]);
        let out = default_output(
            "s3://in/uploads/0f/My_Talk.v2.mov",
            &a.input,
            CodecArg::Hevc,
        );
        assert_eq!(out.unwrap(), "s3://in/outputs/My_Talk.v2-hevc.mp4");
        let body = job_body(&a, "s3://in/k.mov", "s3://out/o.mp4").unwrap();
        assert_eq!(body["outputs"][0]["codec"], "hevc");
        assert_eq!(body["outputs"][0]["bitrate"], 2_000_000);
        assert_eq!(body["outputs"][0]["destination"], "s3://out/o.mp4");
        assert!(body.get("segment_seconds").is_none());
        assert!(body["outputs"][0].get("target").is_none());
        let t = submit_args(&["a.mp4", "--target-vmaf", "93", "--max-crf", "36"]);
        let t = job_body(&t, "s3://in/a.mp4", "s3://out/a.mp4").unwrap();
        assert_eq!(
            t["outputs"][0]["target"],
            json!({"vmaf": 93.0, "max_crf": 36.0})
        );
        let capped = submit_args(&["a.mp4", "--crf", "20", "--max-bitrate", "6M"]);
        let capped = job_body(&capped, "s3://in/a.mp4", "s3://out/a.mp4").unwrap();
        assert_eq!(capped["outputs"][0]["max_bitrate"], 6_000_000);
        // Bounds without a target, and a target with a bitrate, are refused by the flags.
        for bad in [
            &["a.mp4", "--min-crf", "20"][..],
            &["a.mp4", "--target-vmaf", "90", "--bitrate", "1M"],
        ] {
            let mut v = vec!["tessera", "submit"];
            v.extend_from_slice(bad);
            assert!(crate::Cli::try_parse_from(v).is_err(), "{bad:?}");
        }
        assert!(default_output("s3://", "x", CodecArg::H264).is_err());
        assert_eq!(stem("s3://b/dir/.mp4"), "mp4");
        assert_eq!(stem("..."), "output");
    }
}
