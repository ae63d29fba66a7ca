//! Target quality per codec: the rate factors a segment's search may use, their grid, and how
//! fast VMAF falls along them.
//!
//! Why here: codec knowledge lives in `settings`, beside the CRF ranges and presets it rests
//! on; the search itself (`crate::target`) knows no codec.

use crate::encode::{RateControl, RenditionSpec, TargetQuality, VideoCodec};
use crate::target::Search;

use super::max_crf;

/// Probes a segment's search may run (the last one's file is kept if none landed).
pub const MAX_PROBES: usize = 4;

/// The default rate-factor bounds of a target-quality search: wide enough for a still slide
/// and for grain, narrow enough that no segment is starved or flooded.
pub fn target_bounds(codec: VideoCodec) -> (f64, f64) {
    match codec {
        VideoCodec::H264 => (16.0, 40.0),
        VideoCodec::Hevc => (18.0, 42.0),
        VideoCodec::Av1 => (20.0, 55.0),
    }
}

/// The search of a rendition with a target: bounds (the target's or the codec's), the
/// rate-factor grid (x264 and x265 take fractional CRFs; SVT-AV1, and NVENC's cq on a card
/// (`gpu`), whole ones) and the typical VMAF lost per unit near common targets (measured on
/// the bench's sources).
///
/// A bound given alone moves the other default out of its way: `min` 45 alone searches
/// 45..=45 rather than refusing a range the user never wrote.
pub fn target_search(spec: &RenditionSpec, target: &TargetQuality, gpu: bool) -> Search {
    let (lo, hi) = target_bounds(spec.codec);
    let (step, slope) = match spec.codec {
        VideoCodec::H264 | VideoCodec::Hevc if !gpu => (0.5, 1.2),
        VideoCodec::H264 | VideoCodec::Hevc => (1.0, 1.2),
        VideoCodec::Av1 => (1.0, 0.6),
    };
    let (min, max) = (target.min_rate_factor, target.max_rate_factor);
    Search {
        target: target.vmaf,
        min_rate_factor: min.unwrap_or_else(|| max.map_or(lo, |m| m.min(lo))),
        max_rate_factor: max.unwrap_or_else(|| min.map_or(hi, |m| m.max(hi))),
        step,
        slope,
        max_probes: MAX_PROBES,
        fine_step: match spec.codec {
            VideoCodec::H264 | VideoCodec::Hevc if !gpu => 0.1,
            _ => step,
        },
    }
}

/// Half the band a follower's search keeps around the rate factor its scene's first segment
/// kept (`target::scenes`): neighbours of one scene then differ by at most twice this. About
/// 1.5 CRF units of x264 and x265 (a bitrate step of about 20 %, 1 to 2 VMAF on most
/// pictures), the same on NVENC's whole cq grid rounded up, and twice that on SVT-AV1's
/// coarser scale (0.6 VMAF per unit against x264's 1.2).
pub fn scene_band_half(codec: VideoCodec, gpu: bool) -> f64 {
    match codec {
        VideoCodec::H264 | VideoCodec::Hevc if !gpu => 1.5,
        VideoCodec::H264 | VideoCodec::Hevc => 2.0,
        VideoCodec::Av1 => 3.0,
    }
}

/// Checks a rendition's target: a VMAF in 1..=100, bounds in the codec's CRF range and in
/// order, and a CRF rate (the first probe's).
pub fn check_target(spec: &RenditionSpec) -> Result<(), String> {
    let Some(t) = spec.target else {
        return Ok(());
    };
    if !(1.0..=100.0).contains(&t.vmaf) {
        return Err(format!("target VMAF {} is outside 1..=100", t.vmaf));
    }
    if !matches!(spec.rate, RateControl::Crf(_)) {
        return Err("a target VMAF searches the CRF: give no bitrate with it".into());
    }
    let max = f64::from(max_crf(spec.codec));
    let s = target_search(spec, &t, false);
    for (name, v) in [("min", s.min_rate_factor), ("max", s.max_rate_factor)] {
        if !(0.0..=max).contains(&v) {
            return Err(format!("{name} rate factor {v} is outside 0..={max}"));
        }
    }
    if s.min_rate_factor > s.max_rate_factor {
        return Err(format!(
            "min rate factor {} is above max rate factor {}",
            s.min_rate_factor, s.max_rate_factor
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{check_target, target_search};
    use crate::encode::{RateControl, TargetQuality, VideoCodec};
    use crate::settings::{encoder_options, spec};

    fn targeted(codec: VideoCodec, vmaf: f64) -> crate::encode::RenditionSpec {
        crate::encode::RenditionSpec {
            target: Some(TargetQuality {
                vmaf,
                min_rate_factor: None,
                max_rate_factor: None,
            }),
            ..spec(codec, RateControl::Crf(23.0), "veryfast")
        }
    }

    #[test]
    fn targets_search_the_codecs_range_and_stitch() {
        let h264 = targeted(VideoCodec::H264, 93.0);
        let s = target_search(&h264, &h264.target.unwrap(), false);
        assert_eq!(
            (s.min_rate_factor, s.max_rate_factor, s.step),
            (16.0, 40.0, 0.5)
        );
        let o = encoder_options(&h264, 1).unwrap();
        assert!(
            o.contains(&("x264-params".into(), "stitchable=1".into())),
            "{o:?}"
        );
        let plain = encoder_options(&spec(VideoCodec::H264, RateControl::Crf(23.0), "fast"), 1);
        assert!(!plain.unwrap().iter().any(|(k, _)| k == "x264-params"));
        let hevc = encoder_options(&targeted(VideoCodec::Hevc, 93.0), 1).unwrap();
        assert!(hevc
            .iter()
            .any(|(k, v)| k == "x265-params" && v.ends_with(":info=0")));
        let av1 = targeted(VideoCodec::Av1, 93.0);
        assert_eq!(target_search(&av1, &av1.target.unwrap(), false).step, 1.0);
        // NVENC's cq is whole: a half step would probe the same encode twice.
        assert_eq!(target_search(&h264, &h264.target.unwrap(), true).step, 1.0);
    }

    #[test]
    fn bad_targets_are_named() {
        let mut t = targeted(VideoCodec::H264, 0.5);
        assert!(check_target(&t).unwrap_err().contains("target VMAF 0.5"));
        t = targeted(VideoCodec::H264, 93.0);
        t.rate = RateControl::Bitrate(1_000_000);
        assert!(check_target(&t).unwrap_err().contains("bitrate"));
        t = targeted(VideoCodec::H264, 93.0);
        t.target.as_mut().unwrap().min_rate_factor = Some(45.0);
        t.target.as_mut().unwrap().max_rate_factor = Some(44.0);
        assert!(check_target(&t).unwrap_err().contains("min rate factor 45"));
        t.target.as_mut().unwrap().min_rate_factor = Some(-1.0);
        assert!(check_target(&t).unwrap_err().contains("outside 0..=51"));
        assert!(check_target(&targeted(VideoCodec::Hevc, 95.0)).is_ok());
    }

    #[test]
    fn a_bound_given_alone_moves_the_other_default_aside() {
        let mut t = targeted(VideoCodec::H264, 93.0);
        let bounds = |t: &crate::encode::RenditionSpec| {
            let s = target_search(t, &t.target.unwrap(), false);
            (s.min_rate_factor, s.max_rate_factor)
        };
        t.target.as_mut().unwrap().min_rate_factor = Some(45.0);
        assert_eq!(bounds(&t), (45.0, 45.0));
        t.target.as_mut().unwrap().min_rate_factor = Some(20.0);
        assert_eq!(bounds(&t), (20.0, 40.0));
        t.target.as_mut().unwrap().min_rate_factor = None;
        t.target.as_mut().unwrap().max_rate_factor = Some(0.0);
        assert_eq!(bounds(&t), (0.0, 0.0));
        assert!(check_target(&t).is_ok());
        t.target.as_mut().unwrap().max_rate_factor = Some(30.0);
        assert_eq!(bounds(&t), (16.0, 30.0));
    }
}
