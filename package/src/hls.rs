//! HLS text (RFC 8216): media, I-frame and master playlists, and a parser for checking them.
//!
//! Why hand-written text: a playlist is a few tags computed from segment times and sizes;
//! writing it here keeps every rounding and quoting rule in one tested place, and the parser
//! lets the validator read back exactly what a client would.

use crate::model::{Package, Track, TrackKind};
use std::fmt::Write as _;

/// The directory part of a root-relative path ("" for a file at the root).
///
/// Why: URIs inside a playlist are relative to the playlist's own directory.
pub fn dir_of(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

fn components(path: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if matches!(out.last(), None | Some(&"..")) {
                    out.push("..");
                } else {
                    out.pop();
                }
            }
            p => out.push(p),
        }
    }
    out
}

/// `to` (root-relative) as seen from the directory `from_dir` (root-relative).
///
/// Why: segment and init URIs are stored relative to the root but written inside playlists
/// that may live in subdirectories.
pub fn relative(from_dir: &str, to: &str) -> String {
    let from = components(from_dir);
    let to = components(to);
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend(&to[common..]);
    parts.join("/")
}

/// `uri` found in a file in directory `base_dir`, as a root-relative path (the inverse of
/// [`relative`]); absolute URLs are returned unchanged.
///
/// Why: the validator follows references the way a client does.
pub fn resolve(base_dir: &str, uri: &str) -> String {
    if uri.contains("://") {
        return uri.to_string();
    }
    if let Some(abs) = uri.strip_prefix('/') {
        return components(abs).join("/");
    }
    components(&format!("{base_dir}/{uri}")).join("/")
}

fn seconds(ticks: u64, timescale: u32) -> f64 {
    ticks as f64 / f64::from(timescale.max(1))
}

/// EXT-X-TARGETDURATION: the longest segment rounded to the nearest integer, at least 1.
fn target_duration(track: &Track) -> u64 {
    track
        .segments
        .iter()
        .map(|s| seconds(s.duration, track.timescale).round() as u64)
        .max()
        .unwrap_or(0)
        .max(1)
}

fn header(out: &mut String, version: u32, track: &Track) {
    out.push_str("#EXTM3U\n");
    let _ = writeln!(out, "#EXT-X-VERSION:{version}");
    let _ = writeln!(out, "#EXT-X-TARGETDURATION:{}", target_duration(track));
    out.push_str("#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:VOD\n");
}

/// The media playlist of one track; URIs are written relative to `track.playlist`.
pub fn media_playlist(track: &Track, ts: bool) -> String {
    let subtitles = matches!(track.kind, TrackKind::Subtitles { .. });
    let version = if ts || subtitles { 3 } else { 7 };
    let dir = dir_of(&track.playlist);
    let mut out = String::new();
    header(&mut out, version, track);
    out.push_str("#EXT-X-INDEPENDENT-SEGMENTS\n");
    if let Some(init) = &track.init {
        let _ = writeln!(out, "#EXT-X-MAP:URI=\"{}\"", relative(dir, init));
    }
    for s in &track.segments {
        let _ = writeln!(out, "#EXTINF:{:.6},", seconds(s.duration, track.timescale));
        let _ = writeln!(out, "{}", relative(dir, &s.uri));
    }
    out.push_str("#EXT-X-ENDLIST\n");
    out
}

/// The I-frame playlist of a video track whose segments all know their key frame's size;
/// `None` otherwise. It must be written in the directory of `track.playlist`.
///
/// Why: trick play and scrubbing thumbnails fetch only each segment's first frame.
pub fn iframe_playlist(track: &Track, ts: bool) -> Option<String> {
    if !matches!(track.kind, TrackKind::Video { .. }) || track.segments.is_empty() {
        return None;
    }
    let sizes: Option<Vec<u64>> = track.segments.iter().map(|s| s.key_frame_bytes).collect();
    let sizes = sizes?;
    let dir = dir_of(&track.playlist);
    let mut out = String::new();
    header(&mut out, if ts { 4 } else { 7 }, track);
    out.push_str("#EXT-X-I-FRAMES-ONLY\n");
    if let Some(init) = &track.init {
        let _ = writeln!(out, "#EXT-X-MAP:URI=\"{}\"", relative(dir, init));
    }
    for (s, size) in track.segments.iter().zip(sizes) {
        let _ = writeln!(out, "#EXTINF:{:.6},", seconds(s.duration, track.timescale));
        let _ = writeln!(out, "#EXT-X-BYTERANGE:{size}@0");
        let _ = writeln!(out, "{}", relative(dir, &s.uri));
    }
    out.push_str("#EXT-X-ENDLIST\n");
    Some(out)
}

/// Peak bit rate of a track's I-frames (key_frame_bytes * 8 / segment duration).
pub fn iframe_bandwidth(track: &Track) -> u64 {
    track
        .segments
        .iter()
        .filter(|s| s.duration > 0)
        .map(|s| {
            let bits = s.key_frame_bytes.unwrap_or(0) as f64 * 8.0;
            (bits / seconds(s.duration, track.timescale)).ceil() as u64
        })
        .max()
        .unwrap_or(0)
}

/// Quoted-string attribute value: RFC 8216 forbids '"' and line breaks inside, so they go.
fn quoted(s: &str) -> String {
    let clean: String = s
        .chars()
        .filter(|c| !matches!(c, '"' | '\r' | '\n'))
        .collect();
    format!("\"{clean}\"")
}

/// The master playlist; `iframes` pairs a video track's index in `pkg.tracks` with its
/// I-frame playlist path (root-relative). The master lives at `pkg.hls_master` (root if none).
pub fn master_playlist(pkg: &Package, iframes: &[(usize, String)]) -> String {
    let dir = pkg.hls_master.as_deref().map_or("", dir_of);
    let mut out = String::from("#EXTM3U\n");
    let _ = writeln!(out, "#EXT-X-VERSION:{}", if pkg.ts { 3 } else { 7 });
    out.push_str("#EXT-X-INDEPENDENT-SEGMENTS\n");
    let audio: Vec<&Track> = pkg
        .tracks
        .iter()
        .filter(|t| matches!(t.kind, TrackKind::Audio { .. }))
        .collect();
    let mut names: Vec<String> = Vec::new();
    for (i, t) in audio.iter().enumerate() {
        let TrackKind::Audio {
            language, channels, ..
        } = &t.kind
        else {
            continue;
        };
        let name = unique_name(&mut names, language, &t.id);
        let _ = writeln!(
            out,
            "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"audio\",NAME={},LANGUAGE={},DEFAULT={},AUTOSELECT=YES,CHANNELS=\"{channels}\",URI={}",
            quoted(&name),
            quoted(language),
            if i == 0 { "YES" } else { "NO" },
            quoted(&relative(dir, &t.playlist)),
        );
    }
    let mut names: Vec<String> = Vec::new();
    let mut has_subs = false;
    for t in &pkg.tracks {
        let TrackKind::Subtitles { language, .. } = &t.kind else {
            continue;
        };
        has_subs = true;
        let name = unique_name(&mut names, language, &t.id);
        let _ = writeln!(
            out,
            "#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"subs\",NAME={},LANGUAGE={},DEFAULT=NO,AUTOSELECT=YES,FORCED=NO,URI={}",
            quoted(&name),
            quoted(language),
            quoted(&relative(dir, &t.playlist)),
        );
    }
    let audio_peak = audio.iter().map(|t| t.peak_bitrate()).max().unwrap_or(0);
    let audio_avg = audio.iter().map(|t| t.average_bitrate()).max().unwrap_or(0);
    for t in &pkg.tracks {
        let TrackKind::Video {
            width,
            height,
            frame_rate,
        } = &t.kind
        else {
            continue;
        };
        let mut codecs = t.codec.clone();
        if let Some(a) = audio.first() {
            codecs = format!("{codecs},{}", a.codec);
        }
        let fps = f64::from(frame_rate.0) / f64::from(frame_rate.1.max(1));
        let _ = write!(
            out,
            "#EXT-X-STREAM-INF:BANDWIDTH={},AVERAGE-BANDWIDTH={},CODECS={},RESOLUTION={width}x{height},FRAME-RATE={fps:.3}",
            t.peak_bitrate() + audio_peak,
            t.average_bitrate() + audio_avg,
            quoted(&codecs),
        );
        if !audio.is_empty() {
            out.push_str(",AUDIO=\"audio\"");
        }
        if has_subs {
            out.push_str(",SUBTITLES=\"subs\"");
        }
        let _ = writeln!(out, "\n{}", relative(dir, &t.playlist));
    }
    for (index, path) in iframes {
        let Some(t) = pkg.tracks.get(*index) else {
            continue;
        };
        let TrackKind::Video { width, height, .. } = &t.kind else {
            continue;
        };
        let _ = writeln!(
            out,
            "#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH={},CODECS={},RESOLUTION={width}x{height},URI={}",
            iframe_bandwidth(t),
            quoted(&t.codec),
            quoted(&relative(dir, path)),
        );
    }
    out
}

/// NAME must be unique within a rendition group: a repeated language gets the track id.
fn unique_name(names: &mut Vec<String>, language: &str, id: &str) -> String {
    let name = if names.iter().any(|n| n == language) {
        format!("{language} ({id})")
    } else {
        language.to_string()
    };
    names.push(name.clone());
    name
}

mod parse;
pub use parse::{parse_playlist, Attribute, Playlist, PlaylistSegment, Tag, Variant};

#[cfg(test)]
mod tests;
