//! Subtitle renditions of a package: the source's text tracks written as WebVTT, cut at the
//! video's segment boundaries for HLS (with an X-TIMESTAMP-MAP) and as one file for DASH.
//!
//! Why from the video track: HLS wants subtitle segments that line up with the media
//! segments, and both manifests must place a cue at the same instant as the frames it
//! belongs to, which only the written video's first timestamp tells.

use std::path::Path;

use tessera_model::subtitles::SubtitleTrack;

use crate::model::{MediaSegment, Track, TrackKind};
use crate::vtt::{self, Cue};
use tessera_model::package::SubtitleFormat;

/// A text track to publish: its language and its cues in seconds from the first frame.
#[derive(Debug, Clone, PartialEq)]
pub struct TextTrack {
    /// ISO 639 language ("und" when unknown).
    pub language: String,
    /// Cues, seconds from the package's first video frame.
    pub cues: Vec<Cue>,
}

/// The source's text tracks a package carries under `format`, and a warning naming each one
/// it leaves out ("stream 2: subtitle subrip (eng): ...", as the probe names the streams no
/// output keeps).
///
/// Why a warning: a file output keeps every text track, so a package without them must say
/// so, or the loss goes unnoticed until a viewer misses the captions.
pub fn carried(
    format: SubtitleFormat,
    tracks: &[SubtitleTrack],
) -> (Vec<SubtitleTrack>, Vec<String>) {
    if format.carries() {
        return (tracks.to_vec(), Vec::new());
    }
    let warnings = tracks
        .iter()
        .map(|t| {
            let lang = t
                .language
                .as_deref()
                .map(|l| format!(" ({l})"))
                .unwrap_or_default();
            format!(
                "stream {}: subtitle {}{lang}: left out of the package (subtitles \"none\")",
                t.source_index, t.codec
            )
        })
        .collect();
    (Vec::new(), warnings)
}

/// Writes the WebVTT files of `text` under `root/<id>/` and returns its track: HLS
/// segments (`seg-NNNNN.vtt`, one per segment of `video`, when `hls`) and the whole file
/// (`subtitles.vtt`, when `dash`). `media_start` is the video's first timestamp in
/// seconds (what the media segments carry for the first frame).
pub fn write_track(
    id: &str,
    text: &TextTrack,
    video: &Track,
    media_start: f64,
    (hls, dash): (bool, bool),
    root: &Path,
) -> std::io::Result<Track> {
    let dir = root.join(id);
    std::fs::create_dir_all(&dir)?;
    let scale = f64::from(video.timescale.max(1));
    let first = video.segments.first().map_or(0, |s| s.start);
    let mut boundaries: Vec<f64> = video
        .segments
        .iter()
        .map(|s| (s.start.saturating_sub(first)) as f64 / scale)
        .collect();
    boundaries.push(video.seconds());
    let mut segments = Vec::new();
    if hls {
        let mpegts = (media_start.max(0.0) * 90_000.0).round() as u64;
        // Times in the video's own ticks, so every EXTINF is the video segment's to the
        // digit (milliseconds would round 1/30 s frames off it).
        for (i, (body, v)) in vtt::segment_files(&text.cues, &boundaries, mpegts)
            .into_iter()
            .zip(&video.segments)
            .enumerate()
        {
            let rel = format!("{id}/seg-{i:05}.vtt");
            std::fs::write(root.join(&rel), &body)?;
            segments.push(MediaSegment {
                uri: rel,
                start: v.start.saturating_sub(first),
                duration: v.duration,
                bytes: body.len() as u64,
                key_frame_bytes: None,
            });
        }
    }
    let mut file = None;
    if dash {
        // One file on the period's timeline: the media's own timestamps.
        let shifted: Vec<Cue> = text
            .cues
            .iter()
            .map(|c| Cue {
                start: c.start + media_start,
                end: c.end + media_start,
                text: c.text.clone(),
            })
            .collect();
        let rel = format!("{id}/subtitles.vtt");
        let body = vtt::whole_file(&shifted);
        std::fs::write(root.join(&rel), &body)?;
        if segments.is_empty() {
            segments.push(MediaSegment {
                uri: rel.clone(),
                start: 0,
                duration: video.segments.iter().map(|s| s.duration).sum(),
                bytes: body.len() as u64,
                key_frame_bytes: None,
            });
        }
        file = Some(rel);
    }
    Ok(Track {
        id: id.to_string(),
        kind: TrackKind::Subtitles {
            language: text.language.clone(),
            file,
        },
        codec: "wvtt".into(),
        init: None,
        playlist: format!("{id}/playlist.m3u8"),
        timescale: video.timescale,
        segments,
    })
}

/// Cues of a source track counted from the first frame: `start_seconds` (the source time
/// of the first frame shown) becomes 0; cues wholly outside `[0, duration)` are dropped, the
/// rest clipped.
pub fn cues_from_source(
    cues: &[tessera_model::subtitles::Cue],
    start_seconds: f64,
    duration: f64,
) -> Vec<Cue> {
    cues.iter()
        .filter_map(|c| {
            let (start, end) = (
                c.start_seconds - start_seconds,
                c.end_seconds - start_seconds,
            );
            if !(start.is_finite() && end.is_finite()) || end <= 0.0 || start >= duration {
                return None;
            }
            Some(Cue {
                start: start.max(0.0),
                end: end.min(duration).max(start.max(0.0)),
                text: vtt::text_from_ass(&c.ass),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn video() -> Track {
        let seg = |i: u64, d: u64| MediaSegment {
            uri: format!("v0/seg-{i:05}.m4s"),
            start: 1000 + i * 2000,
            duration: d,
            bytes: 10,
            key_frame_bytes: None,
        };
        Track {
            id: "v0".into(),
            kind: TrackKind::Video {
                width: 2,
                height: 2,
                frame_rate: (25, 1),
            },
            codec: "avc1.64001e".into(),
            init: Some("v0/init.mp4".into()),
            playlist: "v0/playlist.m3u8".into(),
            timescale: 1000,
            segments: vec![seg(0, 2000), seg(1, 2000), seg(2, 1000)],
        }
    }

    #[test]
    fn hls_segments_follow_the_video_and_dash_gets_one_shifted_file() {
        let dir = tempfile::tempdir().unwrap();
        let text = TextTrack {
            language: "eng".into(),
            cues: vec![Cue {
                start: 1.5,
                end: 2.5,
                text: "across".into(),
            }],
        };
        let t = write_track("s0", &text, &video(), 0.04, (true, true), dir.path()).unwrap();
        let uris: Vec<&str> = t.segments.iter().map(|s| s.uri.as_str()).collect();
        assert_eq!(
            uris,
            ["s0/seg-00000.vtt", "s0/seg-00001.vtt", "s0/seg-00002.vtt"]
        );
        let starts: Vec<(u64, u64)> = t.segments.iter().map(|s| (s.start, s.duration)).collect();
        assert_eq!(starts, [(0, 2000), (2000, 2000), (4000, 1000)]);
        let seg0 = std::fs::read_to_string(dir.path().join("s0/seg-00000.vtt")).unwrap();
        assert!(
            seg0.contains("X-TIMESTAMP-MAP=MPEGTS:3600,LOCAL:00:00:00.000"),
            "{seg0}"
        );
        assert!(
            seg0.contains("00:00:01.500 --> 00:00:02.500\nacross"),
            "{seg0}"
        );
        let seg2 = std::fs::read_to_string(dir.path().join("s0/seg-00002.vtt")).unwrap();
        assert!(!seg2.contains("-->"), "{seg2}");
        let whole = std::fs::read_to_string(dir.path().join("s0/subtitles.vtt")).unwrap();
        assert!(whole.contains("00:00:01.540 --> 00:00:02.540"), "{whole}");
        assert_eq!(
            t.kind,
            TrackKind::Subtitles {
                language: "eng".into(),
                file: Some("s0/subtitles.vtt".into())
            }
        );
    }

    #[test]
    fn hls_segments_take_the_video_durations_to_the_tick() {
        // 30 fps in a 1/15360 timescale: the first segment 11 ticks short of 2 s.
        let mut v = video();
        v.timescale = 15_360;
        for (s, (start, duration)) in
            v.segments
                .iter_mut()
                .zip([(512, 30_709), (31_221, 30_720), (61_941, 15_360)])
        {
            (s.start, s.duration) = (start, duration);
        }
        let dir = tempfile::tempdir().unwrap();
        let text = TextTrack {
            language: "eng".into(),
            cues: Vec::new(),
        };
        let t = write_track("s0", &text, &v, 0.0, (true, false), dir.path()).unwrap();
        let extinf = |t: &Track| -> Vec<String> {
            crate::hls::media_playlist(t, false)
                .lines()
                .filter(|l| l.starts_with("#EXTINF:"))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(extinf(&t), extinf(&v));
        assert_eq!(t.segments[1].start, 30_709);
    }

    #[test]
    fn tracks_left_out_are_named() {
        let track = |index: usize, language: Option<&str>| SubtitleTrack {
            source_index: index,
            codec: "subrip".into(),
            language: language.map(str::to_string),
            header: String::new(),
            cues: Vec::new(),
        };
        let tracks = [track(2, Some("eng")), track(3, None)];
        let (kept, warnings) = carried(SubtitleFormat::Webvtt, &tracks);
        assert_eq!((kept.as_slice(), warnings.len()), (&tracks[..], 0));
        let (kept, warnings) = carried(SubtitleFormat::None, &tracks);
        assert!(kept.is_empty());
        assert_eq!(
            warnings,
            [
                "stream 2: subtitle subrip (eng): left out of the package (subtitles \"none\")",
                "stream 3: subtitle subrip: left out of the package (subtitles \"none\")",
            ]
        );
        assert_eq!(carried(SubtitleFormat::None, &[]), (Vec::new(), Vec::new()));
    }

    #[test]
    fn source_cues_move_to_the_package_timeline() {
        let cue = |s: f64, e: f64| tessera_model::subtitles::Cue {
            start_seconds: s,
            end_seconds: e,
            ass: "0,0,Default,,0,0,0,,hi".into(),
        };
        let got = cues_from_source(
            &[
                cue(9.0, 10.5),
                cue(10.5, 11.0),
                cue(19.0, 21.0),
                cue(21.0, 22.0),
            ],
            10.0,
            10.0,
        );
        let times: Vec<(f64, f64)> = got.iter().map(|c| (c.start, c.end)).collect();
        assert_eq!(times, [(0.0, 0.5), (0.5, 1.0), (9.0, 10.0)]);
        assert_eq!(got[0].text, "hi");
    }
}
