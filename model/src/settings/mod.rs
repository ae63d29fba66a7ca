//! Encoder settings: codec names, options, output pixel format and size. Pure functions.
//!
//! Why: every segment of a job must be encoded with identical settings, so they are computed
//! in one place from the rendition spec alone, and unit-tested without FFmpeg.

pub mod hdr;
mod target;

pub use target::{check_target, scene_band_half, target_bounds, target_search, MAX_PROBES};

use crate::encode::{RateControl, RenditionSpec, VideoCodec};

/// FFmpeg encoder name for a codec.
pub fn encoder_name(codec: VideoCodec) -> &'static str {
    match codec {
        VideoCodec::H264 => "libx264",
        VideoCodec::Hevc => "libx265",
        VideoCodec::Av1 => "libsvtav1",
    }
}

/// The default CRF of each codec (x264's and x265's own defaults; SVT-AV1's common choice).
pub fn default_crf(codec: VideoCodec) -> f32 {
    match codec {
        VideoCodec::H264 => 23.0,
        VideoCodec::Hevc => 28.0,
        VideoCodec::Av1 => 35.0,
    }
}

/// The default preset name of each codec.
pub fn default_preset(codec: VideoCodec) -> &'static str {
    match codec {
        VideoCodec::H264 | VideoCodec::Hevc => "medium",
        VideoCodec::Av1 => "8",
    }
}

/// The x264/x265 preset names, fastest first (also accepted for SVT-AV1 and NVENC, mapped
/// onto their scales); public so the API's schema lists what the server accepts.
pub const X26X_PRESETS: [&str; 10] = [
    "ultrafast",
    "superfast",
    "veryfast",
    "faster",
    "fast",
    "medium",
    "slow",
    "slower",
    "veryslow",
    "placebo",
];

/// Checks a preset name for a codec; returns the value to hand the encoder.
pub fn resolve_preset(codec: VideoCodec, preset: &str) -> Result<String, String> {
    match codec {
        VideoCodec::H264 | VideoCodec::Hevc => {
            if X26X_PRESETS.contains(&preset) {
                Ok(preset.to_string())
            } else {
                Err(format!(
                    "preset '{preset}' is not one of {}",
                    X26X_PRESETS.join(", ")
                ))
            }
        }
        VideoCodec::Av1 => {
            if let Ok(n) = preset.parse::<u8>() {
                return if n <= 13 {
                    Ok(n.to_string())
                } else {
                    Err(format!("SVT-AV1 preset {n} is outside 0..=13"))
                };
            }
            // x26x names map onto SVT-AV1's speed scale, so one CLI flag works for all codecs.
            let idx = X26X_PRESETS
                .iter()
                .position(|p| *p == preset)
                .ok_or_else(|| format!("preset '{preset}' is neither 0..=13 nor an x264 name"))?;
            Ok((12 - idx.min(9) as u8).max(2).to_string())
        }
    }
}

/// The lowest bit rate (bits/s) an output may ask for.
pub const MIN_BITRATE: u64 = 10_000;
/// The highest bit rate (bits/s) an output may ask for: 1 Gb/s, above every H.264/HEVC/AV1
/// level a player decodes. Why a ceiling: a larger number (say 1e18) reaches the encoder's
/// signed 64-bit rate fields and its VBV arithmetic, where it overflows or is refused late.
pub const MAX_BITRATE: u64 = 1_000_000_000;

/// The highest CRF of a codec: 51 for H.264/HEVC, 63 for AV1.
pub fn max_crf(codec: VideoCodec) -> f32 {
    if codec == VideoCodec::Av1 {
        63.0
    } else {
        51.0
    }
}

/// Checks a rate control against the codec's range: CRF 0..=[`max_crf`], bit rate
/// [`MIN_BITRATE`]..=[`MAX_BITRATE`]. Why apart from [`encoder_options`]: the API checks the
/// rate of NVENC outputs too, whose options are built elsewhere.
pub fn check_rate(codec: VideoCodec, rate: RateControl) -> Result<(), String> {
    match rate {
        RateControl::Crf(crf) => {
            let max = max_crf(codec);
            if !(0.0..=max).contains(&crf) {
                return Err(format!("crf {crf} is outside 0..={max}"));
            }
        }
        RateControl::Bitrate(bps) => {
            if bps < MIN_BITRATE {
                return Err(format!("bitrate {bps} b/s is too low (minimum 10k)"));
            }
            if bps > MAX_BITRATE {
                return Err(format!(
                    "bitrate {bps} b/s is too high (maximum {MAX_BITRATE})"
                ));
            }
        }
    }
    Ok(())
}

/// Checks a peak-rate cap (`maxrate`, the API's `max_bitrate`) against the bit-rate range;
/// shared by the software and NVENC option builders and the API.
pub fn check_maxrate(cap: u64) -> Result<(), String> {
    if !(MIN_BITRATE..=MAX_BITRATE).contains(&cap) {
        return Err(format!(
            "maxrate {cap} b/s is outside {MIN_BITRATE}..={MAX_BITRATE}"
        ));
    }
    Ok(())
}

/// Encoder options (passed to avcodec_open2) for a rendition.
///
/// Closed GOPs and an IDR first frame are what x264 does by default; x265 defaults to open GOPs,
/// so it is told otherwise; SVT-AV1 defaults to closed (key-frame) refresh.
pub fn encoder_options(
    spec: &RenditionSpec,
    threads: usize,
) -> Result<Vec<(String, String)>, String> {
    let threads = threads.max(1);
    let mut opts = vec![(
        "preset".to_string(),
        resolve_preset(spec.codec, &spec.preset)?,
    )];
    check_rate(spec.codec, spec.rate)?;
    check_target(spec)?;
    match spec.rate {
        RateControl::Crf(crf) => {
            let value = if spec.codec == VideoCodec::Av1 {
                format!("{}", crf.round() as u32)
            } else {
                format!("{crf}")
            };
            opts.push(("crf".into(), value));
        }
        RateControl::Bitrate(bps) => {
            opts.push(("b".into(), bps.to_string()));
            opts.push(("maxrate".into(), (bps.saturating_mul(3) / 2).to_string()));
            opts.push(("bufsize".into(), bps.saturating_mul(2).to_string()));
        }
    }
    if let Some(cap) = spec.maxrate {
        check_maxrate(cap)?;
        opts.retain(|(k, _)| k != "maxrate" && k != "bufsize");
        opts.push(("maxrate".into(), cap.to_string()));
        opts.push(("bufsize".into(), cap.saturating_mul(2).to_string()));
    }
    if let Some(profile) = &spec.profile {
        opts.push(("profile".into(), profile.clone()));
    }
    // A frame the caller marks I (a streaming package's segment boundary) becomes an IDR.
    if matches!(spec.codec, VideoCodec::H264 | VideoCodec::Hevc) {
        opts.push(("forced-idr".into(), "1".into()));
    }
    // A target's segments are encoded at different CRFs, and the stitch needs their headers
    // equal: x264 would fit each one's picture parameter set (its initial QP) to its CRF,
    // x265 writes its settings (the CRF among them) in an SEI of its headers.
    let targeted = spec.target.is_some();
    if spec.codec == VideoCodec::H264 && targeted {
        opts.push(("x264-params".into(), "stitchable=1".into()));
    }
    match spec.codec {
        VideoCodec::H264 => opts.push(("threads".into(), threads.to_string())),
        VideoCodec::Hevc => opts.push((
            "x265-params".into(),
            format!(
                "open-gop=0:log-level=error:pools={threads}:frame-threads={}{}",
                threads.min(4),
                if targeted { ":info=0" } else { "" }
            ),
        )),
        VideoCodec::Av1 => opts.push(("svtav1-params".into(), format!("lp={threads}"))),
    }
    Ok(opts)
}

/// Output pixel format: 8-bit 4:2:0 for H.264 (plays everywhere); 10-bit 4:2:0 for HEVC/AV1
/// when the source has more than 8 bits, so HDR and 10-bit masters keep their depth.
pub fn output_pix_fmt(codec: VideoCodec, source_depth: u8) -> &'static str {
    match codec {
        VideoCodec::H264 => "yuv420p",
        VideoCodec::Hevc | VideoCodec::Av1 if source_depth > 8 => "yuv420p10le",
        _ => "yuv420p",
    }
}

/// Output frame size: the source size, or `height` keeping the aspect ratio; both even, since
/// 4:2:0 needs even dimensions (an odd source loses its last row/column to scaling).
pub fn output_size(width: u32, height: u32, target_height: Option<u32>) -> (u32, u32) {
    let even = |v: u32| (v & !1).max(2);
    match target_height {
        Some(h) if h > 0 && height > 0 => {
            let w = (f64::from(width) * f64::from(h) / f64::from(height)).round() as u32;
            (even(w), even(h))
        }
        _ => (even(width), even(height)),
    }
}

/// A rendition named "r" at the source size, for unit tests of encoder settings.
#[cfg(test)]
pub(crate) fn spec(codec: VideoCodec, rate: RateControl, preset: &str) -> RenditionSpec {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_even_and_keep_aspect() {
        assert_eq!(output_size(1920, 1080, None), (1920, 1080));
        assert_eq!(output_size(321, 241, None), (320, 240));
        assert_eq!(output_size(1920, 1080, Some(720)), (1280, 720));
        assert_eq!(output_size(1080, 1920, Some(480)), (270 & !1, 480));
        assert_eq!(output_size(1, 1, None), (2, 2));
    }

    #[test]
    fn options_per_codec() {
        let o = encoder_options(
            &spec(VideoCodec::H264, RateControl::Crf(23.0), "veryfast"),
            2,
        )
        .unwrap();
        assert!(o.contains(&("crf".into(), "23".into())));
        assert!(o.contains(&("threads".into(), "2".into())));
        let o = encoder_options(
            &spec(VideoCodec::Hevc, RateControl::Bitrate(2_000_000), "fast"),
            1,
        )
        .unwrap();
        assert!(o.contains(&("maxrate".into(), "3000000".into())));
        assert!(o
            .iter()
            .any(|(k, v)| k == "x265-params" && v.contains("open-gop=0")));
        let o = encoder_options(
            &spec(VideoCodec::Av1, RateControl::Crf(35.0), "veryfast"),
            1,
        )
        .unwrap();
        assert!(o.contains(&("preset".into(), "10".into())));
        assert!(
            encoder_options(&spec(VideoCodec::H264, RateControl::Crf(60.0), "fast"), 1).is_err()
        );
        assert!(
            encoder_options(&spec(VideoCodec::H264, RateControl::Crf(20.0), "warp"), 1).is_err()
        );
        assert!(resolve_preset(VideoCodec::Av1, "14").is_err());
    }

    #[test]
    fn a_cap_and_a_profile_reach_the_encoder() {
        let capped = RenditionSpec {
            maxrate: Some(1_100_000),
            profile: Some("main".into()),
            ..spec(VideoCodec::H264, RateControl::Crf(21.0), "fast")
        };
        let o = encoder_options(&capped, 1).unwrap();
        for want in [
            ("maxrate", "1100000"),
            ("bufsize", "2200000"),
            ("profile", "main"),
            ("forced-idr", "1"),
            ("crf", "21"),
        ] {
            assert!(
                o.contains(&(want.0.into(), want.1.into())),
                "{want:?} in {o:?}"
            );
        }
        let rate = RenditionSpec {
            maxrate: Some(2_200_000),
            ..spec(VideoCodec::Hevc, RateControl::Bitrate(2_000_000), "fast")
        };
        let o = encoder_options(&rate, 1).unwrap();
        assert_eq!(o.iter().filter(|(k, _)| k == "maxrate").count(), 1);
        assert!(o.contains(&("maxrate".into(), "2200000".into())));
        let low = RenditionSpec {
            maxrate: Some(5),
            ..rate
        };
        assert!(encoder_options(&low, 1).unwrap_err().contains("maxrate 5"));
    }

    #[test]
    fn pixel_formats() {
        assert_eq!(output_pix_fmt(VideoCodec::H264, 10), "yuv420p");
        assert_eq!(output_pix_fmt(VideoCodec::Hevc, 10), "yuv420p10le");
        assert_eq!(output_pix_fmt(VideoCodec::Av1, 8), "yuv420p");
    }
}
