//! The job JSON of `POST /v1/jobs` and its validation into a runnable plan.

use axum::http::StatusCode;
use serde::Deserialize;
use tessera_media::settings::{default_crf, default_preset, resolve_preset};
use tessera_media::{Container, RateControl, RenditionSpec, VideoCodec};

use super::runner::{JobPlan, S3Uri};

/// One requested output.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiOutput {
    /// h264 (default), hevc or av1.
    pub codec: Option<VideoCodec>,
    /// Constant quality.
    pub crf: Option<f32>,
    /// Bits per second.
    pub bitrate: Option<u64>,
    /// Encoder preset.
    pub preset: Option<String>,
    /// Output height.
    pub height: Option<u32>,
    /// mp4 or mkv (default: from the destination's extension).
    pub container: Option<Container>,
    /// `s3://bucket/key` of the output.
    pub destination: String,
}

/// The body of `POST /v1/jobs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiJob {
    /// `s3://bucket/key` of the source.
    pub input: String,
    /// The outputs (one per job for now).
    pub outputs: Vec<ApiOutput>,
    /// Segment length in seconds.
    pub segment_seconds: Option<f64>,
    /// Priority 0-9 (accepted; scheduling by priority is not implemented yet).
    pub priority: Option<u8>,
    /// Webhook (accepted; not called yet).
    pub callback_url: Option<String>,
    /// Measure PSNR/SSIM of the output.
    #[serde(default)]
    pub psnr: bool,
}

type Invalid = (StatusCode, &'static str, String);

fn bad(msg: impl Into<String>) -> Invalid {
    (StatusCode::UNPROCESSABLE_ENTITY, "invalid_job", msg.into())
}

fn allowed(uri: &S3Uri, buckets: &[String], what: &str) -> Result<(), Invalid> {
    if buckets.iter().any(|b| b == &uri.bucket) {
        Ok(())
    } else {
        Err((
            StatusCode::FORBIDDEN,
            "bucket_not_allowed",
            format!(
                "{what} bucket '{}' is not one this farm may use",
                uri.bucket
            ),
        ))
    }
}

/// Checks a job against the farm's rules; returns the plan or (status, code, message).
pub fn validate(
    job: &ApiJob,
    buckets: &[String],
    default_segment: f64,
) -> Result<JobPlan, Invalid> {
    let input = S3Uri::parse(&job.input).map_err(|e| bad(format!("input: {e}")))?;
    allowed(&input, buckets, "input")?;
    let [out] = job.outputs.as_slice() else {
        return Err(bad(format!(
            "exactly one output per job is supported, got {}",
            job.outputs.len()
        )));
    };
    let output = S3Uri::parse(&out.destination).map_err(|e| bad(format!("destination: {e}")))?;
    allowed(&output, buckets, "destination")?;
    let container = match out.container {
        Some(c) => c,
        None => Container::from_path(std::path::Path::new(&output.key))
            .ok_or_else(|| bad("destination must end in .mp4 or .mkv, or set container"))?,
    };
    let codec = out.codec.unwrap_or(VideoCodec::H264);
    let rate = match (out.crf, out.bitrate) {
        (Some(_), Some(_)) => return Err(bad("give crf or bitrate, not both")),
        (Some(c), None) => RateControl::Crf(c),
        (None, Some(b)) => RateControl::Bitrate(b),
        (None, None) => RateControl::Crf(default_crf(codec)),
    };
    let preset = out
        .preset
        .clone()
        .unwrap_or_else(|| default_preset(codec).to_string());
    let rendition = RenditionSpec {
        name: "main".into(),
        codec,
        rate,
        preset,
        height: out.height,
    };
    tessera_media::settings::encoder_options(&rendition, 1).map_err(bad)?;
    resolve_preset(codec, &rendition.preset).map_err(bad)?;
    if let Some(h) = out.height {
        if !(2..=16384).contains(&h) {
            return Err(bad(format!("height {h} must be within 2..=16384")));
        }
    }
    let segment_seconds = job.segment_seconds.unwrap_or(default_segment);
    if !(segment_seconds.is_finite() && (0.5..=600.0).contains(&segment_seconds)) {
        return Err(bad(format!(
            "segment_seconds {segment_seconds} must be within 0.5..=600"
        )));
    }
    if let Some(url) = &job.callback_url {
        if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() > 2048 {
            return Err(bad("callback_url must be an http(s) URL"));
        }
    }
    if job.priority.is_some_and(|p| p > 9) {
        return Err(bad("priority must be 0-9"));
    }
    Ok(JobPlan {
        input,
        output,
        container,
        rendition,
        segment_seconds,
        psnr: job.psnr,
        callback_url: job.callback_url.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(body: serde_json::Value) -> ApiJob {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn validation() {
        let buckets = vec!["input".to_string(), "output".to_string()];
        let ok = job(
            serde_json::json!({"input": "s3://input/a.mp4", "outputs": [{"destination": "s3://output/b.mkv", "crf": 20}]}),
        );
        let p = validate(&ok, &buckets, 10.0).unwrap();
        assert_eq!(p.container, Container::Mkv);
        assert_eq!(p.rendition.rate, RateControl::Crf(20.0));
        let forbidden = job(
            serde_json::json!({"input": "s3://secret/a.mp4", "outputs": [{"destination": "s3://output/b.mp4"}]}),
        );
        assert_eq!(
            validate(&forbidden, &buckets, 10.0).unwrap_err().0,
            StatusCode::FORBIDDEN
        );
        let two = job(
            serde_json::json!({"input": "s3://input/a.mp4", "outputs": [{"destination": "s3://output/b.mp4"}, {"destination": "s3://output/c.mp4"}]}),
        );
        assert_eq!(validate(&two, &buckets, 10.0).unwrap_err().1, "invalid_job");
        let bad_preset = job(
            serde_json::json!({"input": "s3://input/a.mp4", "outputs": [{"destination": "s3://output/b.mp4", "preset": "warp"}]}),
        );
        assert!(validate(&bad_preset, &buckets, 10.0).is_err());
        let avi = job(
            serde_json::json!({"input": "s3://input/a.mp4", "outputs": [{"destination": "s3://output/b.avi"}]}),
        );
        assert!(validate(&avi, &buckets, 10.0).is_err());
    }
}
