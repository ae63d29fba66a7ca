//! Each check on a sample that passes and one that fails: what `--self-test` used to prove
//! by running the cases with `--gpu off`, now without a transcode.

use super::*;

const PROBE: &str = r#"{"audio": [{"codec": "aac", "index": 1}], "container": "mov,mp4",
    "video": {"codec": "h264", "frames": 300, "height": 1080, "index": 0, "width": 1920}}"#;

fn probe(frames: u64, height: u64, codec: &str) -> Probe {
    Probe {
        frames,
        width: height * 16 / 9,
        height,
        codec: codec.into(),
        ..Probe::default()
    }
}

#[test]
fn probe_reads_the_video_not_the_audio() {
    let p = Probe::from_json(PROBE).expect("a probe");
    assert_eq!(p, probe(300, 1080, "h264"));
    assert_eq!(Probe::from_json("not json"), None);
    assert_eq!(Probe::from_json(r#"{"audio": []}"#), None);
}

#[test]
fn inventory_counts_cards_and_picks_the_mode() {
    let h200 = r#"{"cards": [{"index": 0, "name": "NVIDIA H200"}], "nvml_error": null,
        "nvenc_sessions_available": 0}"#;
    let inv = Inventory::from_json(h200);
    assert_eq!(
        (inv.cards, inv.mode(false), inv.mode(true)),
        (1, "decode", "off")
    );
    let l4 = r#"{"cards": [{"index": 0}, {"index": 1}], "nvenc_sessions_available": 16}"#;
    assert_eq!(Inventory::from_json(l4).mode(false), "require");
    let none =
        Inventory::from_json(r#"{"cards": [], "nvml_error": "libnvidia-ml.so.1: not found"}"#);
    assert_eq!(none.cards, 0);
    assert_eq!(
        none.no_card_reason(),
        "no NVIDIA card here (libnvidia-ml.so.1: not found)"
    );
    assert_eq!(Inventory::from_json("").cards, 0);
}

#[test]
fn nvdec_passes_on_every_frame_and_fails_on_fewer() {
    let out =
        "NVDEC decode: 300 frames 1920x1080 in 0.52 s = 576.9 fps (h264_cuvid, frames as nv12)";
    assert_eq!(
        nvdec_result(out, 300),
        ("passed (300 frames)".into(), "576.9".into(), true)
    );
    let short = out.replace("300 frames", "299 frames");
    assert_eq!(nvdec_result(&short, 300).0, "FAILED: 299 of 300 frames");
    assert!(!nvdec_result("error: cuInit failed", 300).2);
}

#[test]
fn log_facts_count_gpu_segments_sessions_and_the_first_error() {
    let log = "INFO GPU segment job=a segment=0 nvdec=true sessions_in_use=1\n\
               INFO GPU segment job=a segment=1 nvdec=true sessions_in_use=3\n\
               INFO stitched\n";
    let f = LogFacts::of(log);
    assert_eq!(
        (f.gpu_segments, f.sessions_held, f.first_error),
        (2, 3, None)
    );
    let bad = LogFacts::of(
        "INFO start\nERROR tessera: error: OpenEncodeSessionEx failed: unsupported device (2)\n",
    );
    assert_eq!(bad.gpu_segments, 0);
    assert_eq!(
        bad.first_error.as_deref(),
        Some("error: OpenEncodeSessionEx failed: unsup")
    );
}

fn outcome(main: Probe, also: Vec<(u64, Probe)>, gpu_segments: usize, mode: &str) -> String {
    CaseOutcome {
        codec: "h264",
        height: Some(720),
        src_frames: 300,
        main,
        also,
        gpu_segments,
        mode,
    }
    .problems()
}

#[test]
fn a_case_passes_with_every_frame_at_the_size_and_codec_asked() {
    let ladder = vec![(480, probe(300, 480, "h264"))];
    assert_eq!(outcome(probe(300, 720, "h264"), ladder, 5, "decode"), "");
    assert_eq!(outcome(probe(300, 720, "h264"), vec![], 0, "off"), "");
}

#[test]
fn an_extra_rendition_of_another_codec_fails() {
    let ladder = vec![(480, probe(300, 480, "hevc"))];
    let p = outcome(probe(300, 720, "h264"), ladder, 5, "require");
    assert_eq!(p, " 480p is hevc;");
}

#[test]
fn a_case_fails_on_frames_size_codec_rendition_or_no_gpu_segment() {
    let p = outcome(probe(299, 720, "h264"), vec![], 5, "require");
    assert_eq!(p, " main has 299 of 300 frames;");
    let p = outcome(probe(300, 1080, "hevc"), vec![], 5, "require");
    assert_eq!(p, " main is 1080p, not 720p; main is hevc;");
    let p = outcome(
        probe(300, 720, "h264"),
        vec![(480, probe(300, 360, "h264"))],
        5,
        "decode",
    );
    assert_eq!(p, " 480p has 300 frames at 360p;");
    let p = outcome(probe(300, 720, "h264"), vec![], 0, "decode");
    assert_eq!(p, " no segment ran on the GPU path;");
}

#[test]
fn fps_and_sessions_text() {
    assert_eq!(
        fps_text(r#"{"encode_fps": 123.456789, "frames": 300}"#),
        "123.45"
    );
    assert_eq!(fps_text("{}"), "-");
    let samples = vec![
        "0, 1, 40, 60, 80".to_string(),
        "0, 3, 60, 80, 90".to_string(),
    ];
    assert_eq!(
        sessions_text(2, &samples),
        "held 2, nvidia-smi 3, enc 50% dec 70%"
    );
    assert_eq!(sessions_text(0, &[]), "held 0, nvidia-smi ?");
    // With the VRAM column: its peak over the samples.
    let samples = vec![
        "0, 1, 40, 60, 80, 900".to_string(),
        "0, 3, 60, 80, 90, 2150".to_string(),
    ];
    assert_eq!(
        sessions_text(2, &samples),
        "held 2, nvidia-smi 3, enc 50% dec 70%, VRAM 2150 MiB"
    );
}

#[test]
fn the_table_and_failed_rows() {
    let rows = [
        Row::new("nvdec", "passed (300 frames)", "576.9", "-"),
        Row::new("resize", "FAILED: main has 299 of 300 frames;", "-", "-"),
        Row::new("hevc", "skipped: no card", "-", "-"),
    ];
    assert_eq!(rows.iter().filter(|r| r.failed()).count(), 1);
    let t = table(&rows);
    assert!(t.starts_with("case          | result "), "{t}");
    assert!(
        t.contains("nvdec         | passed (300 frames)                          |    576.9 | -\n"),
        "{t}"
    );
}
