//! The HDR rules of an encode: whether a rendition is tone-mapped to SDR, the tone-mapping
//! filter chain, and how each software encoder is told the source's HDR10 metadata.
//!
//! Why with the encoder settings: like them, they are computed from the rendition spec and
//! the probed colour alone, so every segment of a job gets the same answer.

use crate::encode::VideoCodec;
use crate::hdr::{is_hdr_transfer, HdrMetadata, HdrMode};
use crate::probe::ColorInfo;

/// Whether a rendition of `codec` from a source with `color` is tone-mapped to SDR.
pub fn tonemaps(mode: HdrMode, codec: VideoCodec, color: &ColorInfo) -> bool {
    if !is_hdr_transfer(color.transfer.as_deref()) {
        return false;
    }
    match mode {
        HdrMode::Auto => codec == VideoCodec::H264,
        HdrMode::Keep => false,
        HdrMode::Tonemap => true,
    }
}

/// The colour tags of a tone-mapped output: BT.709, limited range, no HDR metadata.
pub fn sdr_color() -> ColorInfo {
    ColorInfo {
        primaries: Some("bt709".into()),
        transfer: Some("bt709".into()),
        matrix: Some("bt709".into()),
        range: Some("tv".into()),
        hdr: None,
    }
}

/// The filter chain that tone-maps `color` to 8-bit BT.709 at `width`x`height`: to linear
/// light (100 cd/m² nominal peak), BT.709 primaries, Hable's curve without desaturation, back
/// to BT.709 gamma in limited range. The source's tags are stated, not guessed from frames.
pub fn tonemap_filter(color: &ColorInfo, width: u32, height: u32) -> String {
    let tin = color.transfer.as_deref().unwrap_or("smpte2084");
    let pin = color.primaries.as_deref().unwrap_or("bt2020");
    let min = match color.matrix.as_deref() {
        Some("bt2020nc") | None => "2020_ncl",
        Some("bt2020c") => "2020_cl",
        Some(_) => "709",
    };
    let rin = if color.range.as_deref() == Some("pc") {
        "full"
    } else {
        "limited"
    };
    let tin = if tin == "arib-std-b67" {
        "arib-std-b67"
    } else {
        "smpte2084"
    };
    let pin = if pin == "bt2020" { "2020" } else { "709" };
    format!(
        "zscale=w={width}:h={height}:tin={tin}:pin={pin}:min={min}:rin={rin}:t=linear:npl=100,\
         format=gbrpf32le,zscale=p=709,tonemap=tonemap=hable:desat=0,\
         zscale=t=709:m=709:r=limited,format=yuv420p"
    )
}

/// The x265 parameters that write the HDR10 SEI (mastering display, content light level).
pub fn x265_params(hdr: &HdrMetadata) -> Option<String> {
    let mut p = Vec::new();
    if let Some(m) = &hdr.mastering {
        let [g, b, r] = m.primaries;
        p.push(format!(
            "master-display=G({},{})B({},{})R({},{})WP({},{})L({},{})",
            g[0],
            g[1],
            b[0],
            b[1],
            r[0],
            r[1],
            m.white[0],
            m.white[1],
            m.max_luminance,
            m.min_luminance
        ));
    }
    if let Some((cll, fall)) = hdr.light_level {
        p.push(format!("max-cll={cll},{fall}"));
    }
    (!p.is_empty()).then(|| format!("hdr10=1:{}", p.join(":")))
}

/// The SVT-AV1 parameters that write the same metadata (values as decimals).
pub fn svtav1_params(hdr: &HdrMetadata) -> Option<String> {
    let mut p = Vec::new();
    if let Some(m) = &hdr.mastering {
        let c = |v: u32| f64::from(v) / 50000.0;
        let l = |v: u32| f64::from(v) / 10000.0;
        let [g, b, r] = m.primaries;
        p.push(format!(
            "mastering-display=G({:.4},{:.4})B({:.4},{:.4})R({:.4},{:.4})WP({:.4},{:.4})L({:.4},{:.4})",
            c(g[0]), c(g[1]), c(b[0]), c(b[1]), c(r[0]), c(r[1]), c(m.white[0]), c(m.white[1]),
            l(m.max_luminance), l(m.min_luminance)
        ));
    }
    if let Some((cll, fall)) = hdr.light_level {
        p.push(format!("content-light={cll},{fall}"));
    }
    (!p.is_empty()).then(|| format!("enable-hdr=1:{}", p.join(":")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hdr::MasteringDisplay;

    fn hdr10() -> ColorInfo {
        ColorInfo {
            primaries: Some("bt2020".into()),
            transfer: Some("smpte2084".into()),
            matrix: Some("bt2020nc".into()),
            range: Some("tv".into()),
            hdr: Some(HdrMetadata {
                mastering: Some(MasteringDisplay {
                    primaries: [[13250, 34500], [7500, 3000], [34000, 16000]],
                    white: [15635, 16450],
                    max_luminance: 10_000_000,
                    min_luminance: 1,
                }),
                light_level: Some((1000, 400)),
            }),
        }
    }

    #[test]
    fn auto_tonemaps_only_hdr_into_h264() {
        let hdr = hdr10();
        assert!(tonemaps(HdrMode::Auto, VideoCodec::H264, &hdr));
        assert!(!tonemaps(HdrMode::Auto, VideoCodec::Hevc, &hdr));
        assert!(!tonemaps(HdrMode::Auto, VideoCodec::Av1, &hdr));
        assert!(!tonemaps(HdrMode::Keep, VideoCodec::H264, &hdr));
        assert!(tonemaps(HdrMode::Tonemap, VideoCodec::Hevc, &hdr));
        let hlg = ColorInfo {
            transfer: Some("arib-std-b67".into()),
            ..ColorInfo::default()
        };
        assert!(tonemaps(HdrMode::Auto, VideoCodec::H264, &hlg));
        // SDR sources are never tone-mapped, whatever the setting.
        let sdr = sdr_color();
        assert!(!tonemaps(HdrMode::Tonemap, VideoCodec::H264, &sdr));
    }

    #[test]
    fn encoders_get_the_metadata_in_their_units() {
        let meta = hdr10().hdr.unwrap();
        assert_eq!(
            x265_params(&meta).unwrap(),
            "hdr10=1:master-display=G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)\
             L(10000000,1):max-cll=1000,400"
        );
        let svt = svtav1_params(&meta).unwrap();
        assert!(
            svt.starts_with("enable-hdr=1:mastering-display=G(0.2650,0.6900)"),
            "{svt}"
        );
        assert!(svt.contains("L(1000.0000,0.0001)") && svt.ends_with("content-light=1000,400"));
        assert_eq!(x265_params(&HdrMetadata::default()), None);
    }

    #[test]
    fn the_tonemap_chain_states_the_source() {
        let f = tonemap_filter(&hdr10(), 1280, 720);
        assert!(
            f.starts_with("zscale=w=1280:h=720:tin=smpte2084:pin=2020:min=2020_ncl:rin=limited")
        );
        assert!(f.contains("tonemap=tonemap=hable") && f.ends_with("format=yuv420p"));
    }
}
