//! HDR: what an HDR source's static metadata is, whether a rendition keeps HDR or is
//! tone-mapped to SDR, and how each encoder is told.
//!
//! Why one place: the probe reads the metadata, the encoder settings write it, the software
//! encode builds the tone-mapping filter; the rules that join them (which transfers are HDR,
//! what `auto` means) must agree.

use serde::{Deserialize, Serialize};

use crate::types::{ColorInfo, VideoCodec};

/// A rendition's HDR handling (job setting `hdr`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HdrMode {
    /// Keep HDR where the codec carries it at 10 bits (HEVC, AV1); tone-map to SDR for H.264,
    /// whose 8-bit output would otherwise band or, on SDR screens, look washed out.
    #[default]
    Auto,
    /// Keep the transfer, primaries and static metadata whatever the codec.
    Keep,
    /// Tone-map to BT.709 SDR, 8 bits.
    Tonemap,
}

/// Mastering display colour volume (SMPTE ST 2086) in the units HEVC's SEI uses: chromaticity
/// in 1/50000, luminance in 1/10000 cd/m².
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasteringDisplay {
    /// Green, blue and red primaries (x, y), in that order (x265's G B R).
    pub primaries: [[u32; 2]; 3],
    /// White point (x, y).
    pub white: [u32; 2],
    /// Largest luminance.
    pub max_luminance: u32,
    /// Smallest luminance.
    pub min_luminance: u32,
}

/// HDR10 static metadata of a source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HdrMetadata {
    /// The mastering display, if stated.
    pub mastering: Option<MasteringDisplay>,
    /// Content light level (MaxCLL, MaxFALL) in cd/m², if stated.
    pub light_level: Option<(u32, u32)>,
}

/// Whether a transfer (FFmpeg name) is HDR: PQ (HDR10) or HLG.
pub fn is_hdr_transfer(transfer: Option<&str>) -> bool {
    matches!(transfer, Some("smpte2084" | "arib-std-b67"))
}

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

/// Reads a source's HDR10 static metadata: the container's stream side data, else the first
/// decoded frame's (HEVC SEI, AV1 metadata OBUs), as most files carry it only in-band.
pub(crate) fn read_metadata(
    path: &std::path::Path,
    video_index: usize,
) -> Result<HdrMetadata, crate::MediaError> {
    use crate::demux::{open_input, open_video_decoder, read_packet};
    /// Packets fed before giving up on a first frame (a long reorder delay or broken start).
    const MAX_PACKETS: usize = 64;
    let mut ictx = open_input(path)?;
    let stream = ictx
        .stream(video_index)
        .ok_or_else(|| crate::MediaError::invalid(path, "video stream vanished"))?;
    let from_stream = crate::ffi::hdr_metadata(Some(&stream), None);
    if from_stream.mastering.is_some() && from_stream.light_level.is_some() {
        return Ok(from_stream);
    }
    let mut decoder = open_video_decoder(&stream, path, 1)?;
    let mut frame = ffmpeg_next::frame::Video::empty();
    let mut fed = 0;
    while let Some(packet) = read_packet(&mut ictx, path)? {
        if packet.stream() != video_index {
            continue;
        }
        let _ = decoder.send_packet(&packet);
        if decoder.receive_frame(&mut frame).is_ok() {
            let from_frame = crate::ffi::hdr_metadata(None, Some(&frame));
            return Ok(HdrMetadata {
                mastering: from_frame.mastering.or(from_stream.mastering),
                light_level: from_frame.light_level.or(from_stream.light_level),
            });
        }
        fed += 1;
        if fed >= MAX_PACKETS {
            break;
        }
    }
    Ok(from_stream)
}

#[cfg(test)]
mod tests {
    use super::*;

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
