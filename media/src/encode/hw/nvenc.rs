//! NVENC encoder settings from a rendition spec. Pure functions, unit-tested without a GPU.
//!
//! Why: the GPU path must keep the software path's contract (IDR first, closed GOP, the job's
//! quality target) with NVENC's own vocabulary, and every segment of a job must get identical
//! settings; computing them in one place from the spec alone makes both checkable here.
//!
//! Mappings (documented in `docs/gpu-media.md` too):
//! - presets: `p1`..`p7` as given; x264 names map ultrafast/superfast -> p1, veryfast -> p2,
//!   faster/fast -> p3, medium -> p4, slow -> p5, slower -> p6, veryslow/placebo -> p7; an
//!   SVT-AV1 number n (0..=13) maps to p(7 - n/2).
//! - CRF -> `rc=vbr`, `cq=<crf + offset>`, `b=0` (constant quality, no bitrate target);
//!   offsets: H.264 0, HEVC -4 (x265's CRF 28 default ~ NVENC HEVC CQ 24), AV1 0 (same 0..63
//!   scale as SVT-AV1). CQ 0 means "automatic" to NVENC, so the result is clamped to >= 1.
//! - bitrate -> `rc=vbr` with the software path's VBV (maxrate 1.5x, bufsize 2x), or
//!   `rc=cbr` (maxrate = bitrate, bufsize 2x) when `HardwareEncode::cbr`.
//! - GOP: `g=250` (x264's keyint), IDR period = GOP (NVENC sets it so), `forced-idr=1` (the
//!   first frame is sent as a forced I frame, which becomes an IDR), `no-scenecut=1` (no
//!   extra non-IDR I frames from look-ahead), `bf=3`: every GOP is closed.

use tessera_model::encode::HardwareEncode;
use tessera_model::encode::{RateControl, RenditionSpec, VideoCodec};

/// The GOP length NVENC is given (frames between IDRs), x264's default keyint.
pub const NVENC_GOP: u32 = 250;
/// B-frames between references.
pub const NVENC_B_FRAMES: u32 = 3;
/// Look-ahead depth used when temporal AQ is on and no depth was asked for (NVENC applies
/// temporal AQ through its look-ahead).
pub const TEMPORAL_AQ_LOOKAHEAD: u16 = 16;

/// Everything needed to open one NVENC encoder for a rendition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvencSettings {
    /// FFmpeg encoder name (h264_nvenc, hevc_nvenc, av1_nvenc).
    pub encoder: &'static str,
    /// Options passed to avcodec_open2, in order.
    pub options: Vec<(String, String)>,
    /// Pixel format of the CUDA frames the encoder takes (nv12, or p010le for 10-bit).
    pub sw_format: &'static str,
}

/// FFmpeg's NVENC encoder name for a codec.
pub fn nvenc_encoder_name(codec: VideoCodec) -> &'static str {
    match codec {
        VideoCodec::H264 => "h264_nvenc",
        VideoCodec::Hevc => "hevc_nvenc",
        VideoCodec::Av1 => "av1_nvenc",
    }
}

/// Maps a preset name to NVENC's p1..p7.
pub fn nvenc_preset(codec: VideoCodec, preset: &str) -> Result<&'static str, String> {
    const P: [&str; 7] = ["p1", "p2", "p3", "p4", "p5", "p6", "p7"];
    if let Some(p) = P.iter().find(|p| **p == preset) {
        return Ok(p);
    }
    let idx = match preset {
        "ultrafast" | "superfast" => 0,
        "veryfast" => 1,
        "faster" | "fast" => 2,
        "medium" => 3,
        "slow" => 4,
        "slower" => 5,
        "veryslow" | "placebo" => 6,
        other => match (codec, other.parse::<u8>()) {
            (VideoCodec::Av1, Ok(n)) if n <= 13 => 6 - usize::from(n / 2),
            _ => {
                return Err(format!(
                    "preset '{preset}' is neither p1..p7 nor an x264 name{}",
                    if codec == VideoCodec::Av1 {
                        " nor 0..=13"
                    } else {
                        ""
                    }
                ))
            }
        },
    };
    Ok(P[idx])
}

/// NVENC's constant-quality target for a CRF (see the module docs for the offsets).
pub fn nvenc_cq(codec: VideoCodec, crf: f32) -> Result<u32, String> {
    let (max, offset) = match codec {
        VideoCodec::H264 => (51.0, 0.0),
        VideoCodec::Hevc => (51.0, -4.0),
        VideoCodec::Av1 => (63.0, 0.0),
    };
    if !(0.0..=max).contains(&crf) {
        return Err(format!("crf {crf} is outside 0..={max}"));
    }
    Ok(((crf + offset).round() as i64).clamp(1, max as i64) as u32)
}

/// Pixel format of the frames NVENC encodes: 10-bit (p010le) for HEVC/AV1 from a source deeper
/// than 8 bits, as the software path's `output_pix_fmt` does; nv12 otherwise.
pub fn nvenc_sw_format(codec: VideoCodec, source_depth: u8) -> &'static str {
    match codec {
        VideoCodec::Hevc | VideoCodec::Av1 if source_depth > 8 => "p010le",
        _ => "nv12",
    }
}

/// Bits a pixel of one frame may take at most under constant quality: a ceiling that the
/// quality target, not the cap, decides below (x264 at CRF 23 spends about 0.05-0.1).
const CQ_CEILING_BITS_PER_PIXEL: f64 = 0.3;

/// The peak bitrate (b/s) of a constant-quality rendition of `width` x `height` at `fps`.
/// Why: with `b=0` and no `maxrate`, FFmpeg 5.1's NVENC takes the preset's average bitrate as
/// the ceiling, so the quality target would be capped by a figure nobody chose (GPU
/// re-review, failure 3).
pub fn cq_ceiling(width: u32, height: u32, fps: f64) -> u64 {
    let fps = if fps.is_finite() && fps > 0.0 {
        fps.min(240.0)
    } else {
        30.0
    };
    (CQ_CEILING_BITS_PER_PIXEL * f64::from(width) * f64::from(height) * fps).round() as u64
}

impl NvencSettings {
    /// Gives a constant-quality rendition (`cq` set) without a cap an explicit `maxrate`
    /// ([`cq_ceiling`] of its output size and rate) and a `bufsize` of twice that.
    pub fn with_cq_ceiling(mut self, width: u32, height: u32, fps: f64) -> Self {
        let has = |k: &str| self.options.iter().any(|(o, _)| o == k);
        if has("cq") && !has("maxrate") {
            let cap = cq_ceiling(width, height, fps);
            self.options.push(("maxrate".into(), cap.to_string()));
            self.options
                .push(("bufsize".into(), cap.saturating_mul(2).to_string()));
        }
        self
    }
}

/// The full NVENC settings for a rendition on the GPU path.
pub fn nvenc_settings(
    spec: &RenditionSpec,
    hw: &HardwareEncode,
    source_depth: u8,
) -> Result<NvencSettings, String> {
    let sw_format = nvenc_sw_format(spec.codec, source_depth);
    let mut opts: Vec<(String, String)> = Vec::new();
    let mut set = |k: &str, v: String| opts.push((k.to_string(), v));
    set("preset", nvenc_preset(spec.codec, &spec.preset)?.into());
    set("tune", "hq".into());
    let profile = match (spec.codec, sw_format) {
        (VideoCodec::H264, _) => "high",
        (VideoCodec::Hevc, "p010le") => "main10",
        (VideoCodec::Hevc, _) => "main",
        (VideoCodec::Av1, _) => "main",
    };
    set("profile", profile.into());
    match spec.rate {
        RateControl::Crf(crf) => {
            set("rc", "vbr".into());
            set("cq", nvenc_cq(spec.codec, crf)?.to_string());
            set("b", "0".into());
            // A capped CRF, as the software path's VBV; without a cap the rendition sets its
            // own ceiling once it knows its size (`with_cq_ceiling`).
            if let Some(cap) = spec.maxrate {
                tessera_model::settings::check_maxrate(cap)?;
                set("maxrate", cap.to_string());
                set("bufsize", cap.saturating_mul(2).to_string());
            }
        }
        RateControl::Bitrate(bps) => {
            if bps < 10_000 {
                return Err(format!("bitrate {bps} b/s is too low (minimum 10k)"));
            }
            let (rc, maxrate) = if hw.cbr {
                ("cbr", bps)
            } else {
                ("vbr", bps * 3 / 2)
            };
            set("rc", rc.into());
            set("b", bps.to_string());
            set("maxrate", maxrate.to_string());
            set("bufsize", (bps * 2).to_string());
        }
    }
    set("g", NVENC_GOP.to_string());
    set("bf", NVENC_B_FRAMES.to_string());
    set("forced-idr", "1".into());
    set("no-scenecut", "1".into());
    if hw.spatial_aq {
        set("spatial-aq", "1".into());
        if let Some(s) = hw.aq_strength {
            if !(1..=15).contains(&s) {
                return Err(format!("aq_strength {s} is outside 1..=15"));
            }
            set("aq-strength", s.to_string());
        }
    } else if hw.aq_strength.is_some() {
        return Err("aq_strength needs spatial_aq".into());
    }
    let lookahead = match (hw.lookahead, hw.temporal_aq) {
        (Some(n), _) => Some(n),
        (None, true) => Some(TEMPORAL_AQ_LOOKAHEAD),
        (None, false) => None,
    };
    if hw.temporal_aq {
        set("temporal-aq", "1".into());
    }
    if let Some(n) = lookahead {
        set("rc-lookahead", n.to_string());
    }
    Ok(NvencSettings {
        encoder: nvenc_encoder_name(spec.codec),
        options: opts,
        sw_format,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rendition named "r" at the source size.
    fn spec(codec: VideoCodec, rate: RateControl, preset: &str) -> RenditionSpec {
        RenditionSpec {
            name: "r".into(),
            codec,
            rate,
            preset: preset.into(),
            height: None,
            hdr: Default::default(),
            maxrate: None,
            profile: None,
            target: None,
        }
    }

    fn get<'a>(s: &'a NvencSettings, k: &str) -> Option<&'a str> {
        s.options
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }

    /// GPU re-review, failure 3: constant quality always has a ceiling someone chose: the
    /// job's `maxrate` (with a buffer of twice it), else one from the output's size and rate,
    /// never the preset's average bitrate (FFmpeg 5.1's ceiling for `b=0` without `maxrate`).
    #[test]
    fn constant_quality_has_an_explicit_ceiling() {
        let hw = HardwareEncode::default();
        let crf = spec(VideoCodec::H264, RateControl::Crf(23.0), "p4");
        let s = nvenc_settings(&crf, &hw, 8).unwrap();
        assert_eq!((get(&s, "b"), get(&s, "maxrate")), (Some("0"), None));
        let s = s.with_cq_ceiling(1920, 1080, 30.0);
        assert_eq!(get(&s, "maxrate"), Some("18662400"));
        assert_eq!(get(&s, "bufsize"), Some("37324800"));
        assert_eq!(cq_ceiling(3840, 2160, 60.0), 4 * 2 * 18_662_400);
        assert_eq!(cq_ceiling(1280, 720, f64::NAN), cq_ceiling(1280, 720, 30.0));
        // The job's cap stands; the rendition adds none.
        let capped = RenditionSpec {
            maxrate: Some(4_000_000),
            ..crf.clone()
        };
        let s = nvenc_settings(&capped, &hw, 8)
            .unwrap()
            .with_cq_ceiling(1920, 1080, 30.0);
        assert_eq!(get(&s, "maxrate"), Some("4000000"));
        assert_eq!(get(&s, "bufsize"), Some("8000000"));
        assert_eq!(s.options.iter().filter(|(k, _)| k == "maxrate").count(), 1);
        // A bitrate rendition keeps its own VBV.
        let vbr = spec(VideoCodec::Hevc, RateControl::Bitrate(3_000_000), "p4");
        let s = nvenc_settings(&vbr, &hw, 8)
            .unwrap()
            .with_cq_ceiling(1920, 1080, 30.0);
        assert_eq!(get(&s, "maxrate"), Some("4500000"));
    }

    #[test]
    fn presets_map_to_p1_p7() {
        let h = VideoCodec::H264;
        assert_eq!(nvenc_preset(h, "p5").unwrap(), "p5");
        let table = [
            ("ultrafast", "p1"),
            ("superfast", "p1"),
            ("veryfast", "p2"),
            ("faster", "p3"),
            ("fast", "p3"),
            ("medium", "p4"),
            ("slow", "p5"),
            ("slower", "p6"),
            ("veryslow", "p7"),
            ("placebo", "p7"),
        ];
        for (x264, p) in table {
            assert_eq!(nvenc_preset(h, x264).unwrap(), p, "{x264}");
        }
        assert_eq!(nvenc_preset(VideoCodec::Av1, "0").unwrap(), "p7");
        assert_eq!(nvenc_preset(VideoCodec::Av1, "8").unwrap(), "p3");
        assert_eq!(nvenc_preset(VideoCodec::Av1, "13").unwrap(), "p1");
        assert!(nvenc_preset(VideoCodec::Av1, "14").is_err());
        assert!(nvenc_preset(h, "8").is_err());
        assert!(nvenc_preset(h, "p8").unwrap_err().contains("p1..p7"));
    }

    #[test]
    fn crf_maps_to_constant_quality() {
        assert_eq!(nvenc_cq(VideoCodec::H264, 23.0).unwrap(), 23);
        assert_eq!(nvenc_cq(VideoCodec::Hevc, 28.0).unwrap(), 24);
        assert_eq!(nvenc_cq(VideoCodec::Av1, 35.0).unwrap(), 35);
        assert_eq!(
            nvenc_cq(VideoCodec::H264, 0.0).unwrap(),
            1,
            "cq 0 would mean auto"
        );
        assert_eq!(nvenc_cq(VideoCodec::Hevc, 2.0).unwrap(), 1);
        assert!(nvenc_cq(VideoCodec::H264, 52.0).is_err());
        assert!(nvenc_cq(VideoCodec::Av1, 64.0).is_err());
        let s = nvenc_settings(
            &spec(VideoCodec::H264, RateControl::Crf(20.0), "medium"),
            &HardwareEncode::default(),
            8,
        )
        .unwrap();
        assert_eq!(get(&s, "rc"), Some("vbr"));
        assert_eq!(get(&s, "cq"), Some("20"));
        assert_eq!(get(&s, "b"), Some("0"));
        assert_eq!(get(&s, "maxrate"), None);
    }

    #[test]
    fn bitrate_maps_to_vbr_or_cbr() {
        let sp = spec(VideoCodec::Hevc, RateControl::Bitrate(2_000_000), "fast");
        let s = nvenc_settings(&sp, &HardwareEncode::default(), 8).unwrap();
        assert_eq!(get(&s, "rc"), Some("vbr"));
        assert_eq!(get(&s, "b"), Some("2000000"));
        assert_eq!(get(&s, "maxrate"), Some("3000000"));
        assert_eq!(get(&s, "bufsize"), Some("4000000"));
        assert_eq!(get(&s, "cq"), None);
        let cbr = HardwareEncode {
            cbr: true,
            ..HardwareEncode::default()
        };
        let s = nvenc_settings(&sp, &cbr, 8).unwrap();
        assert_eq!(get(&s, "rc"), Some("cbr"));
        assert_eq!(get(&s, "maxrate"), Some("2000000"));
        let low = spec(VideoCodec::H264, RateControl::Bitrate(5_000), "fast");
        assert!(nvenc_settings(&low, &cbr, 8).is_err());
    }

    #[test]
    fn gop_is_closed_and_starts_with_idr() {
        let s = nvenc_settings(
            &spec(VideoCodec::H264, RateControl::Crf(23.0), "p4"),
            &HardwareEncode::default(),
            8,
        )
        .unwrap();
        assert_eq!(get(&s, "g"), Some("250"));
        assert_eq!(get(&s, "forced-idr"), Some("1"));
        assert_eq!(get(&s, "no-scenecut"), Some("1"));
        assert_eq!(get(&s, "bf"), Some("3"));
        assert_eq!(get(&s, "tune"), Some("hq"));
        assert_eq!(get(&s, "profile"), Some("high"));
        assert_eq!(get(&s, "rc-lookahead"), None);
    }

    #[test]
    fn aq_options() {
        let sp = spec(VideoCodec::H264, RateControl::Crf(23.0), "slow");
        let hw = HardwareEncode {
            spatial_aq: true,
            temporal_aq: true,
            aq_strength: Some(10),
            ..HardwareEncode::default()
        };
        let s = nvenc_settings(&sp, &hw, 8).unwrap();
        assert_eq!(get(&s, "spatial-aq"), Some("1"));
        assert_eq!(get(&s, "temporal-aq"), Some("1"));
        assert_eq!(get(&s, "aq-strength"), Some("10"));
        assert_eq!(get(&s, "rc-lookahead"), Some("16"));
        let explicit = HardwareEncode {
            lookahead: Some(32),
            ..hw.clone()
        };
        let s = nvenc_settings(&sp, &explicit, 8).unwrap();
        assert_eq!(get(&s, "rc-lookahead"), Some("32"));
        let bad = HardwareEncode {
            aq_strength: Some(16),
            ..hw.clone()
        };
        assert!(nvenc_settings(&sp, &bad, 8).is_err());
        let no_spatial = HardwareEncode {
            spatial_aq: false,
            aq_strength: Some(5),
            ..HardwareEncode::default()
        };
        assert!(nvenc_settings(&sp, &no_spatial, 8)
            .unwrap_err()
            .contains("spatial_aq"));
    }

    #[test]
    fn ten_bit_and_encoder_names() {
        let hw = HardwareEncode::default();
        let hevc = spec(VideoCodec::Hevc, RateControl::Crf(28.0), "medium");
        let s = nvenc_settings(&hevc, &hw, 10).unwrap();
        assert_eq!((s.encoder, s.sw_format), ("hevc_nvenc", "p010le"));
        assert_eq!(get(&s, "profile"), Some("main10"));
        let s = nvenc_settings(&hevc, &hw, 8).unwrap();
        assert_eq!((s.sw_format, get(&s, "profile")), ("nv12", Some("main")));
        let h264 = spec(VideoCodec::H264, RateControl::Crf(23.0), "medium");
        let s = nvenc_settings(&h264, &hw, 10).unwrap();
        assert_eq!((s.encoder, s.sw_format), ("h264_nvenc", "nv12"));
        assert_eq!(nvenc_encoder_name(VideoCodec::Av1), "av1_nvenc");
        assert_eq!(nvenc_sw_format(VideoCodec::Av1, 10), "p010le");
    }
}
