use super::fixture::*;
use super::*;
use crate::bmff::test_boxes::*;
use proptest::prelude::*;

#[test]
fn a_written_package_is_valid() {
    let (pkg, files) = package(&[4, 4, 3]);
    assert_eq!(hls_problems(&files, None), Vec::<String>::new());
    assert_eq!(mpd_problems(&files), Vec::<String>::new());
    let codecs: Vec<String> = ["avc1.64001f", "avc1.4d001f", "mp4a.40.2"]
        .map(String::from)
        .to_vec();
    assert_eq!(hls_problems(&files, Some(&codecs)), Vec::<String>::new());
    assert_eq!(pkg.tracks[0].segments[2].duration, 135_000);
}

#[test]
fn a_missing_segment_is_reported_in_both_manifests() {
    let (_, mut files) = package(&[4, 4, 3]);
    files.remove("v1/seg-00001.m4s");
    let hls = hls_problems(&files, None);
    assert!(
        has(
            &hls,
            &["v1/seg-00001.m4s: missing (listed in v1/video.m3u8)"]
        ),
        "{hls:#?}"
    );
    let mpd = mpd_problems(&files);
    assert_eq!(
        mpd,
        vec![
            "v1/seg-00001.m4s: missing (segment 1 of Representation \"v1\" in manifest.mpd)"
                .to_string()
        ]
    );
}

#[test]
fn a_too_small_bandwidth_is_reported() {
    let (_, mut files) = package(&[4, 4, 3]);
    let master = String::from_utf8(files["master.m3u8"].clone()).unwrap();
    let bw = master
        .split("BANDWIDTH=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .to_string();
    edit(
        &mut files,
        "master.m3u8",
        &format!("BANDWIDTH={bw},"),
        "BANDWIDTH=1000,",
    );
    let p = hls_problems(&files, None);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(
        p[0].starts_with(
            "master.m3u8 line 6: BANDWIDTH=1000 of v0/video.m3u8 is below the measured peak "
        ),
        "{p:#?}"
    );
}

#[test]
fn a_wrong_codecs_entry_is_reported() {
    let (_, mut files) = package(&[4, 4, 3]);
    edit(
        &mut files,
        "master.m3u8",
        "CODECS=\"avc1.64001f,",
        "CODECS=\"avc1.640028,",
    );
    let p = hls_problems(&files, None);
    assert_eq!(
        p,
        vec!["master.m3u8 line 6: CODECS \"avc1.640028,mp4a.40.2\" of v0/video.m3u8 lacks \"avc1.64001f\", the codec its init segment declares".to_string()]
    );
    let (_, files) = package(&[4, 4, 3]);
    let only: Vec<String> = vec!["avc1.64001f".into(), "mp4a.40.2".into()];
    let p = hls_problems(&files, Some(&only));
    assert!(
        has(
            &p,
            &["master.m3u8 line 8: CODECS entry \"avc1.4d001f\" is not one of"]
        ),
        "{p:#?}"
    );
    let mut files = files;
    edit(
        &mut files,
        "manifest.mpd",
        "codecs=\"avc1.4d001f\"",
        "codecs=\"avc1.4d0028\"",
    );
    let p = mpd_problems(&files);
    assert_eq!(
        p,
        vec!["manifest.mpd: Representation \"v1\": codecs \"avc1.4d0028\" but its init segment v1/init.mp4 declares \"avc1.4d001f\"".to_string()]
    );
}

#[test]
fn a_too_small_target_duration_is_reported() {
    let (_, mut files) = package(&[4, 4, 3]);
    edit(
        &mut files,
        "v0/video.m3u8",
        "#EXT-X-TARGETDURATION:2",
        "#EXT-X-TARGETDURATION:1",
    );
    let p = hls_problems(&files, None);
    assert_eq!(p.len(), 3, "{p:#?}");
    assert_eq!(
        p[0],
        "v0/video.m3u8: EXT-X-TARGETDURATION 1 is below the EXTINF 2.000000 of seg-00000.m4s rounded to the nearest integer (RFC 8216 4.3.3.1)"
    );
}

#[test]
fn a_gap_in_tfdt_is_reported() {
    let (_, mut files) = package(&[4, 4, 3]);
    let mut s = samples(3, 45000, 20_000);
    s[0].size = 80_000;
    files.insert("v0/seg-00002.m4s".into(), media_segment(3, 1, 369_000, &s));
    let p = hls_problems(&files, None);
    assert!(
        has(&p, &["v0/video.m3u8: seg-00002.m4s starts at decode time 369000 (tfdt) but seg-00001.m4s ends at 360000: a gap"]),
        "{p:#?}"
    );
    let p = mpd_problems(&files);
    assert_eq!(
        p,
        vec!["v0/seg-00002.m4s: tfdt 369000 but the SegmentTimeline of Representation \"v0\" in manifest.mpd lists it at t=360000".to_string()]
    );
}

#[test]
fn misaligned_renditions_are_reported() {
    let (_, files) = package(&[5, 3, 3]);
    let p = hls_problems(&files, None);
    assert_eq!(
        p,
        vec!["v1/video.m3u8: segment 0 lasts 2.500000 s but 2.000000 s in v0/video.m3u8 (renditions not aligned)".to_string()]
    );
    let (_, files) = package(&[4, 4, 1, 2]);
    let p = hls_problems(&files, None);
    assert!(
        has(
            &p,
            &["v1/video.m3u8: 4 segments but v0/video.m3u8 has 3 (renditions not aligned)"]
        ),
        "{p:#?}"
    );
}

#[test]
fn broken_master_and_media_playlists_are_reported() {
    let (_, mut files) = package(&[4, 4, 3]);
    edit(
        &mut files,
        "master.m3u8",
        "#EXT-X-INDEPENDENT-SEGMENTS\n",
        "",
    );
    edit(&mut files, "master.m3u8", ",FRAME-RATE=25.000", "");
    edit(&mut files, "a0/audio.m3u8", "#EXT-X-ENDLIST\n", "");
    edit(&mut files, "a0/audio.m3u8", "#EXT-X-MEDIA-SEQUENCE:0\n", "");
    let p = hls_problems(&files, None);
    assert_eq!(
        p,
        vec![
            "master.m3u8: no EXT-X-INDEPENDENT-SEGMENTS".to_string(),
            "a0/audio.m3u8: no EXT-X-MEDIA-SEQUENCE".to_string(),
            "a0/audio.m3u8: no EXT-X-ENDLIST (a VOD playlist must end with it)".to_string(),
            "master.m3u8 line 5: EXT-X-STREAM-INF has no FRAME-RATE".to_string(),
        ]
    );
    assert_eq!(
        validate_hls("nope.m3u8", &|p| files.get(p).cloned(), None),
        vec!["nope.m3u8: missing (referenced by the package)".to_string()]
    );
}

#[test]
fn broken_mpds_are_reported() {
    let (_, mut files) = package(&[4, 4, 3]);
    edit(
        &mut files,
        "manifest.mpd",
        " mediaPresentationDuration=\"PT5.500S\"",
        "",
    );
    edit(
        &mut files,
        "manifest.mpd",
        "<S t=\"0\" d=\"180000\" r=\"1\"/>",
        "<S t=\"0\" d=\"180000\"/>\n<S t=\"189000\" d=\"180000\"/>",
    );
    let p = mpd_problems(&files);
    assert!(
        has(
            &p,
            &["manifest.mpd: MPD has no valid mediaPresentationDuration"]
        ),
        "{p:#?}"
    );
    assert!(has(&p, &["manifest.mpd: Representation \"v0\": S t=189000 leaves a gap after the previous segment ending at 180000"]), "{p:#?}");
    files.insert("manifest.mpd".into(), b"<MPD".to_vec());
    assert!(mpd_problems(&files)[0].starts_with("manifest.mpd: not well-formed XML"));
}

#[test]
fn thumbnail_sheets_are_checked_against_the_presentation() {
    let (_, files) = package(&[4, 4, 3]);
    let mpd = String::from_utf8(files["manifest.mpd"].clone()).unwrap();
    assert!(mpd.contains(r#"value="2x2""#), "{mpd}");
    // A sheet short: the template names it for the 5.5 s.
    let mut f = files.clone();
    f.remove("thumbnails/sprite-0001.jpg");
    assert_eq!(
        mpd_problems(&f),
        vec!["thumbnails/sprite-0001.jpg: missing (sheet 1 of image Representation \"thumbnails\" in manifest.mpd)".to_string()]
    );
    // A WebP file where the set says JPEG.
    let mut f = files.clone();
    f.insert(
        "thumbnails/sprite-0000.jpg".into(),
        b"RIFF\0\0\0\0WEBPVP8 ".to_vec(),
    );
    assert!(has(
        &mpd_problems(&f),
        &["sprite-0000.jpg: not a image/jpeg file"]
    ));
    // A grid the sheet size does not divide, and a set without the grid.
    let mut f = files.clone();
    edit(&mut f, "manifest.mpd", r#"value="2x2""#, r#"value="3x2""#);
    assert!(has(
        &mpd_problems(&f),
        &["64x36 does not divide into a 3x2 grid"]
    ));
    let mut f = files;
    edit(
        &mut f,
        "manifest.mpd",
        "http://dashif.org/thumbnail_tile",
        "urn:other",
    );
    assert!(has(
        &mpd_problems(&f),
        &["no EssentialProperty http://dashif.org/thumbnail_tile"]
    ));
}

#[test]
fn durations_and_templates() {
    assert_eq!(mpd::parse_duration("PT60.000S"), Some(60.0));
    assert_eq!(mpd::parse_duration("P1DT1H2M3.5S"), Some(90_123.5));
    assert_eq!(mpd::parse_duration("PT"), None);
    assert_eq!(mpd::parse_duration("PT5X"), None);
    assert_eq!(
        mpd::fill_template("v/seg-$Number%05d$.m4s", "v0", 1, 42, 0),
        Ok("v/seg-00042.m4s".into())
    );
    assert_eq!(
        mpd::fill_template(
            "$RepresentationID$/$Time$-$Bandwidth$$$.m4s",
            "a",
            96000,
            1,
            900
        ),
        Ok("a/900-96000$.m4s".into())
    );
    assert!(mpd::fill_template("$Nope$", "a", 0, 0, 0).is_err());
    assert!(mpd::fill_template("$Number", "a", 0, 0, 0).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn validators_never_panic_on_garbage(text in "[ -~\n]{0,300}") {
        let files: Files = [("master.m3u8".to_string(), text.clone().into_bytes()), ("manifest.mpd".to_string(), text.into_bytes())].into();
        let _ = hls_problems(&files, None);
        let _ = mpd_problems(&files);
    }
}
