use super::*;

fn spec(v: serde_json::Value) -> Result<ThumbnailSpec, String> {
    let s: ThumbnailSpec = serde_json::from_value(v).map_err(|e| e.to_string())?;
    s.check().map(|()| s)
}

const HD: Picture = Picture {
    width: 1920,
    height: 1080,
    aspect: 16.0 / 9.0,
    seconds: 61.0,
};

#[test]
fn sizes_keep_the_display_aspect_and_never_upscale() {
    assert_eq!(image_size(HD, 180), (320, 180));
    assert_eq!(image_size(HD, 2160), (1920, 1080));
    // Anamorphic 720x576 shown at 16:9.
    let pal = Picture {
        width: 720,
        height: 576,
        aspect: 16.0 / 9.0,
        seconds: 10.0,
    };
    assert_eq!(image_size(pal, 90), (160, 90));
    assert_eq!(image_size(pal, 91), (160, 90));
}

#[test]
fn interval_counts_stop_before_the_end() {
    assert_eq!(interval_count(61.0, 10.0), 7);
    assert_eq!(interval_count(60.0, 10.0), 6);
    assert_eq!(interval_count(0.2, 10.0), 1);
    assert_eq!(interval_count(30.000000001, 10.0), 3);
}

#[test]
fn the_plan_names_every_image_and_lays_out_the_sheets() {
    let s = spec(serde_json::json!({
        "poster": {"time": 5}, "interval": 10, "heights": [180, 360],
        "sprite": {"height": 90, "columns": 2, "rows": 2}
    }))
    .unwrap();
    let p = plan(&s, HD);
    // Poster + 7 interval shots.
    assert_eq!(p.shots.len(), 8);
    assert_eq!(p.shots[1].time, 5.0);
    assert_eq!(p.shots[1].images[0].1, "poster.jpg");
    assert_eq!(p.shots[1].images[0].0.height, 1080);
    let at20 = p.shots.iter().find(|s| s.time == 20.0).unwrap();
    let names: Vec<&str> = at20.images.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "thumbnails/180p/00002.jpg",
            "thumbnails/360p/00002.jpg",
            ".tiles/00002.jpg"
        ]
    );
    assert_eq!(p.tile, (160, 90));
    assert_eq!(p.sheets.len(), 2);
    assert_eq!(
        p.sheets[1].tiles,
        [".tiles/00004.jpg", ".tiles/00005.jpg", ".tiles/00006.jpg"]
    );
    let (rel, text) = p.vtt.clone().unwrap();
    assert_eq!(rel, "thumbnails/thumbnails.vtt");
    assert!(text
        .starts_with("WEBVTT\n\n00:00:00.000 --> 00:00:10.000\nsprite-0000.jpg#xywh=0,0,160,90\n"));
    assert!(text.contains("00:00:30.000 --> 00:00:40.000\nsprite-0000.jpg#xywh=160,90,160,90\n"));
    assert!(text.ends_with("00:01:00.000 --> 00:01:01.000\nsprite-0001.jpg#xywh=0,90,160,90\n\n"));
    // The MPD's thumbnail track names the same sheets and covers 40 s a sheet.
    let sizes = |rel: &str| (rel == "thumbnails/sprite-0001.jpg").then_some(4000);
    let t = tile_track(&s, &p, sizes).unwrap();
    let first = t
        .template
        .replace("$Number%04d$", &format!("{:04}", t.start_number));
    assert_eq!(first, p.sheets[0].rel);
    assert_eq!((t.sheet_millis(), t.largest_bytes), (40_000, 4000));
    assert_eq!(
        (t.mime.as_str(), t.tile, t.columns, t.rows),
        ("image/jpeg", (160, 90), 2, 2)
    );
}

#[test]
fn a_late_poster_is_the_last_frame_and_webp_names_its_files() {
    let s =
        spec(serde_json::json!({"format": "webp", "poster": {"time": 99, "height": 360}})).unwrap();
    let p = plan(&s, HD);
    assert_eq!(p.shots.len(), 1);
    assert_eq!(p.shots[0].time, 61.0);
    assert_eq!(p.shots[0].images[0].1, "poster.webp");
    assert_eq!(p.shots[0].images[0].0.format, ImageFormat::Webp);
    assert!(p.sheets.is_empty() && p.vtt.is_none());
    assert_eq!(tile_track(&s, &p, |_| None), None);
}

#[test]
fn refusals_name_the_field() {
    for (body, says) in [
        (serde_json::json!({}), "poster, an interval"),
        (
            serde_json::json!({"interval": 10}),
            "interval needs heights",
        ),
        (serde_json::json!({"heights": [180]}), "need an interval"),
        (
            serde_json::json!({"interval": 0.1, "heights": [180]}),
            "interval 0.1",
        ),
        (
            serde_json::json!({"interval": 5, "heights": [8]}),
            "heights[0] 8",
        ),
        (
            serde_json::json!({"interval": 5, "heights": [90, 180, 270, 360, 480]}),
            "at most 4",
        ),
        (
            serde_json::json!({"poster": {"time": -1}}),
            "poster.time -1",
        ),
        (serde_json::json!({"poster": {}, "quality": 0}), "quality 0"),
        (
            serde_json::json!({"interval": 5, "sprite": {"columns": 0}}),
            "sprite.columns 0",
        ),
        (
            serde_json::json!({"interval": 5, "sprite": {"height": 4}}),
            "sprite.height 4",
        ),
        (
            serde_json::json!({"poster": {}, "format": "gif"}),
            "unknown variant",
        ),
        (
            serde_json::json!({"poster": {}, "every": 5}),
            "unknown field",
        ),
    ] {
        let err = spec(body.clone()).unwrap_err();
        assert!(err.contains(says), "{body}: {err} lacks {says}");
    }
}
