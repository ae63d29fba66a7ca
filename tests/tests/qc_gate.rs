//! The QC gate on real damaged inputs: a source whose decoder errors pass the job's share
//! fails as `source_corrupt` with nothing delivered; one below it is delivered whole (every
//! frame, the source's count) with a warning that names the input and the figures.

use tessera_tests::fixture::damaged_copy;
use tessera_tests::{fixture, frame_count, Fixture, Job};

fn input_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("tessera-qc-")
        .tempdir()
        .expect("temp dir")
}

/// One damaged packet in seven: far over the 1% default.
#[test]
fn a_badly_damaged_source_fails_as_corrupt_and_nothing_is_delivered() {
    let dir = input_dir();
    let (input, damaged) = damaged_copy(
        &fixture(Fixture::ClosedGopH264),
        dir.path(),
        "damaged.mp4",
        3,
        7,
    );
    assert!(damaged >= 8, "only {damaged} packets damaged");
    let job = Job::new(&input, "out.mp4");
    let run = job.run(1, &[]);
    job.assert_rejected(&run);
    assert!(
        run.stderr.contains("source is corrupt") && run.stderr.contains("allowed"),
        "{}",
        run.describe()
    );
}

/// The same damage with the share raised: delivered, every frame there, and warned about.
/// One damaged packet under the default share: delivered with a warning too.
#[test]
fn light_damage_is_delivered_with_a_warning() {
    let dir = input_dir();
    let src = fixture(Fixture::ClosedGopH264);
    let source_frames = frame_count(&src);
    for (name, first, every, extra) in [
        ("heavy.mp4", 3, 7, vec!["--max-decode-error-share", "0.5"]),
        ("light.mp4", 40, 1000, vec![]),
    ] {
        let (input, damaged) = damaged_copy(&src, dir.path(), name, first, every);
        assert!(damaged >= 1, "{name}: nothing damaged");
        let job = Job::new(&input, "out.mp4");
        let run = job.run_ok(1, &extra);
        let report = job.report();
        assert_eq!(report.frames, source_frames, "{name}");
        assert_eq!(frame_count(&job.output), source_frames, "{name}");
        assert!(
            (1..=damaged as u64).contains(&report.decode_errors),
            "{name}: {} decode errors for {damaged} damaged packets",
            report.decode_errors
        );
        let warning = report
            .warnings
            .iter()
            .find(|w| w.contains("could not be decoded cleanly"))
            .unwrap_or_else(|| panic!("{name}: no warning in {:?}", report.warnings));
        assert!(warning.contains(name), "{warning}");
        assert!(run.stderr.contains("warning:"), "{}", run.describe());
    }
}

/// A clean source reports no decode errors and no such warning.
#[test]
fn a_clean_source_has_no_decode_errors() {
    let job = Job::new(&fixture(Fixture::ClosedGopH264), "out.mp4");
    job.run_ok(1, &[]);
    let report = job.report();
    assert_eq!(report.decode_errors, 0);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

/// The stitch's gate on a real encoded segment: an output as planned is renamed into place
/// with what was decoded; one that does not match the plan (a frame more planned, an audio
/// track asked for that is not there, a start a second late) is refused as `qc_failed` with
/// the output named, and nothing is left in the output directory.
#[test]
fn the_stitch_gate_refuses_an_output_that_differs_from_the_plan() {
    use tessera_media::stitch;
    use tessera_model::encode::Container;
    use tessera_model::error_code::ErrorCode;
    use tessera_model::probe::Rational;
    use tessera_model::stitch::OutputExpectation;
    let dir = input_dir();
    let segment = dir.path().join("seg.nut");
    let made = std::process::Command::new("ffmpeg")
        .args(["-v", "error", "-f", "lavfi", "-i"])
        .arg("testsrc2=size=320x240:rate=25:duration=2")
        .args([
            "-c:v", "libx264", "-preset", "veryfast", "-bf", "2", "-f", "nut",
        ])
        .arg(&segment)
        .status()
        .expect("run ffmpeg");
    assert!(made.success(), "ffmpeg could not make the segment");
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("out dir");
    let good = OutputExpectation {
        label: "output 0 (out.mp4)".into(),
        frames: 50,
        // ffmpeg shifts B-frame streams so that dts starts at 0: the first frame shows at
        // pts 2, as the stitch keeps it (tessera's own segments carry the job's bias instead).
        first_pts: 2,
        last_pts: 51,
        time_base: Rational { num: 1, den: 25 },
        tolerance_seconds: 0.04,
        audio_tracks: 0,
    };
    let request = |expect: OutputExpectation| {
        one_segment_stitch(&segment, out_dir.join("out.mp4"), Container::Mp4, expect)
    };
    let bad = [
        (
            OutputExpectation {
                frames: 51,
                ..good.clone()
            },
            "50 video frames decoded, 51 planned",
        ),
        (
            OutputExpectation {
                audio_tracks: 1,
                ..good.clone()
            },
            "0 audio tracks, 1 asked for",
        ),
        (
            OutputExpectation {
                first_pts: 27,
                last_pts: 76,
                ..good.clone()
            },
            "video starts at 0.080 s, the plan says 1.080 s",
        ),
    ];
    for (expect, reason) in bad {
        let err = stitch(&request(expect)).expect_err("a mismatch must be refused");
        assert_eq!(err.code(), ErrorCode::QcFailed, "{err}");
        let text = err.to_string();
        assert!(
            text.contains("output 0 (out.mp4)") && text.contains(reason),
            "{text}"
        );
        let left: Vec<_> = std::fs::read_dir(&out_dir).expect("read out dir").collect();
        assert!(
            left.is_empty(),
            "left behind after a refused stitch: {left:?}"
        );
    }
    let done = stitch(&request(good)).expect("an output as planned passes");
    let check = done.check.expect("the gate ran");
    assert_eq!((done.frames, check.frames), (50, 50));
    assert!((check.video_start_seconds - 0.08).abs() < 1e-6, "{check:?}");
    assert!((check.video_end_seconds - 2.04).abs() < 1e-6, "{check:?}");
    assert_eq!(frame_count(&out_dir.join("out.mp4")), 50);
}

/// The stitched output's video is decoded in parts side by side, cut at keyframes: every frame
/// must be decoded exactly once, in both containers. Closed-GOP keyframes (what our encoders
/// write) are entry points, so the parts are used. Open-GOP keyframes (x264 recovery points,
/// x265 CRA) may not be: whether the parts hold or the gate falls back to one whole decode,
/// the count must be exact.
#[test]
fn the_parallel_gate_decodes_every_frame_once() {
    use tessera_media::stitch;
    use tessera_model::encode::Container;
    let dir = input_dir();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cases = [
        // (name, encoder and its GOP options, parts expected: None = either)
        (
            "h264-closed",
            ["libx264", "-x264-params", "keyint=25:min-keyint=25"],
            Some(cores.min(5)),
        ),
        (
            "h264-open",
            [
                "libx264",
                "-x264-params",
                "keyint=25:min-keyint=25:open-gop=1",
            ],
            None,
        ),
        (
            "hevc-open",
            [
                "libx265",
                "-x265-params",
                "keyint=25:min-keyint=25:open-gop=1:log-level=error",
            ],
            None,
        ),
    ];
    for (name, codec, parts) in cases {
        let segment = dir.path().join(format!("{name}.nut"));
        let out = segment.to_string_lossy();
        tessera_tests::fixture::ffmpeg(&[
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=320x240:rate=25:duration=10",
            "-c:v",
            codec[0],
            "-preset",
            "veryfast",
            "-bf",
            "3",
            codec[1],
            codec[2],
            "-f",
            "nut",
            &out,
        ]);
        for container in [Container::Mp4, Container::Mkv] {
            let what = format!("{name}, {container:?}");
            let output = dir.path().join(format!("{name}.{}", container.extension()));
            let expect = expect_all_of(&segment, format!("output ({what})"), 250);
            let done = stitch(&one_segment_stitch(
                &segment,
                output.clone(),
                container,
                expect,
            ))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            let check = done.check.expect("the gate ran");
            assert_eq!(check.frames, 250, "{what}: {check:?}");
            if let Some(parts) = parts {
                assert_eq!(check.video_parts as usize, parts, "{what}: {check:?}");
            }
            // Every frame is decoded, the B-frames nothing refers to too.
            assert_eq!(check.decoded_frames, 250, "{what}: {check:?}");
            assert_eq!(frame_count(&output), 250, "{what}");
        }
    }
}

/// The gate's expectation of an output of all `frames` frames of the 25 fps `segment`, from
/// its first shown frame on (probed).
fn expect_all_of(
    segment: &std::path::Path,
    label: String,
    frames: u64,
) -> tessera_model::stitch::OutputExpectation {
    let first = tessera_tests::probe::probe_stream_frames(segment, "v:0")
        .first()
        .map(|f| f.ts)
        .expect("segment has frames");
    let first_pts = (first * 25.0).round() as i64;
    tessera_model::stitch::OutputExpectation {
        label,
        frames,
        first_pts,
        last_pts: first_pts + frames as i64 - 1,
        time_base: tessera_model::probe::Rational { num: 1, den: 25 },
        tolerance_seconds: 0.04,
        audio_tracks: 0,
    }
}

/// A stitch of one 25 fps segment (time base 1/25, no audio) into `output`.
fn one_segment_stitch(
    segment: &std::path::Path,
    output: std::path::PathBuf,
    container: tessera_model::encode::Container,
    expect: tessera_model::stitch::OutputExpectation,
) -> tessera_model::stitch::StitchRequest {
    use tessera_model::probe::Rational;
    tessera_model::stitch::StitchRequest {
        segments: vec![segment.to_path_buf()],
        video_bias: 0,
        video_time_base: Rational { num: 1, den: 25 },
        audio: None,
        audio_tracks: Vec::new(),
        start_seconds: 0.0,
        display_matrix: None,
        frame_rate: Rational { num: 25, den: 1 },
        container,
        output,
        chapters: Vec::new(),
        title: None,
        subtitles: Vec::new(),
        expect: Some(expect),
    }
}

/// Damage only in frames no other frame refers to (x264's B-frames without a pyramid: NAL
/// `nal_ref_idc` 0) must be refused: the gate decodes every frame of the output, not only the
/// references. Every such B-frame (from the 11th packet on) is damaged from a third of its
/// slice data on; the decoder flags about one in seven, which is plenty.
#[test]
fn damage_in_non_reference_frames_is_refused() {
    use tessera_media::stitch;
    use tessera_model::encode::Container;
    use tessera_model::error_code::ErrorCode;
    let dir = input_dir();
    let clean = dir.path().join("clean.nut");
    tessera_tests::fixture::ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=320x240:rate=25:duration=4",
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-bf",
        "3",
        "-x264-params",
        "keyint=25:min-keyint=25:b-pyramid=none:b-adapt=0",
        "-f",
        "nut",
        &clean.to_string_lossy(),
    ]);
    let segment = dir.path().join("damaged.nut");
    let damaged = damage_non_reference_slices(&clean, &segment);
    assert!(damaged >= 20, "only {damaged} non-reference slices damaged");
    for container in [Container::Mp4, Container::Mkv] {
        let output = dir.path().join(format!("out.{}", container.extension()));
        let expect = expect_all_of(&segment, format!("output 0 ({container:?})"), 100);
        let request = one_segment_stitch(&segment, output.clone(), container, expect);
        let err = stitch(&request).expect_err("damaged B-frames must be refused");
        assert_eq!(err.code(), ErrorCode::QcFailed, "{container:?}: {err}");
        assert!(!output.exists(), "{container:?}: a refused output was left");
    }
}

/// The same segments stitched twice give the same bytes, in each container: a stitch task
/// delivered twice (RabbitMQ delivers at least once) then stores the output its QC gate
/// passed, with the same ETag, which the delivery pins. Matroska wrote random segment and
/// track UIDs until the stitch asked for bit-exact muxing (chaos seed 53: a duplicated stitch
/// of an MKV output replaced the checked object and failed its job).
#[test]
fn the_same_segments_stitched_twice_give_the_same_bytes() {
    use tessera_model::encode::Container;
    let dir = input_dir();
    let segment = dir.path().join("segment.nut");
    tessera_tests::fixture::ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=320x240:rate=25:duration=2",
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-f",
        "nut",
        &segment.to_string_lossy(),
    ]);
    for container in [Container::Mkv, Container::Mp4] {
        let outputs: Vec<Vec<u8>> = (0..2)
            .map(|n| {
                let output = dir.path().join(format!("{n}.{}", container.extension()));
                let expect = expect_all_of(&segment, format!("output {n} ({container:?})"), 50);
                let request = one_segment_stitch(&segment, output.clone(), container, expect);
                tessera_media::stitch(&request).expect("stitched");
                std::fs::read(&output).expect("the output")
            })
            .collect();
        assert!(!outputs[0].is_empty(), "{container:?}");
        assert!(
            outputs[0] == outputs[1],
            "{container:?}: two stitches of the same segment differ"
        );
    }
}

/// Copies `src` to `dest` with the video packets from the 11th on damaged whose slice NAL
/// unit is not a reference (`nal_ref_idc` 0, type 1), from a third of their payload to near
/// its end; returns how many were damaged. Packet sizes and positions come from ffprobe.
fn damage_non_reference_slices(src: &std::path::Path, dest: &std::path::Path) -> usize {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries"])
        .args(["packet=pos,size", "-of", "csv=p=0"])
        .arg(src)
        .output()
        .expect("run ffprobe");
    let mut bytes = std::fs::read(src).expect("read segment");
    let mut damaged = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines().skip(10) {
        let f: Vec<usize> = line.split(',').filter_map(|v| v.parse().ok()).collect();
        let [size, pos] = f[..] else { continue };
        let packet = &bytes[pos..pos + size];
        // The first NAL unit after a start code in the packet.
        let Some(at) = packet.windows(3).position(|w| w == [0, 0, 1]) else {
            continue;
        };
        let header = packet[at + 3];
        if header & 0x1f != 1 || header & 0x60 != 0 || size < 64 {
            continue;
        }
        let (from, to) = (pos + at + size / 3, pos + size - 4);
        for (k, b) in bytes[from..to].iter_mut().enumerate() {
            *b ^= 0x5a ^ (k as u8);
        }
        damaged += 1;
    }
    std::fs::write(dest, &bytes).expect("write damaged segment");
    damaged
}
