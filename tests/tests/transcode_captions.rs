//! CEA-608/708 captions carried in H.264 SEI (ATSC A/53 user data) survive the transcode:
//! the decoder hands them to the frames, the frames hand them to libx264, which writes them
//! again. Checked frame by frame with ffprobe on a source made here: an x264 stream with an A53
//! SEI inserted before every picture.

use std::path::{Path, PathBuf};
use std::process::Command;

use tessera_tests::fixture::ffmpeg;
use tessera_tests::{frame_count, Job};

const A53: &str = "side_data_type=ATSC A53 Part 4 Closed Captions";

/// An SEI NAL (Annex B, start code included) with one A53 caption packet: two CEA-608 bytes
/// for field 1 ("TE", odd parity) and the ATSC framing around them.
fn a53_sei() -> Vec<u8> {
    let payload = [
        0xb5,
        0x00,
        0x31,
        b'G',
        b'A',
        b'9',
        b'4',
        0x03, // T.35 US, ATSC, "GA94", cc_data
        0x40 | 1,
        0xff, // process_cc_data_flag, cc_count 1; em_data
        0xfc,
        0x54,
        0x45, // marker, valid, field 1: "TE"
        0xff, // marker bits
    ];
    let mut nal = vec![0, 0, 0, 1, 0x06, 4, payload.len() as u8];
    nal.extend_from_slice(&payload);
    nal.push(0x80); // rbsp trailing bits
    nal
}

/// Inserts the SEI before every slice NAL (types 1 and 5) of an Annex B stream.
fn with_captions(stream: &[u8]) -> Vec<u8> {
    let starts: Vec<usize> = (0..stream.len().saturating_sub(3))
        .filter(|&i| stream[i..i + 3] == [0, 0, 1])
        .collect();
    let mut out = Vec::with_capacity(stream.len() * 2);
    for (k, &s) in starts.iter().enumerate() {
        let begin = if s > 0 && stream[s - 1] == 0 {
            s - 1
        } else {
            s
        };
        let end =
            starts.get(k + 1).map_or(
                stream.len(),
                |&n| {
                    if stream[n - 1] == 0 {
                        n - 1
                    } else {
                        n
                    }
                },
            );
        if matches!(stream[s + 3] & 0x1f, 1 | 5) {
            out.extend_from_slice(&a53_sei());
        }
        out.extend_from_slice(&stream[begin..end]);
    }
    out
}

fn captioned_source(dir: &Path) -> PathBuf {
    let raw = dir.join("plain.h264");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=320x240:rate=25:duration=3",
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-bf",
        "0",
        "-g",
        "25",
        "-x264-params",
        "a53cc=0",
        "-f",
        "h264",
        raw.to_str().unwrap(),
    ]);
    let captioned = dir.join("captioned.h264");
    std::fs::write(&captioned, with_captions(&std::fs::read(&raw).unwrap())).unwrap();
    let mp4 = dir.join("captioned.mp4");
    ffmpeg(&[
        "-framerate",
        "25",
        "-i",
        captioned.to_str().unwrap(),
        "-c",
        "copy",
        mp4.to_str().unwrap(),
    ]);
    mp4
}

/// Frames of `path` that carry A53 captions.
fn captioned_frames(path: &Path) -> usize {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_frames"])
        .arg(path)
        .output()
        .expect("ffprobe");
    String::from_utf8_lossy(&out.stdout).matches(A53).count()
}

#[test]
fn a53_captions_reach_every_output_frame() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = captioned_source(dir.path());
    let frames = frame_count(&src);
    assert_eq!(
        captioned_frames(&src) as u64,
        frames,
        "the fixture lacks captions"
    );
    // Same size (frames go to the encoder as decoded) and scaled (through the scaler).
    for (name, extra) in [
        ("same.mp4", vec![]),
        ("scaled.mkv", vec!["--height", "120"]),
    ] {
        let job = Job::new(&src, name);
        job.run_ok(1, &extra);
        assert_eq!(frame_count(&job.output), frames, "{name}");
        assert_eq!(
            captioned_frames(&job.output) as u64,
            frames,
            "{name}: frames with captions"
        );
    }
}
