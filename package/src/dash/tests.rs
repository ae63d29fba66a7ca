use super::*;
use proptest::prelude::*;

fn seg(uri: &str, start: u64, duration: u64, bytes: u64) -> MediaSegment {
    MediaSegment {
        uri: uri.into(),
        start,
        duration,
        bytes,
        key_frame_bytes: None,
    }
}

fn track(id: &str, kind: TrackKind, codec: &str, timescale: u32, segs: Vec<MediaSegment>) -> Track {
    Track {
        id: id.into(),
        kind,
        codec: codec.into(),
        init: Some(format!("{id}/init.mp4")),
        playlist: format!("{id}/p.m3u8"),
        timescale,
        segments: segs,
    }
}

fn package() -> Package {
    let v = track(
        "v0",
        TrackKind::Video {
            width: 1280,
            height: 720,
            frame_rate: (25, 1),
        },
        "avc1.64001f",
        90000,
        vec![
            seg("v0/seg-00001.m4s", 0, 180_000, 250_000),
            seg("v0/seg-00002.m4s", 180_000, 180_000, 200_000),
            seg("v0/seg-00003.m4s", 360_000, 90_000, 100_000),
        ],
    );
    let a = track(
        "a0",
        TrackKind::Audio {
            language: "en\"g".into(),
            channels: 6,
            sample_rate: 48000,
        },
        "mp4a.40.2",
        48000,
        vec![
            seg("a0/x.m4s", 0, 96_000, 32_000),
            seg("a0/y.m4s", 96_000, 120_000, 40_000),
        ],
    );
    let mut s = track(
        "s0",
        TrackKind::Subtitles {
            language: "fra".into(),
            file: None,
        },
        "wvtt",
        1000,
        vec![seg("s0/all.vtt", 0, 5000, 500)],
    );
    s.init = None;
    Package {
        tracks: vec![v, a, s],
        hls_master: None,
        dash_manifest: Some("manifest.mpd".into()),
        ts: false,
        segment_seconds: 2.0,
        tiles: None,
    }
}

fn tiles() -> TileTrack {
    TileTrack {
        template: "thumbnails/sprite-$Number%04d$.jpg".into(),
        start_number: 0,
        mime: "image/jpeg".into(),
        tile: (160, 90),
        columns: 5,
        rows: 4,
        interval: 2.0,
        largest_bytes: 100_000,
    }
}

#[test]
fn mpd_is_exact() {
    assert_eq!(
        mpd(&package()),
        r#"<?xml version="1.0" encoding="UTF-8"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011" type="static" mediaPresentationDuration="PT5.000S" minBufferTime="PT2.500S">
  <Period id="0" start="PT0.000S">
    <AdaptationSet id="0" contentType="video" mimeType="video/mp4" segmentAlignment="true" startWithSAP="1" maxWidth="1280" maxHeight="720">
      <Representation id="v0" bandwidth="1000000" codecs="avc1.64001f" width="1280" height="720" frameRate="25">
        <SegmentTemplate timescale="90000" initialization="v0/init.mp4" media="v0/seg-$Number%05d$.m4s" startNumber="1">
          <SegmentTimeline>
            <S t="0" d="180000" r="1"/>
            <S d="90000"/>
          </SegmentTimeline>
        </SegmentTemplate>
      </Representation>
    </AdaptationSet>
    <AdaptationSet id="1" contentType="audio" mimeType="audio/mp4" lang="en&quot;g" segmentAlignment="true" startWithSAP="1">
      <Representation id="a0" bandwidth="128000" codecs="mp4a.40.2" audioSamplingRate="48000">
        <AudioChannelConfiguration schemeIdUri="urn:mpeg:dash:23003:3:audio_channel_configuration:2011" value="6"/>
        <SegmentList timescale="48000">
          <Initialization sourceURL="a0/init.mp4"/>
          <SegmentTimeline>
            <S t="0" d="96000"/>
            <S d="120000"/>
          </SegmentTimeline>
          <SegmentURL media="a0/x.m4s"/>
          <SegmentURL media="a0/y.m4s"/>
        </SegmentList>
      </Representation>
    </AdaptationSet>
    <AdaptationSet id="2" contentType="text" mimeType="text/vtt" lang="fra">
      <Representation id="s0" bandwidth="800" codecs="wvtt">
        <BaseURL>s0/all.vtt</BaseURL>
      </Representation>
    </AdaptationSet>
  </Period>
</MPD>
"#
    );
}

#[test]
fn mpd_in_a_subdirectory_relativises_uris() {
    let mut p = package();
    p.dash_manifest = Some("dash/manifest.mpd".into());
    let text = mpd(&p);
    assert!(
        text.contains(r#"initialization="../v0/init.mp4" media="../v0/seg-$Number%05d$.m4s""#),
        "{text}"
    );
    assert!(text.contains("<BaseURL>../s0/all.vtt</BaseURL>"));
}

#[test]
fn sprite_sheets_are_a_dash_if_thumbnail_set() {
    let mut p = package();
    p.tiles = Some(tiles());
    let text = mpd(&p);
    let set = r#"    <AdaptationSet id="3" contentType="image" mimeType="image/jpeg">
      <SegmentTemplate media="thumbnails/sprite-$Number%04d$.jpg" timescale="1000" duration="40000" startNumber="0"/>
      <Representation id="thumbnails" bandwidth="20000" width="800" height="360">
        <EssentialProperty schemeIdUri="http://dashif.org/thumbnail_tile" value="5x4"/>
      </Representation>
    </AdaptationSet>
  </Period>"#;
    assert!(text.contains(set), "{text}");
    // The manifest's own folder is where the template counts from.
    p.dash_manifest = Some("dash/manifest.mpd".into());
    assert!(mpd(&p).contains(r#"media="../thumbnails/sprite-$Number%04d$.jpg""#));
    // 0.5 s tiles in a 1x1 grid: 500 ms a sheet; a tiny sheet still declares a bandwidth.
    let mut t = tiles();
    (t.columns, t.rows, t.interval, t.largest_bytes) = (1, 1, 0.5, 0);
    assert_eq!((t.sheet_millis(), t.bandwidth()), (500, 1));
}

#[test]
fn timeline_marks_gaps_and_overlaps_with_t() {
    let segs = [
        seg("a", 100, 10, 1),
        seg("b", 110, 10, 1),
        seg("c", 125, 10, 1),
        seg("d", 130, 10, 1),
        seg("e", 140, 5, 1),
    ];
    assert_eq!(
        timeline(&segs),
        vec![
            TimelineEntry {
                t: Some(100),
                d: 10,
                r: 1
            },
            TimelineEntry {
                t: Some(125),
                d: 10,
                r: 0
            },
            TimelineEntry {
                t: Some(130),
                d: 10,
                r: 0
            },
            TimelineEntry {
                t: None,
                d: 5,
                r: 0
            },
        ]
    );
}

fn uris(uris: &[&str]) -> Track {
    let segs = uris
        .iter()
        .enumerate()
        .map(|(i, u)| seg(u, i as u64, 1, 1))
        .collect();
    track(
        "v",
        TrackKind::Subtitles {
            language: "x".into(),
            file: None,
        },
        "wvtt",
        1,
        segs,
    )
}

#[test]
fn media_template_needs_one_consecutive_pattern() {
    assert_eq!(
        media_template(&uris(&["v/seg-007.m4s", "v/seg-008.m4s"])),
        Some(("v/seg-$Number%03d$.m4s".into(), 7))
    );
    assert_eq!(
        media_template(&uris(&["seg-9.ts", "seg-10.ts"])),
        Some(("seg-$Number$.ts".into(), 9))
    );
    assert_eq!(
        media_template(&uris(&["v/seg-99.m4s", "v/seg-100.m4s"])),
        Some(("v/seg-$Number$.m4s".into(), 99))
    );
    assert_eq!(
        media_template(&uris(&["v/seg-099.m4s", "v/seg-100.m4s"])),
        Some(("v/seg-$Number%03d$.m4s".into(), 99))
    );
    assert_eq!(
        media_template(&uris(&["v/seg-01.m4s", "v/seg-03.m4s"])),
        None
    );
    assert_eq!(
        media_template(&uris(&["v/seg-01.m4s", "w/seg-02.m4s"])),
        None
    );
    assert_eq!(
        media_template(&uris(&["v/seg-01.m4s", "v/seg-02.mp4"])),
        None
    );
    assert_eq!(
        media_template(&uris(&["v/seg-01.m4s", "v/seg-002.m4s"])),
        None
    );
    assert_eq!(media_template(&uris(&["v/chunk-01.m4s"])), None);
    assert_eq!(media_template(&uris(&[])), None);
}

#[test]
fn escapes_and_durations() {
    assert_eq!(xml_escape(r#"a&b<c>"d'"#), "a&amp;b&lt;c&gt;&quot;d&apos;");
    assert_eq!(xs_duration(60.0), "PT60.000S");
    assert_eq!(xs_duration(-1.0), "PT0.000S");
    assert_eq!(frame_rate((30000, 1001)), "30000/1001");
}

proptest! {
    #[test]
    fn timeline_expands_back_to_the_segments(parts in proptest::collection::vec((0u64..3, 1u64..4), 1..30)) {
        let mut t = 1000;
        let mut segs = Vec::new();
        for (gap, d) in parts {
            t += gap;
            segs.push(seg("x", t, d * 100, 1));
            t += d * 100;
        }
        let mut expanded = Vec::new();
        let mut now = 0;
        for e in timeline(&segs) {
            now = e.t.unwrap_or(now);
            for _ in 0..=e.r {
                expanded.push((now, e.d));
                now += e.d;
            }
        }
        let want: Vec<(u64, u64)> = segs.iter().map(|s| (s.start, s.duration)).collect();
        prop_assert_eq!(expanded, want);
    }
}
