//! Validating the job JSON of `POST /v1/jobs` (`ApiJob`, in tessera_farm::model) into a
//! runnable plan.

use tessera_model::api::{ApiJob, ApiOutput};
use tessera_model::encode::{Container, RateControl, RenditionSpec, VideoCodec};
use tessera_model::error_code::ErrorCode;
use tessera_model::settings::{default_crf, default_preset, resolve_preset};
use tessera_model::wire::Hardware;

use crate::job_plan::{default_priority, JobPlan, PlannedOutput, PlannedPackage, S3Uri};
use tessera_model::package::Ladder;

/// Why a job is refused: its code (which carries the HTTP status) and the reason.
pub type Invalid = (ErrorCode, String);

fn bad(msg: impl Into<String>) -> Invalid {
    (ErrorCode::InvalidJob, msg.into())
}

fn allowed(uri: &S3Uri, buckets: &[String], what: &str) -> Result<(), Invalid> {
    if buckets.iter().any(|b| b == &uri.bucket) {
        Ok(())
    } else {
        Err((
            ErrorCode::BucketNotAllowed,
            format!(
                "{what} bucket '{}' is not one this farm may use",
                uri.bucket
            ),
        ))
    }
}

/// The most outputs (renditions) one job may ask for: each costs an encoder per segment.
pub const MAX_OUTPUTS: usize = 8;

fn validate_output(
    out: &ApiOutput,
    index: usize,
    buckets: &[String],
    hardware: Hardware,
) -> Result<PlannedOutput, Invalid> {
    let destination =
        S3Uri::parse(&out.destination).map_err(|e| bad(format!("destination: {e}")))?;
    allowed(&destination, buckets, "destination")?;
    let container = match out.container {
        Some(c) => c,
        None => Container::from_path(std::path::Path::new(&destination.key))
            .ok_or_else(|| bad("destination must end in .mp4 or .mkv, or set container"))?,
    };
    let codec = out.codec.unwrap_or(VideoCodec::H264);
    let rate = match (out.crf, out.bitrate) {
        (Some(_), Some(_)) => return Err(bad("give crf or bitrate, not both")),
        (_, Some(_)) if out.target.is_some() => {
            return Err(bad("a target searches the CRF: give no bitrate with it"))
        }
        (Some(c), None) => RateControl::Crf(c),
        (None, Some(b)) => RateControl::Bitrate(b),
        (None, None) => RateControl::Crf(default_crf(codec)),
    };
    let preset = out
        .preset
        .clone()
        .unwrap_or_else(|| default_preset(codec).to_string());
    let rendition = RenditionSpec {
        name: format!("out{index}"),
        codec,
        rate,
        preset,
        height: out.height,
        hdr: out.hdr.unwrap_or_default(),
        maxrate: out.max_bitrate,
        profile: None,
        target: out.target.map(Into::into),
    };
    if let Some(cap) = out.max_bitrate {
        tessera_model::settings::check_maxrate(cap)
            .map_err(|e| bad(format!("max_bitrate: {e}")))?;
    }
    if let (Some(cap), RateControl::Bitrate(b)) = (out.max_bitrate, rate) {
        if cap < b {
            return Err(bad(format!("max_bitrate {cap} is below bitrate {b}")));
        }
    }
    tessera_model::settings::check_target(&rendition).map_err(|e| bad(format!("target: {e}")))?;
    // The range of the rate on every path (the NVENC one builds no x26x options).
    tessera_model::settings::check_rate(codec, rendition.rate).map_err(bad)?;
    if hardware == Hardware::Gpu {
        // NVENC presets p1-p7, or the x264 names mapped onto them.
        tessera_media::nvenc_preset(codec, &rendition.preset).map_err(bad)?;
    } else {
        tessera_model::settings::encoder_options(&rendition, 1).map_err(bad)?;
        resolve_preset(codec, &rendition.preset).map_err(bad)?;
    }
    if let Some(h) = out.height {
        if !(2..=16384).contains(&h) {
            return Err(bad(format!("height {h} must be within 2..=16384")));
        }
    }
    Ok(PlannedOutput {
        destination,
        container,
        rendition,
    })
}

/// Checks a job against the farm's rules; returns the plan or (code, message). `gpu` is what
/// the farm's FFmpeg offers for NVENC (the media child's answer), for jobs that ask for a card.
pub fn validate(
    job: &ApiJob,
    buckets: &[String],
    default_segment: f64,
    gpu: &tessera_model::capabilities::HwCapabilities,
) -> Result<JobPlan, Invalid> {
    let input = S3Uri::parse(&job.input).map_err(|e| bad(format!("input: {e}")))?;
    allowed(&input, buckets, "input")?;
    if job.outputs.is_empty() || job.outputs.len() > MAX_OUTPUTS {
        return Err(bad(format!(
            "a job needs 1 to {MAX_OUTPUTS} outputs, got {}",
            job.outputs.len()
        )));
    }
    let mut outputs: Vec<PlannedOutput> = Vec::with_capacity(job.outputs.len());
    let mut package: Option<PlannedPackage> = None;
    for (i, out) in job.outputs.iter().enumerate() {
        if out.package.is_some() {
            if package.is_some() {
                return Err(bad(format!("outputs[{i}]: a job has at most one package")));
            }
            package = Some(
                validate_package(out, buckets)
                    .map_err(|(c, m)| (c, format!("outputs[{i}]: {m}")))?,
            );
            continue;
        }
        let planned = validate_output(out, i, buckets, job.hardware)
            .map_err(|(c, m)| (c, format!("outputs[{i}]: {m}")))?;
        if outputs.iter().any(|o| o.destination == planned.destination) {
            return Err(bad(format!(
                "outputs[{i}]: destination {} is given twice",
                planned.destination
            )));
        }
        outputs.push(planned);
    }
    let rungs = package.as_ref().map_or(0, |p| match &p.spec.ladder {
        Ladder::Rungs(r) => r.len(),
        Ladder::Auto(_) => tessera_package::ladder::AUTO_RUNGS,
    });
    if outputs.len() + rungs > MAX_OUTPUTS {
        return Err(bad(format!(
            "{} outputs and {rungs} package rungs: at most {MAX_OUTPUTS} encodes per segment",
            outputs.len()
        )));
    }
    if package.is_some() && job.hardware == Hardware::Gpu {
        return Err(bad(
            "a package is encoded on the CPU path for now: drop hardware \"gpu\"",
        ));
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
    let nvenc_can = |o: &PlannedOutput| gpu.gpu_path() && gpu.has_encoder(o.rendition.codec);
    let hardware = match job.hardware {
        Hardware::Gpu => {
            if let Some(o) = outputs.iter().find(|o| !nvenc_can(o)) {
                return Err(bad(format!(
                    "hardware \"gpu\": this farm's FFmpeg cannot encode {:?} on NVENC (output {})",
                    o.rendition.codec, o.destination
                )));
            }
            Hardware::Gpu
        }
        // "any" with an output NVENC cannot write here stays on the CPU, as does a package.
        Hardware::Any if package.is_some() || !outputs.iter().all(nvenc_can) => Hardware::Cpu,
        other => other,
    };
    Ok(JobPlan {
        input,
        outputs,
        hardware,
        priority: job.priority.unwrap_or_else(default_priority),
        segment_seconds,
        psnr: job.psnr,
        stereo_downmix: job.stereo_downmix,
        callback_url: job.callback_url.clone(),
        package,
    })
}

/// A package output: only `package` and `destination` (a prefix); the rest is refused, since
/// the rungs carry the encoder settings.
fn validate_package(out: &ApiOutput, buckets: &[String]) -> Result<PlannedPackage, Invalid> {
    let Some(spec) = &out.package else {
        return Err(bad("not a package"));
    };
    let stray = [
        ("codec", out.codec.is_some()),
        ("crf", out.crf.is_some()),
        ("bitrate", out.bitrate.is_some()),
        ("preset", out.preset.is_some()),
        ("height", out.height.is_some()),
        ("hdr", out.hdr.is_some()),
        ("container", out.container.is_some()),
        ("target", out.target.is_some()),
        ("max_bitrate", out.max_bitrate.is_some()),
    ];
    if let Some((name, _)) = stray.iter().find(|(_, set)| *set) {
        let instead = match *name {
            "target" => "give it as package.target or per rung in package.ladder",
            _ => "give it per rung in package.ladder",
        };
        return Err(bad(format!(
            "{name} does not apply to a package: {instead}"
        )));
    }
    spec.check().map_err(|e| bad(format!("package: {e}")))?;
    let (bucket, prefix) = PlannedPackage::parse_destination(&out.destination)
        .map_err(|e| bad(format!("destination: {e}")))?;
    allowed(
        &S3Uri {
            bucket: bucket.clone(),
            key: prefix.clone(),
        },
        buckets,
        "destination",
    )?;
    Ok(PlannedPackage {
        spec: spec.clone(),
        bucket,
        prefix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::status;
    use axum::http::StatusCode;

    fn job(body: serde_json::Value) -> ApiJob {
        serde_json::from_value(body).unwrap()
    }

    /// An FFmpeg with the GPU path and NVENC for H.264 and HEVC (Debian's 5.1).
    const NVENC: tessera_model::capabilities::HwCapabilities =
        tessera_model::capabilities::HwCapabilities {
            cuda_hwaccel: true,
            h264_nvenc: true,
            hevc_nvenc: true,
            av1_nvenc: false,
            scale_cuda: true,
        };

    #[test]
    fn hardware_follows_what_the_media_child_offers() {
        let buckets = vec!["input".to_string(), "output".to_string()];
        let ask = |hardware: &str, codec: &str| {
            job(
                serde_json::json!({"input": "s3://input/a.mp4", "hardware": hardware,
                "outputs": [{"destination": "s3://output/b.mp4", "codec": codec}]}),
            )
        };
        let none = tessera_model::capabilities::HwCapabilities::default();
        let hw = |j: &ApiJob, caps| validate(j, &buckets, 10.0, caps).map(|p| p.hardware);
        assert_eq!(hw(&ask("gpu", "h264"), &NVENC), Ok(Hardware::Gpu));
        assert_eq!(hw(&ask("any", "hevc"), &NVENC), Ok(Hardware::Any));
        // Without NVENC for the codec, "gpu" is refused and "any" stays on the CPU.
        let err = hw(&ask("gpu", "h264"), &none).unwrap_err();
        assert!(err.1.contains("cannot encode H264 on NVENC"), "{err:?}");
        assert!(hw(&ask("gpu", "av1"), &NVENC).is_err());
        assert_eq!(hw(&ask("any", "h264"), &none), Ok(Hardware::Cpu));
        assert_eq!(hw(&ask("any", "av1"), &NVENC), Ok(Hardware::Cpu));
        assert_eq!(hw(&ask("cpu", "h264"), &NVENC), Ok(Hardware::Cpu));
    }

    #[test]
    fn validation() {
        let buckets = vec!["input".to_string(), "output".to_string()];
        let ok = job(
            serde_json::json!({"input": "s3://input/a.mp4", "outputs": [{"destination": "s3://output/b.mkv", "crf": 20}]}),
        );
        let p = validate(&ok, &buckets, 10.0, &NVENC).unwrap();
        assert_eq!(p.outputs[0].container, Container::Mkv);
        assert_eq!(p.outputs[0].rendition.rate, RateControl::Crf(20.0));
        assert_eq!(p.priority, 5);
        let forbidden = job(
            serde_json::json!({"input": "s3://secret/a.mp4", "outputs": [{"destination": "s3://output/b.mp4"}]}),
        );
        assert_eq!(
            status(&validate(&forbidden, &buckets, 10.0, &NVENC).unwrap_err().0),
            StatusCode::FORBIDDEN
        );
        let two = job(
            serde_json::json!({"input": "s3://input/a.mp4", "outputs": [{"destination": "s3://output/b.mp4"}, {"destination": "s3://output/c.mp4"}]}),
        );
        let p = validate(&two, &buckets, 10.0, &NVENC).unwrap();
        let names: Vec<_> = p
            .outputs
            .iter()
            .map(|o| o.rendition.name.as_str())
            .collect();
        assert_eq!(names, ["out0", "out1"]);
        let same = job(
            serde_json::json!({"input": "s3://input/a.mp4", "outputs": [{"destination": "s3://output/b.mp4"}, {"destination": "s3://output/b.mp4", "height": 360}]}),
        );
        let err = validate(&same, &buckets, 10.0, &NVENC).unwrap_err();
        assert!(
            err.1.contains("outputs[1]") && err.1.contains("twice"),
            "{err:?}"
        );
        let none = job(serde_json::json!({"input": "s3://input/a.mp4", "outputs": []}));
        assert_eq!(
            validate(&none, &buckets, 10.0, &NVENC).unwrap_err().0,
            "invalid_job"
        );
        let urgent = job(
            serde_json::json!({"input": "s3://input/a.mp4", "outputs": [{"destination": "s3://output/b.mp4"}], "priority": 9}),
        );
        assert_eq!(
            validate(&urgent, &buckets, 10.0, &NVENC).unwrap().priority,
            9
        );
        let bad_preset = job(
            serde_json::json!({"input": "s3://input/a.mp4", "outputs": [{"destination": "s3://output/b.mp4", "preset": "warp"}]}),
        );
        assert!(validate(&bad_preset, &buckets, 10.0, &NVENC).is_err());
        let avi = job(
            serde_json::json!({"input": "s3://input/a.mp4", "outputs": [{"destination": "s3://output/b.avi"}]}),
        );
        assert!(validate(&avi, &buckets, 10.0, &NVENC).is_err());
    }

    #[test]
    fn targets_and_caps_are_checked() {
        let buckets = vec!["input".to_string(), "output".to_string()];
        let with = |extra: serde_json::Value| {
            let mut out = serde_json::json!({"destination": "s3://output/b.mp4"});
            out.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            let j = job(serde_json::json!({"input": "s3://input/a.mp4", "outputs": [out]}));
            validate(&j, &buckets, 10.0, &NVENC).map(|p| p.outputs[0].rendition.clone())
        };
        let r = with(
            serde_json::json!({"target": {"vmaf": 93, "max_crf": 30}, "max_bitrate": 6000000}),
        )
        .unwrap();
        let t = r.target.unwrap();
        assert_eq!(
            (t.vmaf, t.min_rate_factor, t.max_rate_factor),
            (93.0, None, Some(30.0))
        );
        assert_eq!(r.maxrate, Some(6_000_000));
        let refused = [
            (
                serde_json::json!({"target": {"vmaf": 93}, "bitrate": 2000000}),
                "no bitrate",
            ),
            (
                serde_json::json!({"target": {"vmaf": 100.5}}),
                "target VMAF 100.5",
            ),
            (
                serde_json::json!({"target": {"vmaf": 90, "min_crf": 30, "max_crf": 20}}),
                "min rate factor 30",
            ),
            (
                serde_json::json!({"target": {"vmaf": 90, "max_crf": 52}}),
                "outside 0..=51",
            ),
            (
                serde_json::json!({"bitrate": 3000000, "max_bitrate": 2000000}),
                "below bitrate",
            ),
        ];
        for (extra, why) in refused {
            let err = with(extra.clone()).unwrap_err();
            assert!(err.1.contains(why), "{extra}: {err:?}");
        }
        // A target with a package is given per rung.
        let pkg = job(
            serde_json::json!({"input": "s3://input/a.mp4", "outputs": [{
            "destination": "s3://output/p/", "target": {"vmaf": 90},
            "package": {"format": "hls"}}]}),
        );
        let err = validate(&pkg, &buckets, 10.0, &NVENC).unwrap_err();
        assert!(
            err.1
                .contains("target does not apply to a package: give it as package.target"),
            "{err:?}"
        );
        // There it is taken, and a bad one is named.
        let pkg = job(
            serde_json::json!({"input": "s3://input/a.mp4", "outputs": [{
            "destination": "s3://output/p/",
            "package": {"format": "hls", "target": {"vmaf": 90},
                "ladder": [{"height": 360}, {"height": 234, "target": {"vmaf": 0}}]}}]}),
        );
        let err = validate(&pkg, &buckets, 10.0, &NVENC).unwrap_err();
        assert!(
            err.1.contains("package: ladder[1]: target: target VMAF 0"),
            "{err:?}"
        );
    }
}
