//! Tests of the GPU path that run on a machine without a GPU: the build's capabilities against
//! the ffmpeg CLI, clean failures where no CUDA driver is present, request compatibility, the
//! shared range gate, and the decode-path choice.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::encode::range::RangeGate;
use crate::{encode_segment, nvdec_decode_check};
use tessera_model::encode::{
    EncodeRequest, HardwareEncode, RateControl, RenditionOutput, RenditionSpec, VideoCodec,
};
use tessera_model::error_code::ErrorClass;

/// Whether this machine has an NVIDIA driver (then the "no GPU" checks do not apply).
fn has_nvidia_driver() -> bool {
    Path::new("/dev/nvidiactl").exists()
}

fn ffmpeg_lists(arg: &str) -> Option<String> {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", arg])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn listed(list: &str, name: &str) -> bool {
    list.lines()
        .any(|l| l.split_whitespace().any(|w| w == name))
}

fn request(codec: VideoCodec, hardware: Option<HardwareEncode>) -> EncodeRequest {
    EncodeRequest {
        chunk: PathBuf::from("/nonexistent/tessera-chunk.nut"),
        source: crate::encode::range::test_source(0, 100),
        outputs: vec![RenditionOutput {
            spec: RenditionSpec {
                name: "720p".into(),
                codec,
                rate: RateControl::Crf(23.0),
                preset: "medium".into(),
                height: Some(720),
                hdr: Default::default(),
                maxrate: None,
                profile: None,
                target: None,
            },
            path: PathBuf::from("/nonexistent/out.nut"),
        }],
        threads: 1,
        hardware,
        stills: Vec::new(),
    }
}

#[test]
fn capabilities_match_the_ffmpeg_cli() {
    let (Some(encoders), Some(filters), Some(hwaccels)) = (
        ffmpeg_lists("-encoders"),
        ffmpeg_lists("-filters"),
        ffmpeg_lists("-hwaccels"),
    ) else {
        eprintln!("ffmpeg CLI not found; skipping");
        return;
    };
    let caps = hw_capabilities();
    assert_eq!(caps.h264_nvenc, listed(&encoders, "h264_nvenc"));
    assert_eq!(caps.hevc_nvenc, listed(&encoders, "hevc_nvenc"));
    assert_eq!(caps.av1_nvenc, listed(&encoders, "av1_nvenc"));
    assert_eq!(caps.scale_cuda, listed(&filters, "scale_cuda"));
    assert_eq!(caps.cuda_hwaccel, listed(&hwaccels, "cuda"));
}

#[test]
fn hardware_encode_without_a_gpu_is_a_clean_gpu_unavailable() {
    if has_nvidia_driver() || !hw_capabilities().gpu_path() {
        eprintln!("NVIDIA driver present, or no CUDA in this build; skipping");
        return;
    }
    let req = request(VideoCodec::H264, Some(HardwareEncode::default()));
    let err = encode_segment(&req, &mut |_| {}).unwrap_err();
    eprintln!("{err}");
    assert_eq!(err.code(), "gpu_unavailable", "{err}");
    assert_eq!(err.class(), ErrorClass::Retry);
    assert_eq!(err.gpu_device(), Some(0));
    assert!(err.to_string().contains("creating CUDA device 0"), "{err}");
    // A second try fails the same way (nothing half-made was cached).
    let again = encode_segment(&req, &mut |_| {}).unwrap_err();
    assert_eq!(again.code(), "gpu_unavailable");
    let err = crate::warm_cuda_device(3).unwrap_err();
    assert_eq!(
        (err.code().as_str(), err.gpu_device()),
        ("gpu_unavailable", Some(3))
    );
}

#[test]
fn nvdec_check_without_a_gpu_is_a_clean_gpu_unavailable() {
    if has_nvidia_driver() || !hw_capabilities().cuda_hwaccel {
        return;
    }
    let err = nvdec_decode_check(Path::new("/nonexistent/in.mp4"), 0).unwrap_err();
    assert_eq!(err.code(), "gpu_unavailable", "{err}");
}

#[test]
fn an_encoder_missing_from_the_build_is_named() {
    if hw_capabilities().av1_nvenc || !hw_capabilities().gpu_path() {
        return;
    }
    let req = request(VideoCodec::Av1, Some(HardwareEncode::default()));
    let err = encode_segment(&req, &mut |_| {}).unwrap_err();
    // The codec, not the card: no card is marked, and an `any` job runs on the CPU path.
    assert_eq!(err.code(), "gpu_request_unsupported");
    assert_eq!(err.class(), ErrorClass::Abort);
    assert!(err.to_string().contains("av1_nvenc"), "{err}");
}

#[test]
fn bad_nvenc_settings_are_invalid_requests_before_any_gpu_work() {
    if !hw_capabilities().gpu_path() || !hw_capabilities().h264_nvenc {
        return;
    }
    let hw = HardwareEncode {
        aq_strength: Some(4),
        ..HardwareEncode::default()
    };
    let err = encode_segment(&request(VideoCodec::H264, Some(hw)), &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "invalid_request", "{err}");
}

#[test]
fn requests_without_hardware_stay_software() {
    let req = request(VideoCodec::H264, None);
    let mut json = serde_json::to_value(&req).unwrap();
    json.as_object_mut().unwrap().remove("hardware");
    let back: EncodeRequest = serde_json::from_value(json).unwrap();
    assert_eq!(back.hardware, None);
    assert_eq!(back, req);
    // The software path is taken: the missing chunk is reported, not a GPU condition.
    let err = encode_segment(&req, &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "input_unreadable", "{err}");
}

#[test]
fn range_gate_selects_and_orders_frames() {
    let mut req = request(VideoCodec::H264, None);
    req.source.start_pts = 10;
    req.source.end_pts = 13;
    req.source.bias = 5;
    let tb = ffmpeg_next::Rational::new(1, 25);
    let mut gate = RangeGate::new(&req, tb);
    let got: Vec<_> = [
        Some(14),
        None,
        Some(15),
        Some(16),
        Some(16),
        Some(17),
        Some(18),
    ]
    .into_iter()
    .map(|ts| gate.admit(ts))
    .collect();
    // 14 is pre-roll (9 < 10); 16 repeated becomes 17; 18 (13) is past the end.
    assert_eq!(
        got,
        vec![None, None, Some(15), Some(16), Some(17), Some(18), None]
    );
    assert_eq!((gate.decoded, gate.in_range), (7, 4));
}

#[test]
fn nvenc_options_exist_in_this_build() {
    use crate::encode::hw::nvenc::{nvenc_encoder_name, nvenc_settings};
    // Options of AVCodecContext itself, not listed under the encoder's private options.
    const GENERIC: [&str; 5] = ["g", "bf", "b", "maxrate", "bufsize"];
    let hw = HardwareEncode {
        spatial_aq: true,
        temporal_aq: true,
        aq_strength: Some(8),
        ..HardwareEncode::default()
    };
    for (codec, depth) in [(VideoCodec::H264, 8), (VideoCodec::Hevc, 10)] {
        let Some(help) = ffmpeg_lists_encoder(nvenc_encoder_name(codec)) else {
            continue;
        };
        for rate in [RateControl::Crf(23.0), RateControl::Bitrate(3_000_000)] {
            let mut spec = request(codec, None).outputs[0].spec.clone();
            spec.rate = rate;
            let s = nvenc_settings(&spec, &hw, depth).unwrap();
            for (k, v) in &s.options {
                if GENERIC.contains(&k.as_str()) {
                    continue;
                }
                assert!(listed(&help, &format!("-{k}")), "{} lacks -{k}", s.encoder);
                if ["preset", "tune", "rc", "profile"].contains(&k.as_str()) {
                    assert!(listed(&help, v), "{} -{k} lacks the value {v}", s.encoder);
                }
            }
        }
    }
}

fn ffmpeg_lists_encoder(name: &str) -> Option<String> {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-h", &format!("encoder={name}")])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.contains("AVOptions").then_some(text)
}

#[test]
fn nvdec_for_420_sources_it_knows() {
    let p = choose_decode_path("h264", "yuv420p", 8, true, false);
    assert_eq!((p.path, p.gpu_format), (DecodePath::Nvdec, "nv12"));
    let p = choose_decode_path("hevc", "yuv420p10le", 10, true, true);
    assert_eq!((p.path, p.gpu_format), (DecodePath::Nvdec, "p010le"));
    let p = choose_decode_path("vp9", "yuvj420p", 8, true, true);
    assert_eq!(p.path, DecodePath::Nvdec);
}

#[test]
fn software_upload_where_nvdec_cannot() {
    // AV1 on a T4: the caller says the card cannot.
    let p = choose_decode_path("av1", "yuv420p", 8, false, false);
    assert_eq!((p.path, p.gpu_format), (DecodePath::SoftwareUpload, "nv12"));
    let p = choose_decode_path("prores", "yuv422p10le", 10, true, true);
    assert_eq!(
        (p.path, p.gpu_format),
        (DecodePath::SoftwareUpload, "p010le")
    );
    let p = choose_decode_path("hevc", "yuv444p", 8, true, false);
    assert_eq!(p.path, DecodePath::SoftwareUpload);
    assert!(p.reason.contains("yuv444p"));
    let p = choose_decode_path("h264", "yuv420p10le", 10, true, false);
    assert_eq!((p.path, p.gpu_format), (DecodePath::SoftwareUpload, "nv12"));
    let p = choose_decode_path("hevc", "yuv420p12le", 12, true, true);
    assert_eq!(p.path, DecodePath::SoftwareUpload);
}

/// Review M1: AV1 on NVDEC opens the native decoder (FFmpeg's default AV1 decoder,
/// libdav1d or libaom, has no hwaccel); the native one exists in this build.
#[test]
fn av1_on_nvdec_opens_the_native_decoder() {
    assert_eq!(nvdec_decoder_name("av1"), Some("av1"));
    assert_eq!(nvdec_decoder_name("h264"), None);
    assert_eq!(nvdec_decoder_name("hevc"), None);
    crate::init();
    let native = ffmpeg_next::decoder::find_by_name("av1").expect("native av1 decoder");
    let default = ffmpeg_next::decoder::find(ffmpeg_next::codec::Id::AV1).unwrap();
    assert_ne!(
        default.name(),
        "av1",
        "the default AV1 decoder is a library one"
    );
    assert_eq!(native.name(), "av1");
}

#[test]
fn hardware_request_defaults_from_json() {
    let hw: HardwareEncode = serde_json::from_str(r#"{"device":1}"#).unwrap();
    assert_eq!(
        hw,
        HardwareEncode {
            device: 1,
            ..HardwareEncode::default()
        }
    );
    assert!(hw.nvdec);
}
