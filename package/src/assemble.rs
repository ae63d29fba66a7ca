//! From the files the segmenter wrote to a checked package: the tracks measured from the
//! files themselves, the manifests written over them, and the validator run on the result.
//!
//! Why measured from the files: the manifests must describe exactly what a player fetches;
//! the fMP4 boxes give exact integer times (the DASH timeline), the sizes give the peak
//! bandwidth, and the init segment gives the codec string a player checks support with.

use std::path::Path;

use tessera_model::segmented::SegmentedTrack;

use crate::model::{MediaSegment, Package, Track, TrackKind};
use crate::{bmff, dash, hls, validate};

/// Ticks per second of MPEG-TS timestamps (the timescale of TS tracks).
pub const TS_TIMESCALE: u32 = 90_000;

/// The RFC 6381 sample entry name of an FFmpeg codec name, as a package writes it.
fn sample_entry(codec: &str) -> Option<&'static str> {
    Some(match codec {
        "h264" => "avc1",
        "hevc" => "hvc1",
        "av1" => "av01",
        "aac" => "mp4a",
        _ => return None,
    })
}

/// Builds the track `id` from what the segmenter wrote (`read` gives a file's bytes by its
/// root-relative path). fMP4 tracks take times and the codec string from their boxes; TS
/// tracks take times from the muxer's durations and the codec string from the codec
/// configuration.
pub fn track(
    id: &str,
    written: &SegmentedTrack,
    read: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<Track, String> {
    let missing = |uri: &str| format!("{uri}: written by the segmenter but unreadable");
    let (timescale, codec, segments) = match &written.init {
        Some(init) => {
            let bytes = read(init).ok_or_else(|| missing(init))?;
            let info = bmff::init_info(&bytes).map_err(|e| format!("{init}: {e}"))?;
            let codec = info.codec.clone().ok_or_else(|| {
                format!("{init}: no codec string for sample entry {}", info.fourcc)
            })?;
            let mut segments = Vec::with_capacity(written.segments.len());
            for (uri, _) in &written.segments {
                let bytes = read(uri).ok_or_else(|| missing(uri))?;
                let s = bmff::segment_info(&bytes).map_err(|e| format!("{uri}: {e}"))?;
                segments.push(MediaSegment {
                    uri: uri.clone(),
                    start: s.base_media_decode_time,
                    duration: s.duration,
                    bytes: bytes.len() as u64,
                    key_frame_bytes: s.first_sample_end,
                });
            }
            (info.timescale, codec, segments)
        }
        None => {
            let entry = sample_entry(&written.codec)
                .ok_or_else(|| format!("{id}: codec {} cannot go in a package", written.codec))?;
            let codec = bmff::codec_string(entry, &written.config).ok_or_else(|| {
                format!(
                    "{id}: no codec string from the {} configuration",
                    written.codec
                )
            })?;
            let mut segments = Vec::with_capacity(written.segments.len());
            let mut at = 0u64;
            let mut elapsed = 0.0f64;
            for (uri, seconds) in &written.segments {
                let bytes = read(uri).ok_or_else(|| missing(uri))?;
                // Ends computed from the running sum, so rounding never accumulates.
                elapsed += seconds;
                let end = (elapsed * f64::from(TS_TIMESCALE)).round() as u64;
                segments.push(MediaSegment {
                    uri: uri.clone(),
                    start: at,
                    duration: end.saturating_sub(at),
                    bytes: bytes.len() as u64,
                    key_frame_bytes: None,
                });
                at = end;
            }
            (TS_TIMESCALE, codec, segments)
        }
    };
    let kind = if written.size.0 > 0 {
        TrackKind::Video {
            width: written.size.0,
            height: written.size.1,
            frame_rate: written.frame_rate,
        }
    } else {
        TrackKind::Audio {
            language: written.language.clone(),
            channels: written.audio.0,
            sample_rate: written.audio.1,
        }
    };
    Ok(Track {
        id: id.to_string(),
        kind,
        codec,
        init: written.init.clone(),
        playlist: format!("{id}/playlist.m3u8"),
        timescale,
        segments,
    })
}

/// How far (relative) a source's average frame rate may be from its nominal one for the
/// source to count as constant-rate: a container's average over a few seconds is off by a
/// frame's share (1/180 for 6 s at 30 fps) where it is computed from the time stamps' span.
const CONSTANT_RATE_TOLERANCE: f64 = 0.01;

/// The frame rate a package states for a video rendition (HLS FRAME-RATE, DASH frameRate):
/// the source's nominal rate `nominal` (its `r_frame_rate`) when the source is constant-rate,
/// that is when its average `average` (or, unknown, the rendition's `measured` average) is
/// within 1 % of it; else the rendition's `measured` average. Rates are (num, den); a zero
/// numerator or denominator is unknown.
///
/// Why not the measured average alone: a stitched rendition's average is frames over its
/// duration as the muxer counts it, which misses or adds part of a frame (30.003 for a
/// 30/1 source), and players and ladder tools compare the stated rate with the nominal one.
pub fn frame_rate(nominal: (u32, u32), average: (u32, u32), measured: (u32, u32)) -> (u32, u32) {
    let rate =
        |(num, den): (u32, u32)| (num > 0 && den > 0).then(|| f64::from(num) / f64::from(den));
    let Some(nominal_fps) = rate(nominal) else {
        return measured;
    };
    let Some(average_fps) = rate(average).or(rate(measured)) else {
        return nominal;
    };
    if (average_fps - nominal_fps).abs() <= CONSTANT_RATE_TOLERANCE * nominal_fps {
        nominal
    } else {
        measured
    }
}

/// Writes the manifests of `pkg` under `root`; returns their root-relative paths in the
/// order they must be published: media playlists first, the master playlist and the MPD
/// last, so a player never finds a manifest naming a file not yet there.
pub fn write_manifests(pkg: &Package, root: &Path) -> std::io::Result<Vec<String>> {
    let mut written = Vec::new();
    let mut put = |rel: &str, text: String| -> std::io::Result<()> {
        let path = root.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, text)?;
        written.push(rel.to_string());
        Ok(())
    };
    if let Some(master) = &pkg.hls_master {
        let mut iframes = Vec::new();
        for (i, t) in pkg.tracks.iter().enumerate() {
            put(&t.playlist, hls::media_playlist(t, pkg.ts))?;
            if let Some(text) = hls::iframe_playlist(t, pkg.ts) {
                let rel = format!("{}/iframes.m3u8", hls::dir_of(&t.playlist));
                let rel = rel.trim_start_matches('/').to_string();
                put(&rel, text)?;
                iframes.push((i, rel));
            }
        }
        put(master, hls::master_playlist(pkg, &iframes))?;
    }
    if let Some(mpd) = &pkg.dash_manifest {
        put(mpd, dash::mpd(pkg))?;
    }
    Ok(written)
}

/// Every problem a strict client would find in the package written under `root` (empty when
/// it is valid): the HLS rules of RFC 8216 and the DASH manifest's structure and timeline.
pub fn check(pkg: &Package, root: &Path) -> Vec<String> {
    let read = |rel: &str| -> Option<Vec<u8>> {
        // Never outside the root: a manifest naming "../x" is a problem, not a read.
        if rel.split('/').any(|p| p == "..") || rel.starts_with('/') {
            return None;
        }
        std::fs::read(root.join(rel)).ok()
    };
    let mut problems = Vec::new();
    if let Some(master) = &pkg.hls_master {
        let codecs: Vec<String> = pkg.tracks.iter().map(|t| t.codec.clone()).collect();
        let expected = pkg.ts.then_some(codecs.as_slice());
        problems.extend(validate::validate_hls(master, &read, expected));
    }
    if let Some(mpd) = &pkg.dash_manifest {
        problems.extend(validate::validate_mpd(mpd, &read));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constant_rate_source_states_its_nominal_rate() {
        // The case: 30/1 source, the stitched rung measured at ~30.003.
        let measured = (5400, 17_998);
        assert_eq!(frame_rate((30, 1), (30, 1), measured), (30, 1));
        let ntsc = (30_000, 1001);
        assert_eq!(frame_rate(ntsc, ntsc, (2_997_300, 100_000)), ntsc);
        // A container average off by a frame over a short clip is still constant-rate.
        assert_eq!(frame_rate((25, 1), (2475, 100), (2475, 100)), (25, 1));
        // Average unknown: the measured one decides.
        assert_eq!(frame_rate((24, 1), (0, 0), (2399, 100)), (24, 1));
        // Nothing but the nominal rate known.
        assert_eq!(frame_rate((50, 1), (0, 0), (0, 1)), (50, 1));
    }

    #[test]
    fn a_variable_rate_source_states_the_measured_average() {
        // Frames 1/30 and 2/30 s apart: nominal 30, average ~22.5.
        assert_eq!(frame_rate((30, 1), (45, 2), (2251, 100)), (2251, 100));
        // A time-base-like nominal rate (Matroska VFR) is not a frame rate.
        assert_eq!(frame_rate((1000, 1), (0, 0), (2400, 101)), (2400, 101));
        // No nominal rate: the measured average.
        assert_eq!(frame_rate((0, 0), (25, 1), (2501, 100)), (2501, 100));
    }
}
