//! Checks of one HLS media playlist and the segments it lists.
//!
//! Why apart from the master checks: each rendition is checked the same way whether a
//! variant, an audio or subtitle rendition or an I-frame stream refers to it, and what it
//! measures (durations, peak and average rate, the init's facts) feeds the master checks.

use super::ReadFn;
use crate::bmff::{init_info, segment_info, InitInfo};
use crate::hls::{dir_of, parse_playlist, resolve, Playlist};
use std::collections::HashMap;

/// What a media playlist and its files measured.
#[derive(Debug, Clone)]
pub(super) struct MediaFacts {
    /// EXTINF of each segment.
    pub durations: Vec<f64>,
    /// Highest size * 8 / EXTINF over the segments (bits/s).
    pub peak: f64,
    /// Total size * 8 / total EXTINF (bits/s).
    pub average: f64,
    /// The EXT-X-MAP's facts, for fMP4.
    pub init: Option<InitInfo>,
}

pub(super) fn read_playlist(
    path: &str,
    read: ReadFn<'_>,
    problems: &mut Vec<String>,
    referrer: &str,
) -> Option<Playlist> {
    let Some(bytes) = read(path) else {
        problems.push(format!("{path}: missing (referenced by {referrer})"));
        return None;
    };
    let text = String::from_utf8_lossy(&bytes);
    match parse_playlist(&text) {
        Ok(p) => Some(p),
        Err(e) => {
            problems.push(format!("{path}: does not parse as a playlist: {e}"));
            None
        }
    }
}

/// Checks one media playlist and its segments; returns what it measured.
pub(super) fn check_media(
    path: &str,
    read: ReadFn<'_>,
    problems: &mut Vec<String>,
    referrer: &str,
) -> Option<MediaFacts> {
    let pl = read_playlist(path, read, problems, referrer)?;
    let dir = dir_of(path);
    let target = match pl.tag("EXT-X-TARGETDURATION") {
        None => {
            problems.push(format!(
                "{path}: no EXT-X-TARGETDURATION (RFC 8216 4.3.3.1)"
            ));
            None
        }
        Some(t) => match t.value.parse::<u64>() {
            Ok(v) => Some(v),
            Err(_) => {
                problems.push(format!(
                    "{path}: EXT-X-TARGETDURATION {:?} is not a decimal-integer",
                    t.value
                ));
                None
            }
        },
    };
    if pl.tag("EXT-X-MEDIA-SEQUENCE").is_none() {
        problems.push(format!("{path}: no EXT-X-MEDIA-SEQUENCE"));
    }
    if pl.tag("EXT-X-ENDLIST").is_none() {
        problems.push(format!(
            "{path}: no EXT-X-ENDLIST (a VOD playlist must end with it)"
        ));
    }
    if pl.segments.is_empty() {
        problems.push(format!("{path}: no media segments"));
    }
    let mut init = None;
    if let Some(map) = pl.segments.first().and_then(|s| s.map.clone()) {
        let map_path = resolve(dir, &map);
        match read(&map_path) {
            None => problems.push(format!("{map_path}: missing (EXT-X-MAP of {path})")),
            Some(bytes) => match init_info(&bytes) {
                Ok(i) => init = Some(i),
                Err(e) => problems.push(format!(
                    "{map_path}: not a readable init segment (EXT-X-MAP of {path}): {e}"
                )),
            },
        }
    }
    let (mut peak, mut total_bits, mut total_secs) = (0.0f64, 0.0f64, 0.0f64);
    let mut prev_end: Option<(u64, String)> = None;
    let mut range_end: HashMap<String, u64> = HashMap::new();
    for seg in &pl.segments {
        if let Some(t) = target {
            if seg.duration.round() as u64 > t {
                problems.push(format!(
                    "{path}: EXT-X-TARGETDURATION {t} is below the EXTINF {:.6} of {} rounded to the nearest integer (RFC 8216 4.3.3.1)",
                    seg.duration, seg.uri
                ));
            }
        }
        let seg_path = resolve(dir, &seg.uri);
        let Some(bytes) = read(&seg_path) else {
            problems.push(format!("{seg_path}: missing (listed in {path})"));
            prev_end = None;
            continue;
        };
        let mut size = bytes.len() as u64;
        if let Some((len, offset)) = seg.byterange {
            let start = offset.unwrap_or_else(|| range_end.get(&seg_path).copied().unwrap_or(0));
            if start.saturating_add(len) > size {
                problems.push(format!(
                    "{path}: EXT-X-BYTERANGE {len}@{start} of {} runs past the end of the file ({size} bytes)",
                    seg.uri
                ));
            }
            range_end.insert(seg_path.clone(), start.saturating_add(len));
            size = len;
        }
        if seg.duration > 0.0 {
            peak = peak.max(size as f64 * 8.0 / seg.duration);
        }
        total_bits += size as f64 * 8.0;
        total_secs += seg.duration;
        let Some(init) = &init else { continue };
        match segment_info(&bytes) {
            Err(e) => {
                problems.push(format!(
                    "{seg_path}: not a readable media segment (listed in {path}): {e}"
                ));
                prev_end = None;
            }
            Ok(info) => {
                if let Some((end, prev)) = &prev_end {
                    if *end != info.base_media_decode_time {
                        let what = if *end < info.base_media_decode_time {
                            "gap"
                        } else {
                            "overlap"
                        };
                        problems.push(format!(
                            "{path}: {} starts at decode time {} (tfdt) but {prev} ends at {end}: a {what} in media time, segments are not continuous",
                            seg.uri, info.base_media_decode_time
                        ));
                    }
                }
                let secs = info.duration as f64 / f64::from(init.timescale.max(1));
                if (secs - seg.duration).abs() > 0.001 {
                    problems.push(format!(
                        "{path}: EXTINF {:.6} of {} differs from its boxes' duration {secs:.6} s by more than 1 ms",
                        seg.duration, seg.uri
                    ));
                }
                prev_end = Some((
                    info.base_media_decode_time.saturating_add(info.duration),
                    seg.uri.clone(),
                ));
            }
        }
    }
    let average = if total_secs > 0.0 {
        total_bits / total_secs
    } else {
        0.0
    };
    Some(MediaFacts {
        durations: pl.segments.iter().map(|s| s.duration).collect(),
        peak,
        average,
        init,
    })
}
