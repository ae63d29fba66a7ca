//! A small synthetic package (hand-made fMP4 boxes, WebVTT, playlists, MPD) held in memory,
//! for the validator's tests.

use super::*;
use crate::bmff::test_boxes::*;
use crate::model::{MediaSegment, Package, TileTrack, Track, TrackKind};
use crate::{dash, hls, vtt};
use std::collections::HashMap;

pub(super) type Files = HashMap<String, Vec<u8>>;

/// A media track: init + segments of `counts[i]` samples of `dur` ticks each.
#[allow(clippy::too_many_arguments)]
pub(super) fn media_track(
    files: &mut Files,
    id: &str,
    kind: TrackKind,
    init: Vec<u8>,
    timescale: u32,
    dur: u32,
    counts: &[usize],
    size: u32,
) -> Track {
    files.insert(format!("{id}/init.mp4"), init);
    let mut segments = Vec::new();
    let mut t = 0u64;
    for (i, &n) in counts.iter().enumerate() {
        let mut s = samples(n, dur, size);
        s[0].size = size * 4; // the key frame
        let bytes = media_segment(i as u32 + 1, 1, t, &s);
        let info = crate::bmff::segment_info(&bytes).unwrap();
        let uri = format!("{id}/seg-{i:05}.m4s");
        segments.push(MediaSegment {
            uri: uri.clone(),
            start: t,
            duration: info.duration,
            bytes: bytes.len() as u64,
            key_frame_bytes: info.first_sample_end,
        });
        files.insert(uri, bytes);
        t += info.duration;
    }
    let playlist = format!(
        "{id}/{}.m3u8",
        if id.starts_with('v') {
            "video"
        } else {
            "audio"
        }
    );
    let codec = crate::bmff::init_info(&files[&format!("{id}/init.mp4")])
        .unwrap()
        .codec
        .unwrap();
    Track {
        id: id.into(),
        kind,
        codec,
        init: Some(format!("{id}/init.mp4")),
        playlist,
        timescale,
        segments,
    }
}

/// Two video rungs (v1's segment sample counts given), one audio, one subtitle track,
/// written with the HLS and DASH writers.
pub(super) fn package(v1_counts: &[usize]) -> (Package, Files) {
    let mut files = Files::new();
    let video = |w: u16, h: u16, p: u8| {
        init_segment(
            b"vide",
            90000,
            0,
            &visual_entry(b"avc1", w, h, &avcc(p, 0, 0x1f)),
        )
    };
    let v0 = media_track(
        &mut files,
        "v0",
        TrackKind::Video {
            width: 1280,
            height: 720,
            frame_rate: (25, 1),
        },
        video(1280, 720, 0x64),
        90000,
        45000,
        &[4, 4, 3],
        20_000,
    );
    let v1 = media_track(
        &mut files,
        "v1",
        TrackKind::Video {
            width: 640,
            height: 360,
            frame_rate: (25, 1),
        },
        video(640, 360, 0x4d),
        90000,
        45000,
        v1_counts,
        8_000,
    );
    let a0 = media_track(
        &mut files,
        "a0",
        TrackKind::Audio {
            language: "eng".into(),
            channels: 2,
            sample_rate: 48000,
        },
        init_segment(
            b"soun",
            48000,
            0,
            &audio_entry(2, 48000, &esds(&[0x11, 0x90])),
        ),
        48000,
        24000,
        &[4, 4, 3],
        1_000,
    );
    let cues = [vtt::Cue {
        start: 1.0,
        end: 3.0,
        text: "hello".into(),
    }];
    let texts = vtt::segment_files(&cues, &[0.0, 2.0, 4.0, 5.5], 900_000);
    let mut subs = Vec::new();
    for (i, text) in texts.into_iter().enumerate() {
        let uri = format!("s0/seg-{i:05}.vtt");
        let (start, duration) = [(0, 2000), (2000, 2000), (4000, 1500)][i];
        subs.push(MediaSegment {
            uri: uri.clone(),
            start,
            duration,
            bytes: text.len() as u64,
            key_frame_bytes: None,
        });
        files.insert(uri, text.into_bytes());
    }
    let s0 = Track {
        id: "s0".into(),
        kind: TrackKind::Subtitles {
            language: "fra".into(),
            file: None,
        },
        codec: "wvtt".into(),
        init: None,
        playlist: "s0/subs.m3u8".into(),
        timescale: 1000,
        segments: subs,
    };
    let mut pkg = Package {
        tracks: vec![v0, v1, a0, s0],
        hls_master: Some("master.m3u8".into()),
        dash_manifest: Some("manifest.mpd".into()),
        ts: false,
        segment_seconds: 2.0,
        tiles: None,
    };
    for t in &pkg.tracks {
        files.insert(
            t.playlist.clone(),
            hls::media_playlist(t, false).into_bytes(),
        );
    }
    let iframes = hls::iframe_playlist(&pkg.tracks[0], false).unwrap();
    files.insert("v0/iframes.m3u8".into(), iframes.into_bytes());
    let master = hls::master_playlist(&pkg, &[(0, "v0/iframes.m3u8".into())]);
    files.insert("master.m3u8".into(), master.into_bytes());
    let whole = vtt::whole_file(&cues);
    pkg.tracks[3].segments = vec![MediaSegment {
        uri: "s0/subs.vtt".into(),
        start: 0,
        duration: 5500,
        bytes: whole.len() as u64,
        key_frame_bytes: None,
    }];
    files.insert("s0/subs.vtt".into(), whole.into_bytes());
    // Two sheets of 2x2 one-second tiles cover the 5.5 s.
    pkg.tiles = Some(TileTrack {
        template: "thumbnails/sprite-$Number%04d$.jpg".into(),
        start_number: 0,
        mime: "image/jpeg".into(),
        tile: (32, 18),
        columns: 2,
        rows: 2,
        interval: 1.0,
        largest_bytes: 500,
    });
    for n in 0..2 {
        let jpeg = [&[0xFF, 0xD8, 0xFF, 0xE0][..], &[0; 496]].concat();
        files.insert(format!("thumbnails/sprite-{n:04}.jpg"), jpeg);
    }
    files.insert("manifest.mpd".into(), dash::mpd(&pkg).into_bytes());
    (pkg, files)
}

pub(super) fn hls_problems(files: &Files, expected: Option<&[String]>) -> Vec<String> {
    validate_hls("master.m3u8", &|p| files.get(p).cloned(), expected)
}

pub(super) fn mpd_problems(files: &Files) -> Vec<String> {
    validate_mpd("manifest.mpd", &|p| files.get(p).cloned())
}

pub(super) fn edit(files: &mut Files, path: &str, from: &str, to: &str) {
    let text = String::from_utf8(files[path].clone()).unwrap();
    assert!(text.contains(from), "{path} lacks {from:?}:\n{text}");
    files.insert(path.into(), text.replacen(from, to, 1).into_bytes());
}

pub(super) fn has(problems: &[String], parts: &[&str]) -> bool {
    problems.iter().any(|p| parts.iter().all(|s| p.contains(s)))
}
