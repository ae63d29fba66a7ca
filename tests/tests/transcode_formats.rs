//! End-to-end transcodes of inputs with awkward containers, codecs or
//! metadata: MPEG-TS with a non-zero start, variable frame rate, VP9/Opus
//! WebM, rotation, odd-sized 4:4:4 and 10-bit 4:2:2 ProRes. Each runs the
//! real `tessera` binary and checks every invariant in
//! `tessera_tests::check`.

use tessera_tests::probe::StreamInfo;
use tessera_tests::{
    fixture, format_start, probe_frames, streams_of, transcode_and_check, Fixture,
};

fn video_info(path: &std::path::Path) -> StreamInfo {
    streams_of(path, "video")
        .into_iter()
        .next()
        .expect("a video stream")
}

#[test]
fn mpeg_ts_with_nonzero_start() {
    let src = fixture(Fixture::MpegTsOffset);
    let start = format_start(&src);
    assert!(
        start > 10.0,
        "fixture should start after 10 s, starts at {start}"
    );
    let c = transcode_and_check(&src, "out.mp4", 1, &[]);
    assert!(
        c.out.video.first().is_some_and(|f| f.ts < 1.0),
        "output not moved to start near 0: first frame at {:?}",
        c.out.video.first()
    );
}

#[test]
fn variable_frame_rate() {
    let src = fixture(Fixture::VariableFrameRate);
    let times = probe_frames(&src);
    let mut gaps: Vec<i64> = times
        .windows(2)
        .map(|w| ((w[1] - w[0]) * 1000.0).round() as i64)
        .collect();
    gaps.sort_unstable();
    gaps.dedup();
    assert!(
        gaps.len() >= 2,
        "fixture should have irregular frame durations, has {gaps:?} ms"
    );
    // The per-frame timestamp check in transcode_and_check is what catches
    // a transcoder that flattens VFR to a constant rate.
    transcode_and_check(&src, "out.mp4", 1, &[]);
}

#[test]
fn vp9_opus_webm_to_mkv() {
    let src = fixture(Fixture::Vp9OpusWebm);
    let codecs: Vec<String> = tessera_tests::stream_info(&src)
        .into_iter()
        .map(|s| s.codec_name)
        .collect();
    assert_eq!(codecs, ["vp9", "opus"], "fixture streams");
    transcode_and_check(&src, "out.mkv", 1, &[]);
}

#[test]
fn rotation_is_kept() {
    let src = fixture(Fixture::Rotated90);
    let rotation = video_info(&src).rotation;
    assert!(
        rotation.is_some_and(|r| (r.abs() - 90.0).abs() < 0.5),
        "fixture should carry a 90-degree display matrix, has {rotation:?}"
    );
    let c = transcode_and_check(&src, "out.mp4", 1, &[]);
    assert_eq!(
        c.out.video_info.rotation, rotation,
        "display matrix rotation"
    );
    assert_eq!(
        (c.out.video_info.width, c.out.video_info.height),
        (Some(320), Some(240)),
        "pixels must stay unrotated (the matrix carries the rotation)"
    );
}

#[test]
fn odd_dimensions_yuv444() {
    let src = fixture(Fixture::Odd444);
    let v = video_info(&src);
    assert_eq!((v.width, v.height), (Some(321), Some(241)), "fixture size");
    assert_eq!(
        v.pix_fmt.as_deref(),
        Some("yuv444p"),
        "fixture pixel format"
    );
    // Size (320x240) and everything else are checked in transcode_and_check.
    transcode_and_check(&src, "out.mp4", 1, &[]);
}

#[test]
fn prores_422_hq_10_bit() {
    let src = fixture(Fixture::ProRes422Hq10);
    let v = video_info(&src);
    assert_eq!(v.codec_name, "prores", "fixture codec");
    assert_eq!(
        v.pix_fmt.as_deref(),
        Some("yuv422p10le"),
        "fixture pixel format"
    );
    assert_eq!(
        v.color_primaries.as_deref(),
        Some("bt709"),
        "fixture colour tags"
    );
    transcode_and_check(&src, "out.mp4", 1, &[]);
}
