//! HDR through `tessera transcode`, checked with ffprobe: an HDR10 source (PQ, BT.2020,
//! mastering display and content light level in the HEVC SEI) keeps 10 bits, its tags and its
//! static metadata in HEVC and AV1; HLG keeps its transfer; H.264 output is tone-mapped to
//! BT.709 SDR by default (matching FFmpeg's own zscale/tonemap chain by PSNR), and keeps PQ
//! when asked with `--hdr keep`. Every output has the source's frame count.

use std::path::Path;
use std::process::Command;

use tessera_tests::fixture::{ffmpeg, hdr_source};
use tessera_tests::probe::{psnr, streams_of};
use tessera_tests::{frame_count, Job};

/// The side data of the first video frame, as ffprobe prints it (`key=value` lines).
fn first_frame_side_data(path: &Path) -> String {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-read_intervals",
            "%+#1",
        ])
        .args(["-show_frames"])
        .arg(path)
        .output()
        .expect("ffprobe");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn video(path: &Path) -> tessera_tests::probe::StreamInfo {
    streams_of(path, "video")
        .into_iter()
        .next()
        .expect("a video stream")
}

fn transcode(src: &Path, name: &str, extra: &[&str]) -> Job {
    let job = Job::new(src, name);
    job.run_ok(1, extra);
    assert_eq!(
        frame_count(&job.output),
        frame_count(src),
        "{name}: frame count"
    );
    job
}

#[test]
fn hdr10_keeps_depth_tags_and_metadata_in_hevc_and_av1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = hdr_source(dir.path(), "smpte2084");
    for codec in ["hevc", "av1"] {
        let job = transcode(&src, &format!("{codec}.mkv"), &["--codec", codec]);
        let v = video(&job.output);
        assert_eq!(v.pix_fmt.as_deref(), Some("yuv420p10le"), "{codec}");
        assert_eq!(v.color_primaries.as_deref(), Some("bt2020"), "{codec}");
        assert_eq!(v.color_transfer.as_deref(), Some("smpte2084"), "{codec}");
        assert_eq!(v.color_space.as_deref(), Some("bt2020nc"), "{codec}");
        let sd = first_frame_side_data(&job.output);
        assert!(
            sd.contains("side_data_type=Mastering display metadata"),
            "{codec}: {sd}"
        );
        assert!(
            sd.contains("side_data_type=Content light level metadata"),
            "{codec}: {sd}"
        );
        assert!(
            sd.contains("max_content=1000") && sd.contains("max_average=400"),
            "{codec}: {sd}"
        );
        // 1000 cd/m² peak, in whatever denominator the codec's syntax uses.
        let peak = sd
            .lines()
            .find_map(|l| l.strip_prefix("max_luminance="))
            .and_then(|r| r.split_once('/'))
            .map(|(n, d)| n.parse::<f64>().unwrap() / d.parse::<f64>().unwrap());
        assert_eq!(peak, Some(1000.0), "{codec}: {sd}");
        if codec == "hevc" {
            assert!(
                sd.contains("green_x=13250/50000") && sd.contains("white_point_y=16450/50000"),
                "{sd}"
            );
        }
    }
}

#[test]
fn hlg_keeps_its_transfer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = hdr_source(dir.path(), "arib-std-b67");
    let job = transcode(&src, "hlg.mkv", &["--codec", "hevc"]);
    let v = video(&job.output);
    assert_eq!(v.pix_fmt.as_deref(), Some("yuv420p10le"));
    assert_eq!(v.color_transfer.as_deref(), Some("arib-std-b67"));
    assert_eq!(v.color_primaries.as_deref(), Some("bt2020"));
}

#[test]
fn h264_from_hdr_is_tone_mapped_unless_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = hdr_source(dir.path(), "smpte2084");
    let job = transcode(&src, "sdr.mp4", &["--codec", "h264"]);
    let v = video(&job.output);
    assert_eq!(v.pix_fmt.as_deref(), Some("yuv420p"));
    assert_eq!(v.color_primaries.as_deref(), Some("bt709"));
    assert_eq!(v.color_transfer.as_deref(), Some("bt709"));
    assert_eq!(v.color_range.as_deref(), Some("tv"));
    let sd = first_frame_side_data(&job.output);
    assert!(
        !sd.contains("Mastering display"),
        "SDR output with HDR metadata: {sd}"
    );
    // FFmpeg's own tone map of the source, near-lossless, as the reference.
    let reference = dir.path().join("reference.mkv");
    ffmpeg(&[
        "-i",
        src.to_str().unwrap(),
        "-vf",
        "zscale=tin=smpte2084:pin=2020:min=2020_ncl:rin=limited:t=linear:npl=100,\
         format=gbrpf32le,zscale=p=709,tonemap=tonemap=hable:desat=0,\
         zscale=t=709:m=709:r=limited,format=yuv420p",
        "-c:v",
        "libx264",
        "-crf",
        "8",
        "-an",
        reference.to_str().unwrap(),
    ]);
    let db = psnr(&job.output, &reference);
    assert!(
        db >= 35.0,
        "tone-mapped output PSNR {db:.2} dB against FFmpeg's tone map"
    );
    // Against the untouched PQ source the picture differs a lot: the test can fail.
    let untouched = psnr(&job.output, &src);
    assert!(
        untouched < db - 5.0,
        "tone mapping changed nothing? {untouched:.2} vs {db:.2} dB"
    );

    let kept = transcode(&src, "pq.mp4", &["--codec", "h264", "--hdr", "keep"]);
    let v = video(&kept.output);
    assert_eq!(v.color_transfer.as_deref(), Some("smpte2084"));
    assert_eq!(v.pix_fmt.as_deref(), Some("yuv420p"));
}
