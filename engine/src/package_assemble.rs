//! The blocking half of the package step: the segmented tracks read back, the subtitles
//! written as WebVTT renditions, the manifests written and checked like a strict player
//! would.
//!
//! Why apart from packaging.rs: this is file work on a blocking thread over what the
//! segmenter children wrote; packaging.rs runs the children, the store and the delivery.

use std::path::PathBuf;

use tessera_model::package::PackageFormat;
use tessera_model::segmented::SegmentedTrack;
use tessera_model::subtitles::SubtitleTrack;
use tessera_package::{assemble, subtitles, Package, TileTrack, Track, TrackKind};

/// Rational frame rate as (numerator, denominator).
pub(crate) type RatePair = (u32, u32);

/// What the package's manifests are made of, handed to a blocking thread.
pub(crate) struct Assembly {
    /// The package root in staging.
    pub root: PathBuf,
    /// Each segmented track (rungs, then audio) with its id.
    pub written: Vec<(String, SegmentedTrack)>,
    /// The image files written (sheets, stills, thumbnails track), root-relative.
    pub images: Vec<String>,
    /// The source's text tracks the package carries.
    pub texts: Vec<SubtitleTrack>,
    /// The source's nominal and average frame rates, for the variants' stated rate.
    pub source_rate: (RatePair, RatePair),
    /// The source time of the first frame shown: cue times count from it.
    pub start_seconds: f64,
    /// The sprite sheets as the MPD's thumbnail track.
    pub tiles: Option<TileTrack>,
    /// HLS, DASH or both.
    pub format: PackageFormat,
    /// Whether the HLS segments are MPEG-TS.
    pub ts: bool,
    /// The target media segment length.
    pub segment_seconds: f64,
}

/// What an assembled package is: its media files and its manifests (in publishing order),
/// root-relative, and the bytes of all of them.
pub(crate) type Assembled = (Vec<String>, Vec<String>, u64);

/// Reads the tracks back, writes the subtitles and the manifests, and checks the package;
/// the reason, in words, when it fails.
pub(crate) fn assemble(a: Assembly) -> Result<Assembled, String> {
    let root = &a.root;
    let read = |rel: &str| std::fs::read(root.join(rel)).ok();
    let mut tracks = a
        .written
        .iter()
        .map(|(id, w)| assemble::track(id, w, &read))
        .collect::<Result<Vec<_>, String>>()?;
    // The source's nominal frame rate when it has a constant one, not the rung's measured
    // average (30.003 for a 30/1 source).
    for t in &mut tracks {
        if let TrackKind::Video { frame_rate, .. } = &mut t.kind {
            *frame_rate = assemble::frame_rate(a.source_rate.0, a.source_rate.1, *frame_rate);
        }
    }
    let media_text = write_subtitles(&a, &mut tracks)?;
    let media: Vec<String> = a
        .written
        .iter()
        .flat_map(|(_, w)| {
            w.init
                .iter()
                .cloned()
                .chain(w.segments.iter().map(|s| s.0.clone()))
        })
        .chain(a.images)
        .chain(media_text)
        .collect();
    let pkg = Package {
        tracks,
        hls_master: a.format.has_hls().then(|| "master.m3u8".to_string()),
        dash_manifest: a.format.has_dash().then(|| "manifest.mpd".to_string()),
        ts: a.ts,
        segment_seconds: a.segment_seconds,
        tiles: a.tiles,
    };
    let manifests =
        assemble::write_manifests(&pkg, root).map_err(|e| format!("writing the manifests: {e}"))?;
    let problems = assemble::check(&pkg, root);
    if !problems.is_empty() {
        return Err(format!("failed its checks: {}", problems.join("; ")));
    }
    let bytes = media
        .iter()
        .chain(&manifests)
        .filter_map(|rel| std::fs::metadata(root.join(rel)).ok())
        .map(|m| m.len())
        .sum();
    Ok((media, manifests, bytes))
}

/// Writes each carried text track as a WebVTT rendition timed to the first video track,
/// appends them to `tracks`; returns their files (none without a video track).
fn write_subtitles(a: &Assembly, tracks: &mut Vec<Track>) -> Result<Vec<String>, String> {
    let mut media_text = Vec::new();
    let video = a
        .written
        .iter()
        .zip(tracks.iter())
        .find(|(_, t)| t.kind.is_video());
    let Some(((_, w), video)) = video.map(|(w, t)| (w, t.clone())) else {
        return Ok(media_text);
    };
    for (k, source) in a.texts.iter().enumerate() {
        let text = subtitles::TextTrack {
            language: source.language.clone().unwrap_or_else(|| "und".into()),
            cues: subtitles::cues_from_source(&source.cues, a.start_seconds, video.seconds()),
        };
        let both = (a.format.has_hls(), a.format.has_dash());
        let track = subtitles::write_track(
            &format!("s{k}"),
            &text,
            &video,
            w.first_seconds,
            both,
            &a.root,
        )
        .map_err(|e| format!("writing subtitles s{k}: {e}"))?;
        media_text.extend(track.segments.iter().map(|s| s.uri.clone()));
        if let TrackKind::Subtitles { file: Some(f), .. } = &track.kind {
            if !media_text.contains(f) {
                media_text.push(f.clone());
            }
        }
        tracks.push(track);
    }
    Ok(media_text)
}
