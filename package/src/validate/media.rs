//! Checks of one HLS media playlist and the segments it lists.
//!
//! Why apart from the master checks: each rendition is checked the same way whether a
//! variant, an audio or subtitle rendition or an I-frame stream refers to it, and what it
//! measures (durations, peak and average rate, the init's facts) feeds the master checks.

use super::ReadFn;
use crate::bmff::{init_info, segment_info, InitInfo, SegmentInfo};
use crate::hls::{dir_of, parse_playlist, resolve, Playlist, PlaylistSegment};
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
    let target = target_duration(&pl, path, problems);
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
    let init = read_init(&pl, dir, path, read, problems);
    let mut walk = SegmentWalk {
        path,
        dir,
        read,
        target,
        init: init.as_ref(),
        peak: 0.0,
        total_bits: 0.0,
        total_secs: 0.0,
        prev_end: None,
        range_end: HashMap::new(),
    };
    for seg in &pl.segments {
        walk.check(seg, problems);
    }
    let (peak, total_bits, total_secs) = (walk.peak, walk.total_bits, walk.total_secs);
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

/// EXT-X-TARGETDURATION as a decimal-integer, when present and valid.
fn target_duration(pl: &Playlist, path: &str, problems: &mut Vec<String>) -> Option<u64> {
    match pl.tag("EXT-X-TARGETDURATION") {
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
    }
}

/// The facts of the first segment's EXT-X-MAP (fMP4), when it has one that reads.
fn read_init(
    pl: &Playlist,
    dir: &str,
    path: &str,
    read: ReadFn<'_>,
    problems: &mut Vec<String>,
) -> Option<InitInfo> {
    let map = pl.segments.first().and_then(|s| s.map.clone())?;
    let map_path = resolve(dir, &map);
    match read(&map_path) {
        None => problems.push(format!("{map_path}: missing (EXT-X-MAP of {path})")),
        Some(bytes) => match init_info(&bytes) {
            Ok(i) => return Some(i),
            Err(e) => problems.push(format!(
                "{map_path}: not a readable init segment (EXT-X-MAP of {path}): {e}"
            )),
        },
    }
    None
}

/// The segments of one media playlist, checked in order: what they measured so far and
/// where the previous one ended (in media time, and in each file for byte ranges).
struct SegmentWalk<'a> {
    /// The playlist's path, for messages.
    path: &'a str,
    /// The playlist's folder, which segment URIs resolve against.
    dir: &'a str,
    read: ReadFn<'a>,
    /// EXT-X-TARGETDURATION, when valid.
    target: Option<u64>,
    /// The EXT-X-MAP's facts; without them the segments' boxes are not read.
    init: Option<&'a InitInfo>,
    /// Highest size * 8 / EXTINF so far (bits/s).
    peak: f64,
    total_bits: f64,
    total_secs: f64,
    /// Where the previous segment ended in decode time, and its URI.
    prev_end: Option<(u64, String)>,
    /// Where the last byte range of each file ended (the default offset of the next).
    range_end: HashMap<String, u64>,
}

impl SegmentWalk<'_> {
    /// Checks and measures one segment.
    fn check(&mut self, seg: &PlaylistSegment, problems: &mut Vec<String>) {
        let path = self.path;
        if let Some(t) = self.target {
            if seg.duration.round() as u64 > t {
                problems.push(format!(
                    "{path}: EXT-X-TARGETDURATION {t} is below the EXTINF {:.6} of {} rounded to the nearest integer (RFC 8216 4.3.3.1)",
                    seg.duration, seg.uri
                ));
            }
        }
        let seg_path = resolve(self.dir, &seg.uri);
        let Some(bytes) = (self.read)(&seg_path) else {
            problems.push(format!("{seg_path}: missing (listed in {path})"));
            self.prev_end = None;
            return;
        };
        let size = self.range_size(seg, &seg_path, bytes.len() as u64, problems);
        if seg.duration > 0.0 {
            self.peak = self.peak.max(size as f64 * 8.0 / seg.duration);
        }
        self.total_bits += size as f64 * 8.0;
        self.total_secs += seg.duration;
        let Some(init) = self.init else { return };
        match segment_info(&bytes) {
            Err(e) => {
                problems.push(format!(
                    "{seg_path}: not a readable media segment (listed in {path}): {e}"
                ));
                self.prev_end = None;
            }
            Ok(info) => self.check_boxes(seg, &info, init.timescale, problems),
        }
    }

    /// The segment's size: its EXT-X-BYTERANGE's length, which must lie within the file of
    /// `file_size` bytes, or else the whole file.
    fn range_size(
        &mut self,
        seg: &PlaylistSegment,
        seg_path: &str,
        file_size: u64,
        problems: &mut Vec<String>,
    ) -> u64 {
        let Some((len, offset)) = seg.byterange else {
            return file_size;
        };
        let start = offset.unwrap_or_else(|| self.range_end.get(seg_path).copied().unwrap_or(0));
        if start.saturating_add(len) > file_size {
            problems.push(format!(
                "{}: EXT-X-BYTERANGE {len}@{start} of {} runs past the end of the file ({file_size} bytes)",
                self.path, seg.uri
            ));
        }
        self.range_end
            .insert(seg_path.to_string(), start.saturating_add(len));
        len
    }

    /// The segment must start where the previous one ended (tfdt) and its boxes must last
    /// its EXTINF within 1 ms.
    fn check_boxes(
        &mut self,
        seg: &PlaylistSegment,
        info: &SegmentInfo,
        timescale: u32,
        problems: &mut Vec<String>,
    ) {
        let path = self.path;
        if let Some((end, prev)) = &self.prev_end {
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
        let secs = info.duration as f64 / f64::from(timescale.max(1));
        if (secs - seg.duration).abs() > 0.001 {
            problems.push(format!(
                "{path}: EXTINF {:.6} of {} differs from its boxes' duration {secs:.6} s by more than 1 ms",
                seg.duration, seg.uri
            ));
        }
        self.prev_end = Some((
            info.base_media_decode_time.saturating_add(info.duration),
            seg.uri.clone(),
        ));
    }
}
