//! The rungs of a package's video ladder: derived from the source (`"auto"`) or taken from
//! the spec, as the renditions the farm encodes.
//!
//! Why derived this way: the public HLS authoring guidance ladders step down by about 1.5x in
//! height with a bit rate per rung; a ladder never goes above the source (upscaling costs bits
//! and shows nothing new) and caps each rung's peak rate so the declared BANDWIDTH holds.

use tessera_model::encode::{RateControl, RenditionSpec, VideoCodec};
use tessera_model::settings::default_preset;

use tessera_model::package::{Ladder, PackageSpec};

/// The source facts a ladder depends on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Source {
    /// Display width in pixels.
    pub width: u32,
    /// Display height in pixels.
    pub height: u32,
    /// Frames per second (0 when unknown).
    pub fps: f64,
}

/// The most rungs an automatic ladder has.
pub const AUTO_RUNGS: usize = 4;

/// H.264 average bit rates (b/s) at 30 fps by the picture's short side, from the public HLS
/// authoring ladder (1080p 6 Mb/s, 720p 3 Mb/s, 540p 2 Mb/s ...).
const TABLE: [(u32, u64); 7] = [
    (2160, 11_600_000),
    (1440, 8_100_000),
    (1080, 6_000_000),
    (720, 3_000_000),
    (540, 2_000_000),
    (360, 730_000),
    (234, 145_000),
];

/// Average bit rate for a picture whose short side is `short`, at 30 fps: the table's value,
/// interpolated by pixel count between its rows (and scaled by pixels outside them).
pub fn bitrate_for(short: u32) -> u64 {
    let s = f64::from(short.max(2));
    let px = |v: u32| f64::from(v) * f64::from(v);
    let (top, bottom) = (TABLE[0], TABLE[TABLE.len() - 1]);
    let rate = if short >= top.0 {
        top.1 as f64 * s * s / px(top.0)
    } else if short <= bottom.0 {
        bottom.1 as f64 * s * s / px(bottom.0)
    } else {
        let i = TABLE
            .iter()
            .position(|&(h, _)| h <= short)
            .unwrap_or(TABLE.len() - 1);
        let (hi, lo) = (TABLE[i - 1], TABLE[i]);
        let t = (s * s - px(lo.0)) / (px(hi.0) - px(lo.0));
        lo.1 as f64 + t * (hi.1 as f64 - lo.1 as f64)
    };
    // Round to whole kb/s so names and figures read cleanly.
    ((rate / 1000.0).round() as u64).max(50) * 1000
}

/// The renditions of a package: rung i is named "v{i}", highest first.
///
/// With a target (the rung's, else the package's: `Rung::target_with`) a rung searches its
/// CRF at its own size: its `crf` (or the codec's default) is the first probe, its `maxrate`
/// the cap. An `"auto"` ladder under a package target searches a CRF on every rung and
/// keeps each rung's peak cap (1.5x its table rate).
pub fn renditions(spec: &PackageSpec, source: Source) -> Vec<RenditionSpec> {
    match &spec.ladder {
        Ladder::Auto(_) => {
            let mut rungs = auto(source);
            if let Some(target) = spec.target {
                for r in &mut rungs {
                    r.rate = RateControl::Crf(tessera_model::settings::default_crf(r.codec));
                    r.target = Some(target.into());
                }
            }
            rungs
        }
        Ladder::Rungs(rungs) => rungs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let codec = r.codec.unwrap_or(VideoCodec::H264);
                RenditionSpec {
                    name: format!("v{i}"),
                    codec,
                    rate: match (r.bitrate, r.crf) {
                        (Some(b), _) => RateControl::Bitrate(b),
                        (None, Some(c)) => RateControl::Crf(c),
                        (None, None) => {
                            RateControl::Crf(tessera_model::settings::default_crf(codec))
                        }
                    },
                    preset: default_preset(codec).to_string(),
                    height: Some(r.height),
                    hdr: Default::default(),
                    maxrate: r.maxrate,
                    profile: r.profile.clone(),
                    target: r.target_with(spec.target).map(Into::into),
                }
            })
            .collect(),
    }
}

/// The automatic ladder: the source's own size first, then the table's sizes below it (none
/// within 15 % of the one above), at most [`AUTO_RUNGS`]; H.264 at the table's rate (x1.3
/// above 30 fps), peak capped at 1.5x.
pub fn auto(source: Source) -> Vec<RenditionSpec> {
    let (w, h) = (source.width.max(2), source.height.max(2));
    let short = w.min(h);
    let mut shorts = vec![short];
    for &(s, _) in TABLE.iter() {
        if shorts.len() == AUTO_RUNGS {
            break;
        }
        let last = *shorts.last().unwrap_or(&short);
        if f64::from(s) <= 0.85 * f64::from(last) {
            shorts.push(s);
        }
    }
    let fast = source.fps > 31.0;
    shorts
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let mut rate = bitrate_for(s);
            if fast {
                rate = rate * 13 / 10;
            }
            // The rung's height: its short side, scaled for portrait pictures.
            let height = if h <= w {
                s
            } else {
                ((f64::from(s) * f64::from(h) / f64::from(w)).round() as u32) & !1
            };
            RenditionSpec {
                name: format!("v{i}"),
                codec: VideoCodec::H264,
                rate: RateControl::Bitrate(rate),
                preset: default_preset(VideoCodec::H264).to_string(),
                height: if i == 0 { None } else { Some(height.max(2)) },
                hdr: Default::default(),
                maxrate: Some(rate * 3 / 2),
                profile: Some("high".into()),
                target: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tessera_model::package::PackageFormat;

    fn heights(r: &[RenditionSpec]) -> Vec<Option<u32>> {
        r.iter().map(|r| r.height).collect()
    }

    #[test]
    fn a_package_target_makes_every_rung_search_under_its_cap() {
        let source = Source {
            width: 1920,
            height: 1080,
            fps: 25.0,
        };
        let mut spec = PackageSpec::new(PackageFormat::Hls);
        spec.target = Some(tessera_model::api::ApiTarget {
            vmaf: 93.0,
            min_crf: None,
            max_crf: Some(32.0),
        });
        let rungs = renditions(&spec, source);
        let plain = auto(source);
        for (r, p) in rungs.iter().zip(&plain) {
            let t = r.target.expect("every auto rung searches");
            assert_eq!((t.vmaf, t.max_rate_factor), (93.0, Some(32.0)));
            assert!(matches!(r.rate, RateControl::Crf(_)), "{r:?}");
            assert_eq!((r.maxrate, r.height), (p.maxrate, p.height));
        }
        spec.ladder = serde_json::from_value(serde_json::json!([
            {"height": 720, "target": {"vmaf": 95}},
            {"height": 360, "bitrate": 700000}]))
        .unwrap();
        let rungs = renditions(&spec, source);
        assert_eq!(rungs[0].target.map(|t| t.vmaf), Some(95.0));
        assert_eq!(rungs[1].target, None);
        assert_eq!(rungs[1].rate, RateControl::Bitrate(700_000));
    }

    #[test]
    fn the_usual_sources() {
        let hd = auto(Source {
            width: 1920,
            height: 1080,
            fps: 25.0,
        });
        assert_eq!(heights(&hd), [None, Some(720), Some(540), Some(360)]);
        assert_eq!(hd[0].rate, RateControl::Bitrate(6_000_000));
        assert_eq!(hd[1].rate, RateControl::Bitrate(3_000_000));
        assert_eq!(hd[3].maxrate, Some(1_095_000));
        let hd60 = auto(Source {
            width: 1920,
            height: 1080,
            fps: 60.0,
        });
        assert_eq!(hd60[0].rate, RateControl::Bitrate(7_800_000));
        let sd = auto(Source {
            width: 640,
            height: 360,
            fps: 30.0,
        });
        assert_eq!(heights(&sd), [None, Some(234)]);
        let odd = auto(Source {
            width: 854,
            height: 480,
            fps: 30.0,
        });
        assert_eq!(heights(&odd), [None, Some(360), Some(234)]);
        let portrait = auto(Source {
            width: 1080,
            height: 1920,
            fps: 30.0,
        });
        assert_eq!(heights(&portrait), [None, Some(1280), Some(960), Some(640)]);
        assert_eq!(
            renditions(
                &PackageSpec::new(PackageFormat::Hls),
                Source {
                    width: 1280,
                    height: 720,
                    fps: 24.0
                }
            )
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
            ["v0", "v1", "v2", "v3"]
        );
    }

    #[test]
    fn interpolation_sits_between_the_rows() {
        assert_eq!(bitrate_for(1080), 6_000_000);
        let r = bitrate_for(900);
        assert!(r > 3_000_000 && r < 6_000_000, "{r}");
        assert_eq!(bitrate_for(4320), 46_400_000);
    }

    proptest! {
        #[test]
        fn never_upscales_and_steps_down(w in 16u32..8000, h in 16u32..8000, fps in 1.0f64..120.0) {
            let rungs = auto(Source { width: w, height: h, fps });
            prop_assert!(!rungs.is_empty() && rungs.len() <= AUTO_RUNGS);
            prop_assert_eq!(rungs[0].height, None);
            let mut last_rate = u64::MAX;
            let mut last_h = u32::MAX;
            for r in &rungs {
                let RateControl::Bitrate(b) = r.rate else { panic!("bitrate rungs") };
                prop_assert!(b <= last_rate);
                prop_assert!(r.maxrate.unwrap() >= b);
                last_rate = b;
                if let Some(rh) = r.height {
                    prop_assert!(rh <= h.max(2), "{} above the source {}", rh, h);
                    prop_assert!(rh < last_h);
                    last_h = rh;
                }
            }
        }
    }
}
