//! End-to-end transcodes of inputs whose GOP structure makes splitting hard:
//! closed and open GOPs, HEVC CRA/RASL, one keyframe in 20+ s, and an MP4
//! edit list. Each runs the real `tessera` binary and checks every
//! invariant in `tessera_tests::check` (frame count, per-frame timestamps,
//! A/V offset, audio duration, size, rotation, colour, PSNR, report).

use tessera_tests::probe::{leading_pictures, packets};
use tessera_tests::{fixture, frame_count, transcode_and_check, Fixture};

#[test]
fn closed_gop_h264_with_b_frames() {
    let src = fixture(Fixture::ClosedGopH264);
    assert_eq!(frame_count(&src), 100, "fixture: 4 s at 25 fps");
    assert_eq!(leading_pictures(&src), 0, "fixture should have closed GOPs");
    let c = transcode_and_check(&src, "out.mp4", 1, &["--quality"]);
    assert!(
        c.report.segments >= 3,
        "4 s with 1 s segments gave {} segments",
        c.report.segments
    );
    let q = (c.report.quality.clone())
        .unwrap_or_else(|| panic!("--quality given but report has no quality: {:?}", c.report));
    assert!(
        q.psnr >= 30.0 && q.psnr.is_finite(),
        "report PSNR {} (oracle {:.2})",
        q.psnr,
        c.psnr
    );
    assert!(
        q.ssim > 0.9 && q.ssim <= 1.0,
        "report SSIM {} out of range",
        q.ssim
    );
    // VMAF of the whole output and of each segment, by the segments' own frames.
    let vmaf = q.vmaf.as_ref().expect("--quality reports VMAF");
    assert_eq!(
        (vmaf.pooled.frames, vmaf.segments.len()),
        (100, c.report.segments as usize)
    );
    assert_eq!(
        vmaf.segments.iter().map(|s| s.frames).sum::<u64>(),
        100,
        "{vmaf:?}"
    );
    assert!(
        vmaf.pooled.mean > 80.0 && vmaf.pooled.mean <= 100.0,
        "{vmaf:?}"
    );
    for s in &vmaf.segments {
        assert!(
            s.min <= s.p1 && s.p1 <= s.p5 && s.min >= vmaf.pooled.min,
            "{vmaf:?}"
        );
    }
    assert!(c.report.wall_s > 0.0, "report wall_s {}", c.report.wall_s);
}

#[test]
fn open_gop_h264() {
    let src = fixture(Fixture::OpenGopH264);
    let keys = packets(&src, "v:0").iter().filter(|p| p.key).count();
    assert!(
        keys >= 3,
        "fixture should have several I-frames, has {keys}"
    );
    assert!(
        leading_pictures(&src) > 0,
        "fixture should have open GOPs (B-frames after an I-frame shown before it)"
    );
    transcode_and_check(&src, "out.mp4", 1, &[]);
}

#[test]
fn hevc_open_gop_cra_rasl() {
    let src = fixture(Fixture::HevcOpenGop);
    let keys = packets(&src, "v:0").iter().filter(|p| p.key).count();
    assert!(
        keys >= 3,
        "fixture should have an IDR and CRAs, has {keys} keyframes"
    );
    assert!(
        leading_pictures(&src) > 0,
        "fixture should have RASL leading pictures"
    );
    transcode_and_check(&src, "out.mp4", 1, &[]);
}

#[test]
fn one_keyframe_in_twenty_seconds() {
    let src = fixture(Fixture::SparseKeyframes);
    let key_times: Vec<f64> = packets(&src, "v:0")
        .iter()
        .filter(|p| p.key)
        .map(|p| p.pts)
        .collect();
    assert!(
        key_times.len() <= 2 && key_times.windows(2).all(|w| w[1] - w[0] >= 20.0),
        "fixture keyframes should be >= 20 s apart: {key_times:?}"
    );
    let c = transcode_and_check(&src, "out.mp4", 5, &[]);
    // 25 s cut every ~5 s: the splitter must cut between keyframes.
    assert!(
        c.report.segments >= 4,
        "25 s with 5 s segments and sparse keyframes gave {} segments",
        c.report.segments
    );
}

#[test]
fn mp4_edit_list_from_stream_copy_cut() {
    let src = fixture(Fixture::EditList);
    let pkts = packets(&src, "v:0");
    let decoded = frame_count(&src);
    assert!(
        (pkts.len() as u64) > decoded,
        "fixture should hide frames with an edit list: {} packets, {decoded} frames",
        pkts.len()
    );
    assert_eq!(decoded, 92, "fixture: 5 s - 1.3 s at 25 fps");
    transcode_and_check(&src, "out.mp4", 1, &[]);
}
