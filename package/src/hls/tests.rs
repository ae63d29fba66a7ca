use super::*;
use crate::model::MediaSegment;
use proptest::prelude::*;

fn seg(uri: &str, start: u64, duration: u64, bytes: u64, key: Option<u64>) -> MediaSegment {
    MediaSegment {
        uri: uri.into(),
        start,
        duration,
        bytes,
        key_frame_bytes: key,
    }
}

fn video(id: &str, w: u32, h: u32, bytes: [u64; 2]) -> Track {
    Track {
        id: id.into(),
        kind: TrackKind::Video {
            width: w,
            height: h,
            frame_rate: (30000, 1001),
        },
        codec: "avc1.64001f".into(),
        init: Some(format!("{id}/init.mp4")),
        playlist: format!("{id}/video.m3u8"),
        timescale: 90000,
        segments: vec![
            seg(
                &format!("{id}/seg-00000.m4s"),
                0,
                540_000,
                bytes[0],
                Some(bytes[0] / 10),
            ),
            seg(
                &format!("{id}/seg-00001.m4s"),
                540_000,
                225_000,
                bytes[1],
                Some(bytes[1] / 10),
            ),
        ],
    }
}

fn package() -> Package {
    let audio = |id: &str, lang: &str, bytes: u64| Track {
        id: id.into(),
        kind: TrackKind::Audio {
            language: lang.into(),
            channels: 2,
            sample_rate: 48000,
        },
        codec: "mp4a.40.2".into(),
        init: Some(format!("{id}/init.mp4")),
        playlist: format!("{id}/audio.m3u8"),
        timescale: 48000,
        segments: vec![
            seg(&format!("{id}/seg-00000.m4s"), 0, 288_000, bytes, None),
            seg(
                &format!("{id}/seg-00001.m4s"),
                288_000,
                120_000,
                bytes / 2,
                None,
            ),
        ],
    };
    Package {
        tracks: vec![
            video("v0", 1280, 720, [1_500_000, 500_000]),
            video("v1", 640, 360, [600_000, 200_000]),
            audio("a0", "eng", 96_000),
            audio("a1", "eng", 48_000),
            Track {
                id: "s0".into(),
                kind: TrackKind::Subtitles {
                    language: "fra".into(),
                    file: None,
                },
                codec: "wvtt".into(),
                init: None,
                playlist: "s0/subs.m3u8".into(),
                timescale: 1000,
                segments: vec![seg("s0/seg-00000.vtt", 0, 6000, 100, None)],
            },
        ],
        hls_master: Some("master.m3u8".into()),
        dash_manifest: None,
        ts: false,
        segment_seconds: 6.0,
        tiles: None,
    }
}

#[test]
fn relative_paths_cover_same_dir_subdirs_and_parents() {
    assert_eq!(relative("v0", "v0/seg-1.m4s"), "seg-1.m4s");
    assert_eq!(relative("", "v0/seg-1.m4s"), "v0/seg-1.m4s");
    assert_eq!(relative("hls/v0", "init/v0.mp4"), "../../init/v0.mp4");
    assert_eq!(relative("hls/v0", "hls/media/x.ts"), "../media/x.ts");
    assert_eq!(relative("a/./b/", "a/b/c/d.ts"), "c/d.ts");
    assert_eq!(resolve("hls/v0", "../../init/v0.mp4"), "init/v0.mp4");
    assert_eq!(resolve("", "v0/x.m3u8"), "v0/x.m3u8");
    assert_eq!(resolve("v0", "/abs/x.ts"), "abs/x.ts");
    assert_eq!(dir_of("v0/video.m3u8"), "v0");
    assert_eq!(dir_of("master.m3u8"), "");
}

#[test]
fn media_playlist_is_exact() {
    let p = package();
    assert_eq!(
        media_playlist(&p.tracks[0], false),
        "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:0\n\
         #EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-INDEPENDENT-SEGMENTS\n#EXT-X-MAP:URI=\"init.mp4\"\n\
         #EXTINF:6.000000,\nseg-00000.m4s\n#EXTINF:2.500000,\nseg-00001.m4s\n#EXT-X-ENDLIST\n"
    );
    let subs = media_playlist(&p.tracks[4], false);
    assert!(subs.starts_with("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:6\n"));
    assert!(!subs.contains("EXT-X-MAP"));
}

#[test]
fn target_duration_rounds_to_nearest_and_is_at_least_one() {
    let mut t = video("v0", 2, 2, [1, 1]);
    t.segments[0].duration = 6 * 90000 + 45_000; // 6.5 s rounds to 7
    assert_eq!(target_duration(&t), 7);
    t.segments[0].duration = 6 * 90000 + 44_999;
    assert_eq!(target_duration(&t), 6);
    t.segments = vec![seg("x", 0, 9000, 1, None)];
    assert_eq!(target_duration(&t), 1);
}

#[test]
fn iframe_playlist_lists_key_frame_ranges() {
    let p = package();
    assert_eq!(
        iframe_playlist(&p.tracks[1], true).as_deref(),
        Some(
            "#EXTM3U\n#EXT-X-VERSION:4\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:0\n\
             #EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-I-FRAMES-ONLY\n#EXT-X-MAP:URI=\"init.mp4\"\n\
             #EXTINF:6.000000,\n#EXT-X-BYTERANGE:60000@0\nseg-00000.m4s\n\
             #EXTINF:2.500000,\n#EXT-X-BYTERANGE:20000@0\nseg-00001.m4s\n#EXT-X-ENDLIST\n"
        )
    );
    assert_eq!(iframe_playlist(&p.tracks[2], false), None);
    let mut t = p.tracks[0].clone();
    t.segments[1].key_frame_bytes = None;
    assert_eq!(iframe_playlist(&t, false), None);
    assert_eq!(iframe_bandwidth(&p.tracks[0]), 200_000);
}

#[test]
fn master_playlist_is_exact() {
    let p = package();
    // v0 peak: 1_500_000 * 8 / 6 = 2_000_000; audio a0 peak: 48_000 * 8 / 2.5 = 153_600.
    // v0 average: 2_000_000 * 8 / 8.5 = 1_882_353 (ceil); a0 average: 144_000 * 8 / 8.5 = 135_530.
    let text = master_playlist(&p, &[(0, "v0/iframes.m3u8".into())]);
    assert_eq!(
        text,
        "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-INDEPENDENT-SEGMENTS\n\
         #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"audio\",NAME=\"eng\",LANGUAGE=\"eng\",DEFAULT=YES,AUTOSELECT=YES,CHANNELS=\"2\",URI=\"a0/audio.m3u8\"\n\
         #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"audio\",NAME=\"eng (a1)\",LANGUAGE=\"eng\",DEFAULT=NO,AUTOSELECT=YES,CHANNELS=\"2\",URI=\"a1/audio.m3u8\"\n\
         #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"subs\",NAME=\"fra\",LANGUAGE=\"fra\",DEFAULT=NO,AUTOSELECT=YES,FORCED=NO,URI=\"s0/subs.m3u8\"\n\
         #EXT-X-STREAM-INF:BANDWIDTH=2153600,AVERAGE-BANDWIDTH=2017883,CODECS=\"avc1.64001f,mp4a.40.2\",RESOLUTION=1280x720,FRAME-RATE=29.970,AUDIO=\"audio\",SUBTITLES=\"subs\"\n\
         v0/video.m3u8\n\
         #EXT-X-STREAM-INF:BANDWIDTH=953600,AVERAGE-BANDWIDTH=888472,CODECS=\"avc1.64001f,mp4a.40.2\",RESOLUTION=640x360,FRAME-RATE=29.970,AUDIO=\"audio\",SUBTITLES=\"subs\"\n\
         v1/video.m3u8\n\
         #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=200000,CODECS=\"avc1.64001f\",RESOLUTION=1280x720,URI=\"v0/iframes.m3u8\"\n"
    );
}

#[test]
fn master_playlist_in_a_subdirectory_points_up() {
    let mut p = package();
    p.hls_master = Some("hls/master.m3u8".into());
    p.tracks.truncate(1);
    let text = master_playlist(&p, &[]);
    assert!(
        text.ends_with("FRAME-RATE=29.970\n../v0/video.m3u8\n"),
        "{text}"
    );
}

#[test]
fn parser_reads_back_written_playlists() {
    let p = package();
    let master = parse_playlist(&master_playlist(&p, &[(0, "v0/iframes.m3u8".into())])).unwrap();
    assert_eq!(master.variants.len(), 2);
    let v = &master.variants[0];
    assert_eq!(v.uri, "v0/video.m3u8");
    assert_eq!(v.tag.attr("CODECS"), Some("avc1.64001f,mp4a.40.2"));
    assert_eq!(
        v.tag
            .attribute("BANDWIDTH")
            .map(|a| (a.value.as_str(), a.quoted)),
        Some(("2153600", false))
    );
    assert_eq!(master.tags_named("EXT-X-MEDIA").count(), 3);
    let iframe = master.tag("EXT-X-I-FRAME-STREAM-INF").unwrap();
    assert_eq!(
        (iframe.line, iframe.attr("URI")),
        (11, Some("v0/iframes.m3u8"))
    );
    let media = parse_playlist(&iframe_playlist(&p.tracks[0], false).unwrap()).unwrap();
    assert_eq!(
        media.tag("EXT-X-TARGETDURATION").map(|t| t.value.as_str()),
        Some("6")
    );
    assert_eq!(media.segments.len(), 2);
    assert_eq!(
        media.segments[1],
        PlaylistSegment {
            line: 13,
            duration: 2.5,
            byterange: Some((50_000, Some(0))),
            uri: "seg-00001.m4s".into(),
            map: Some("init.mp4".into()),
        }
    );
}

#[test]
fn parser_rejects_malformed_text() {
    assert_eq!(
        parse_playlist("#EXT-X-VERSION:3\n"),
        Err("line 1: the first line is not #EXTM3U".into())
    );
    assert_eq!(
        parse_playlist("#EXTM3U\nseg.ts\n"),
        Err("line 2: URI \"seg.ts\" without EXTINF or EXT-X-STREAM-INF".into())
    );
    assert_eq!(
        parse_playlist("#EXTM3U\n#EXTINF:x,\na.ts\n"),
        Err("line 2: bad EXTINF duration \"x\"".into())
    );
    assert_eq!(
        parse_playlist("#EXTM3U\n#EXT-X-MAP:URI=\"a.mp4\n"),
        Err("line 2: unterminated quoted string for URI".into())
    );
    assert_eq!(
        parse_playlist("#EXTM3U\n#EXTINF:2,\n"),
        Err("the last EXTINF / EXT-X-STREAM-INF has no URI".into())
    );
}

proptest! {
    #[test]
    fn relative_then_resolve_round_trips(
        from in proptest::collection::vec("[a-c]{1,2}", 0..4),
        to in proptest::collection::vec("[a-c]{1,2}", 1..4),
    ) {
        let from = from.join("/");
        let to = to.join("/");
        prop_assert_eq!(resolve(&from, &relative(&from, &to)), to);
    }

    #[test]
    fn quoted_attributes_with_commas_parse(value in "[a-z0-9.,= ]{0,20}", n in 0u64..1_000_000) {
        let text = format!("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH={n},CODECS=\"{value}\"\nv.m3u8\n");
        let p = parse_playlist(&text).unwrap();
        prop_assert_eq!(p.variants[0].tag.attr("CODECS"), Some(value.as_str()));
        prop_assert_eq!(p.variants[0].tag.attr("BANDWIDTH").map(str::to_string), Some(n.to_string()));
    }

    #[test]
    fn parser_never_panics(text in "#EXTM3U\n[#A-Z0-9:=,\"@.\n-]{0,200}") {
        let _ = parse_playlist(&text);
    }
}
