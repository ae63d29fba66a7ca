//! The DASH manifest (a static MPD, ISO/IEC 23009-1 live profile) over fMP4 segments.
//!
//! Why SegmentTemplate + SegmentTimeline: the timeline carries each segment's exact start
//! and duration in the track timescale, so a player never drifts, and run-length encoding
//! keeps the manifest small for regular segments.

use crate::hls::{dir_of, relative};
use crate::model::{MediaSegment, Package, TileTrack, Track, TrackKind};
use std::fmt::Write as _;

/// Escapes a string for use in an XML attribute value or text node.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// An xs:duration in seconds with millisecond precision ("PT60.000S").
pub fn xs_duration(seconds: f64) -> String {
    format!(
        "PT{:.3}S",
        if seconds.is_finite() {
            seconds.max(0.0)
        } else {
            0.0
        }
    )
}

/// One `<S>` of a SegmentTimeline: start (written when not continuous), duration, repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineEntry {
    /// `t`: start of the first segment of the run; `None` when it follows the previous run.
    pub t: Option<u64>,
    /// `d`: duration of each segment of the run.
    pub d: u64,
    /// `r`: how many more segments of the same duration follow without a gap.
    pub r: u64,
}

/// Run-length encodes segment (start, duration) pairs into `<S>` entries.
///
/// Why: the first entry and every entry after a gap or overlap carry `t`, so the timeline
/// says exactly where each segment starts.
pub fn timeline(segments: &[MediaSegment]) -> Vec<TimelineEntry> {
    let mut out: Vec<TimelineEntry> = Vec::new();
    let mut end: Option<u64> = None;
    for s in segments {
        let continuous = end == Some(s.start);
        match out.last_mut() {
            Some(last) if continuous && last.d == s.duration => last.r += 1,
            _ => out.push(TimelineEntry {
                t: (!continuous).then_some(s.start),
                d: s.duration,
                r: 0,
            }),
        }
        end = Some(s.start.saturating_add(s.duration));
    }
    out
}

/// The `$Number%0Nd$` media template and start number of a track whose segment URIs are all
/// `<dir>/seg-<digits>.<ext>` with consecutive numbers; `None` otherwise.
pub fn media_template(track: &Track) -> Option<(String, u64)> {
    let parts: Vec<(&str, &str, &str)> = track
        .segments
        .iter()
        .map(|s| split_uri(&s.uri))
        .collect::<Option<_>>()?;
    let (dir, first, ext) = *parts.first()?;
    let start: u64 = first.parse().ok()?;
    let width = first.len();
    let mut padded_ok = true;
    let mut plain_ok = true;
    for (i, (d, digits, e)) in parts.iter().enumerate() {
        let n = start.checked_add(i as u64)?;
        if *d != dir || *e != ext || digits.parse::<u64>().ok()? != n {
            return None;
        }
        padded_ok &= *digits == format!("{n:0width$}");
        plain_ok &= *digits == n.to_string();
    }
    let number = if plain_ok {
        "$Number$".to_string()
    } else if padded_ok {
        format!("$Number%0{width}d$")
    } else {
        return None;
    };
    Some((format!("{dir}seg-{number}.{ext}"), start))
}

/// `<dir>/seg-<digits>.<ext>` -> (dir with its trailing '/', digits, ext).
fn split_uri(uri: &str) -> Option<(&str, &str, &str)> {
    let name_at = uri.rfind('/').map_or(0, |i| i + 1);
    let (dir, name) = uri.split_at(name_at);
    let rest = name.strip_prefix("seg-")?;
    let (digits, ext) = rest.split_once('.')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || ext.is_empty() {
        return None;
    }
    Some((dir, digits, ext))
}

fn write_timeline(out: &mut String, indent: &str, track: &Track) {
    let _ = writeln!(out, "{indent}<SegmentTimeline>");
    for e in timeline(&track.segments) {
        let _ = write!(out, "{indent}  <S");
        if let Some(t) = e.t {
            let _ = write!(out, " t=\"{t}\"");
        }
        let _ = write!(out, " d=\"{}\"", e.d);
        if e.r > 0 {
            let _ = write!(out, " r=\"{}\"", e.r);
        }
        out.push_str("/>\n");
    }
    let _ = writeln!(out, "{indent}</SegmentTimeline>");
}

/// SegmentTemplate (or SegmentList when the URIs follow no template) of one track.
fn write_segments(out: &mut String, dir: &str, track: &Track) {
    let ind = "        ";
    let init = track.init.as_deref().map(|i| xml_escape(&relative(dir, i)));
    if let Some((template, start)) = media_template(track) {
        let _ = write!(
            out,
            "{ind}<SegmentTemplate timescale=\"{}\"",
            track.timescale
        );
        if let Some(init) = &init {
            let _ = write!(out, " initialization=\"{init}\"");
        }
        let media = xml_escape(&relative(dir, &template));
        let _ = writeln!(out, " media=\"{media}\" startNumber=\"{start}\">");
        write_timeline(out, &format!("{ind}  "), track);
        let _ = writeln!(out, "{ind}</SegmentTemplate>");
    } else {
        let _ = writeln!(out, "{ind}<SegmentList timescale=\"{}\">", track.timescale);
        if let Some(init) = &init {
            let _ = writeln!(out, "{ind}  <Initialization sourceURL=\"{init}\"/>");
        }
        write_timeline(out, &format!("{ind}  "), track);
        for s in &track.segments {
            let _ = writeln!(
                out,
                "{ind}  <SegmentURL media=\"{}\"/>",
                xml_escape(&relative(dir, &s.uri))
            );
        }
        let _ = writeln!(out, "{ind}</SegmentList>");
    }
}

fn frame_rate((num, den): (u32, u32)) -> String {
    if den <= 1 {
        num.to_string()
    } else {
        format!("{num}/{den}")
    }
}

/// The static MPD of a package; URIs are written relative to `pkg.dash_manifest`'s directory.
pub fn mpd(pkg: &Package) -> String {
    let dir = pkg.dash_manifest.as_deref().map_or("", dir_of);
    let (duration, longest) = presentation_times(pkg);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" profiles=\"urn:mpeg:dash:profile:isoff-live:2011\" type=\"static\" mediaPresentationDuration=\"{}\" minBufferTime=\"{}\">",
        xs_duration(duration),
        xs_duration(longest),
    );
    out.push_str("  <Period id=\"0\" start=\"PT0.000S\">\n");
    let video: Vec<&Track> = pkg
        .tracks
        .iter()
        .filter(|t| matches!(t.kind, TrackKind::Video { .. }))
        .collect();
    let mut set_id = 0;
    if !video.is_empty() {
        write_video_set(&mut out, dir, set_id, &video);
        set_id += 1;
    }
    for t in &pkg.tracks {
        match &t.kind {
            TrackKind::Audio { .. } => write_audio_set(&mut out, dir, set_id, t),
            TrackKind::Subtitles { .. } => write_subtitle_set(&mut out, dir, set_id, t),
            TrackKind::Video { .. } => continue,
        }
        set_id += 1;
    }
    if let Some(tiles) = &pkg.tiles {
        write_tiles(&mut out, dir, set_id, tiles);
    }
    out.push_str("  </Period>\n</MPD>\n");
    out
}

/// (mediaPresentationDuration, minBufferTime) in seconds: the longest media track, and the
/// longest segment of any media track (at least the package's segment length).
fn presentation_times(pkg: &Package) -> (f64, f64) {
    let media_tracks = pkg
        .tracks
        .iter()
        .filter(|t| !matches!(t.kind, TrackKind::Subtitles { .. }));
    let duration = media_tracks.clone().map(Track::seconds).fold(0.0, f64::max);
    let longest = media_tracks
        .flat_map(|t| {
            t.segments
                .iter()
                .map(move |s| s.duration as f64 / f64::from(t.timescale.max(1)))
        })
        .fold(pkg.segment_seconds, f64::max);
    (duration, longest)
}

/// All video tracks as one AdaptationSet, so a player can switch between them.
fn write_video_set(out: &mut String, dir: &str, set_id: usize, video: &[&Track]) {
    let dims = |t: &&Track| match t.kind {
        TrackKind::Video { width, height, .. } => (width, height),
        _ => (0, 0),
    };
    let max_w = video.iter().map(|t| dims(t).0).max().unwrap_or(0);
    let max_h = video.iter().map(|t| dims(t).1).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "    <AdaptationSet id=\"{set_id}\" contentType=\"video\" mimeType=\"video/mp4\" segmentAlignment=\"true\" startWithSAP=\"1\" maxWidth=\"{max_w}\" maxHeight=\"{max_h}\">"
    );
    for t in video {
        let TrackKind::Video {
            width,
            height,
            frame_rate: fr,
        } = t.kind
        else {
            continue;
        };
        let _ = writeln!(
            out,
            "      <Representation id=\"{}\" bandwidth=\"{}\" codecs=\"{}\" width=\"{width}\" height=\"{height}\" frameRate=\"{}\">",
            xml_escape(&t.id),
            t.peak_bitrate(),
            xml_escape(&t.codec),
            frame_rate(fr),
        );
        write_segments(out, dir, t);
        out.push_str("      </Representation>\n");
    }
    out.push_str("    </AdaptationSet>\n");
}

/// One audio track as an AdaptationSet of its own (one per language and rendition).
fn write_audio_set(out: &mut String, dir: &str, set_id: usize, t: &Track) {
    let TrackKind::Audio {
        language,
        channels,
        sample_rate,
    } = &t.kind
    else {
        return;
    };
    let _ = writeln!(
        out,
        "    <AdaptationSet id=\"{set_id}\" contentType=\"audio\" mimeType=\"audio/mp4\" lang=\"{}\" segmentAlignment=\"true\" startWithSAP=\"1\">",
        xml_escape(language)
    );
    let _ = writeln!(
        out,
        "      <Representation id=\"{}\" bandwidth=\"{}\" codecs=\"{}\" audioSamplingRate=\"{sample_rate}\">",
        xml_escape(&t.id),
        t.peak_bitrate(),
        xml_escape(&t.codec),
    );
    let _ = writeln!(
        out,
        "        <AudioChannelConfiguration schemeIdUri=\"urn:mpeg:dash:23003:3:audio_channel_configuration:2011\" value=\"{channels}\"/>"
    );
    write_segments(out, dir, t);
    out.push_str("      </Representation>\n    </AdaptationSet>\n");
}

/// One subtitle track as a text AdaptationSet whose BaseURL is the whole WebVTT file.
fn write_subtitle_set(out: &mut String, dir: &str, set_id: usize, t: &Track) {
    let TrackKind::Subtitles { language, file } = &t.kind else {
        return;
    };
    let _ = writeln!(
        out,
        "    <AdaptationSet id=\"{set_id}\" contentType=\"text\" mimeType=\"text/vtt\" lang=\"{}\">",
        xml_escape(language)
    );
    let _ = writeln!(
        out,
        "      <Representation id=\"{}\" bandwidth=\"{}\" codecs=\"{}\">",
        xml_escape(&t.id),
        t.average_bitrate().max(1),
        xml_escape(&t.codec),
    );
    let whole = file
        .as_deref()
        .or_else(|| t.segments.first().map(|s| s.uri.as_str()));
    if let Some(whole) = whole {
        let _ = writeln!(
            out,
            "        <BaseURL>{}</BaseURL>",
            xml_escape(&relative(dir, whole))
        );
    }
    out.push_str("      </Representation>\n    </AdaptationSet>\n");
}

/// The sprite sheets as a DASH-IF thumbnail AdaptationSet: one segment per sheet, the grid
/// in an EssentialProperty so players that do not know it skip the set.
fn write_tiles(out: &mut String, dir: &str, set_id: usize, tiles: &TileTrack) {
    let _ = writeln!(
        out,
        "    <AdaptationSet id=\"{set_id}\" contentType=\"image\" mimeType=\"{}\">",
        xml_escape(&tiles.mime)
    );
    let _ = writeln!(
        out,
        "      <SegmentTemplate media=\"{}\" timescale=\"1000\" duration=\"{}\" startNumber=\"{}\"/>",
        xml_escape(&relative(dir, &tiles.template)),
        tiles.sheet_millis(),
        tiles.start_number,
    );
    let _ = writeln!(
        out,
        "      <Representation id=\"thumbnails\" bandwidth=\"{}\" width=\"{}\" height=\"{}\">",
        tiles.bandwidth(),
        tiles.tile.0 * tiles.columns,
        tiles.tile.1 * tiles.rows,
    );
    let _ = writeln!(
        out,
        "        <EssentialProperty schemeIdUri=\"{THUMBNAIL_TILE_SCHEME}\" value=\"{}x{}\"/>",
        tiles.columns, tiles.rows
    );
    out.push_str("      </Representation>\n    </AdaptationSet>\n");
}

/// The DASH-IF scheme that marks an image AdaptationSet as tiled thumbnails ("CxR").
pub const THUMBNAIL_TILE_SCHEME: &str = "http://dashif.org/thumbnail_tile";

#[cfg(test)]
mod tests;
