//! The package spec's rules, each refusal naming its field.

use super::*;

fn parse(v: serde_json::Value) -> Result<PackageSpec, String> {
    let spec: PackageSpec = serde_json::from_value(v).map_err(|e| e.to_string())?;
    spec.check().map(|()| spec)
}

#[test]
fn defaults_and_the_auto_word() {
    let s = parse(serde_json::json!({"format": "cmaf"})).unwrap();
    assert_eq!(s.segment_seconds, 6.0);
    assert_eq!(s.ladder, Ladder::Auto(AutoWord::Auto));
    assert_eq!(s.segment_type, SegmentType::Fmp4);
    assert_eq!(s.audio_bitrate(), 128_000);
    assert_eq!(s.subtitles, SubtitleFormat::Webvtt);
    assert_eq!(s, PackageSpec::new(PackageFormat::Cmaf));
    assert!(s.format.has_hls() && s.format.has_dash());
    let s = parse(serde_json::json!({"format": "hls", "ladder": "auto", "segment_type": "ts"}))
        .unwrap();
    assert_eq!(s.segment_type, SegmentType::Ts);
    assert!(parse(serde_json::json!({"format": "hls", "ladder": "automatic"})).is_err());
}

#[test]
fn subtitles_are_webvtt_unless_turned_off() {
    let with = |v: serde_json::Value| {
        parse(serde_json::json!({"format": "hls", "subtitles": v}))
            .unwrap()
            .subtitles
    };
    assert_eq!(with("webvtt".into()), SubtitleFormat::Webvtt);
    assert_eq!(with("none".into()), SubtitleFormat::None);
    // A spec stored when the field was optional and absent.
    assert_eq!(with(serde_json::Value::Null), SubtitleFormat::None);
    assert!(SubtitleFormat::default().carries() && !SubtitleFormat::None.carries());
    let stored = serde_json::to_value(PackageSpec::new(PackageFormat::Dash)).unwrap();
    assert_eq!(stored["subtitles"], "webvtt");
}

#[test]
fn rungs_are_checked_and_named() {
    let s = parse(serde_json::json!({"format": "dash", "ladder": [
        {"height": 720, "bitrate": 3000000, "maxrate": 3300000, "profile": "high"},
        {"height": 360, "crf": 24, "codec": "hevc", "profile": "main"}]}))
    .unwrap();
    let Ladder::Rungs(r) = &s.ladder else {
        panic!("rungs")
    };
    assert_eq!(r[1].codec, Some(VideoCodec::Hevc));
    for (body, says) in [
        (
            serde_json::json!([{"height": 720}]),
            "ladder[0]: give bitrate, crf or target",
        ),
        (
            serde_json::json!([{"height": 720, "crf": 20}, {"height": 1, "crf": 20}]),
            "ladder[1]: height 1",
        ),
        (
            serde_json::json!([{"height": 720, "bitrate": 2000000, "maxrate": 1000000}]),
            "below bitrate",
        ),
        (
            serde_json::json!([{"height": 720, "crf": 20, "profile": "main10"}]),
            "profile \"main10\"",
        ),
        (serde_json::json!([]), "1 to 8 rungs"),
    ] {
        let err = parse(serde_json::json!({"format": "hls", "ladder": body})).unwrap_err();
        assert!(err.contains(says), "{err} lacks {says}");
    }
}

#[test]
fn refusals_name_the_field() {
    for (body, says) in [
        (
            serde_json::json!({"format": "dash", "segment_type": "ts"}),
            "segment_type \"ts\"",
        ),
        (
            serde_json::json!({"format": "hls", "segment_seconds": 0.5}),
            "segment_seconds 0.5",
        ),
        (
            serde_json::json!({"format": "hls", "thumbnails": {"interval": 10}}),
            "thumbnails: interval needs heights",
        ),
        (
            serde_json::json!({"format": "hls", "subtitles": "srt"}),
            "unknown variant",
        ),
        (
            serde_json::json!({"format": "hls", "audio": [{"codec": "opus"}]}),
            "audio[0]: codec",
        ),
        (
            serde_json::json!({"format": "hls", "audio": [{}, {}]}),
            "2 entries",
        ),
        (serde_json::json!({"format": "smooth"}), "unknown variant"),
        (
            serde_json::json!({"format": "hls", "segment_secs": 4}),
            "unknown field",
        ),
    ] {
        let err = parse(body).unwrap_err();
        assert!(err.contains(says), "{err} lacks {says}");
    }
}

#[test]
fn rungs_take_their_own_target_or_the_packages() {
    let s = parse(serde_json::json!({"format": "hls", "target": {"vmaf": 93},
        "ladder": [
            {"height": 720, "target": {"vmaf": 95, "max_crf": 30}, "maxrate": 4000000},
            {"height": 540},
            {"height": 360, "crf": 26},
            {"height": 234, "bitrate": 300000}]}))
    .unwrap();
    let Ladder::Rungs(r) = &s.ladder else {
        panic!("rungs")
    };
    let vmaf = |i: usize| r[i].target_with(s.target).map(|t| t.vmaf);
    // Its own; the package's (no rate given); the package's (the crf its first probe); none
    // for a bitrate rung.
    assert_eq!(
        (vmaf(0), vmaf(1), vmaf(2), vmaf(3)),
        (Some(95.0), Some(93.0), Some(93.0), None)
    );
    for (body, says) in [
        (
            serde_json::json!({"ladder": [{"height": 720, "bitrate": 3000000, "target": {"vmaf": 93}}]}),
            "ladder[0]: a target searches the CRF: give no bitrate with it",
        ),
        (
            serde_json::json!({"ladder": [{"height": 720, "target": {"vmaf": 120}}]}),
            "ladder[0]: target: target VMAF 120",
        ),
        (
            serde_json::json!({"ladder": [{"height": 720, "codec": "hevc",
                "target": {"vmaf": 93, "min_crf": 30, "max_crf": 20}}]}),
            "ladder[0]: target: min rate factor 30",
        ),
        (
            serde_json::json!({"target": {"vmaf": 93, "max_crf": 70}}),
            "target: max rate factor 70",
        ),
        (
            serde_json::json!({"target": {"vmaf": 93, "crf": 20}}),
            "unknown field `crf`",
        ),
    ] {
        let mut spec = body.clone();
        spec["format"] = "hls".into();
        let err = parse(spec).unwrap_err();
        assert!(err.contains(says), "{body}: {err}");
    }
}
