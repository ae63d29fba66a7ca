//! The proof checks on passing and failing samples, the log lines as the worker writes them.

use super::*;

/// A `segment encoded` line as the worker logs it.
fn encoded(segment: u32, encoders: &str, decoder: &str, nvdec: u64, uploaded: u64) -> String {
    format!(
        "2026-12-05T22:08:18Z  INFO task{{worker=\"local-0\" job=\"j\" task=segment {segment} \
         segment={segment}}}: tessera_worker::segment: segment encoded job=\"j\" \
         segment={segment} frames=30 seconds=0.3 attempt=1 encoders={encoders} \
         decoder={decoder} nvdec_frames={nvdec} uploaded_frames={uploaded}\n"
    )
}

/// A `GPU segment` line.
fn gpu(segment: u32, card: u32, held: u32) -> String {
    format!(
        "2026-12-05T22:08:18Z  INFO task{{worker=\"local-0\" segment={segment}}}: \
         tessera_worker::gpu_task: GPU segment job=\"j\" segment={segment} card={card} \
         nvdec=true sessions_in_use={held}\n"
    )
}

#[test]
fn psnr_is_read_from_a_report_or_a_measure_and_held_to_the_floor() {
    let report = r#"{"frames": 300, "quality": {"psnr": 41.5, "psnr_y": 42.0}}"#;
    assert_eq!(psnr_of(report), Some(42.0));
    assert_eq!(
        psnr_of(r#"{"psnr": 21.6, "psnr_y": 23.5, "frames": 147}"#),
        Some(23.5)
    );
    assert_eq!(psnr_of(r#"{"quality": null}"#), None);
    assert_eq!(psnr_problem(Some(41.5)), "");
    assert_eq!(psnr_problem(Some(PSNR_FLOOR_DB)), "");
    assert!(psnr_problem(Some(23.5)).contains("23.5 dB under the 35 dB floor"));
    assert!(
        psnr_problem(Some(f64::NAN)).contains("under"),
        "NaN is no pass"
    );
    assert_eq!(psnr_problem(None), " no PSNR measured;");
}

#[test]
fn the_decoder_and_encoders_must_be_the_modes() {
    let on_card = gpu(0, 0, 1)
        + &encoded(0, "h264_nvenc", "h264_nvdec", 60, 0)
        + &gpu(1, 1, 2)
        + &encoded(1, "h264_nvenc,h264_nvenc", "h264_nvdec", 60, 0);
    let c = Coding::of(&on_card);
    assert_eq!(c.segments, 2);
    assert_eq!(c.nvdec_frames, 120);
    assert_eq!(c.held, BTreeMap::from([(0, 1), (1, 2)]));
    assert_eq!(coding_problems(&c, "require"), "");
    assert!(coding_problems(&c, "off").contains("a card was used"));
    assert!(coding_problems(&c, "decode").contains("h264_nvenc on a card said to have no NVENC"));
    // NVDEC fell back for part of a segment: caught although the encode was on NVENC.
    let fell = on_card.clone() + &encoded(2, "h264_nvenc", "h264_nvdec", 10, 50);
    let p = coding_problems(&Coding::of(&fell), "require");
    assert!(p.contains("50 frames decoded in software"), "{p}");
    // A software encode on the GPU path.
    let x264 = encoded(0, "libx264", "h264_nvdec", 60, 0);
    assert!(coding_problems(&Coding::of(&x264), "require").contains("libx264, not NVENC"));
    assert_eq!(coding_problems(&Coding::of(&x264), "decode"), "");
    // The CPU path: right for `off`, wrong for a card.
    let cpu = encoded(0, "libx264", "software", 0, 0);
    assert_eq!(coding_problems(&Coding::of(&cpu), "off"), "");
    let p = coding_problems(&Coding::of(&cpu), "require");
    assert!(
        p.contains("not NVENC") && p.contains("software, not NVDEC"),
        "{p}"
    );
    assert!(p.contains("no frame came from NVDEC"), "{p}");
    assert!(coding_problems(&Coding::of(""), "off").contains("no segment reported"));
}

#[test]
fn sessions_stay_within_each_cards_budget_and_fill_it() {
    let budgets = BTreeMap::from([(0, 4), (1, 4)]);
    let held = |pairs: &[(u64, u64)]| pairs.iter().copied().collect::<BTreeMap<_, _>>();
    assert_eq!(
        session_problems(&held(&[(0, 4), (1, 4)]), &budgets, 10, "require"),
        ""
    );
    let over = session_problems(&held(&[(0, 5), (1, 4)]), &budgets, 10, "require");
    assert!(
        over.contains("card 0 held 5 sessions, over its budget of 4"),
        "{over}"
    );
    let missing = session_problems(&held(&[]), &budgets, 10, "require");
    assert_eq!(missing, " no NVENC session was held;");
    let short = session_problems(&held(&[(0, 4)]), &budgets, 10, "require");
    assert!(
        short.contains("at most 4 of 8 sessions held with 10 segments"),
        "{short}"
    );
    assert_eq!(
        session_problems(&held(&[(0, 2)]), &budgets, 0, "require"),
        "",
        "no fill asked"
    );
    let stranger = session_problems(&held(&[(7, 1)]), &budgets, 0, "require");
    assert!(
        stranger.contains("card 7 is not in the inventory"),
        "{stranger}"
    );
    assert_eq!(session_problems(&held(&[]), &budgets, 10, "decode"), "");
}

#[test]
fn nvidia_smi_must_see_the_sessions_within_budget_and_the_engines_busy() {
    let rows = |r: &[&str]| r.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let busy = rows(&["0, 3, 71, 40, 90", "0, 4, 88, 52, 95"]);
    assert_eq!(smi_problems(&busy, 4, "require"), "");
    assert!(smi_problems(&busy, 3, "require").contains("saw 4 sessions, over the budget of 3"));
    let idle = rows(&["0, 0, 0, 0, 1"]);
    let p = smi_problems(&idle, 4, "require");
    assert!(
        p.contains("no encoder session") && p.contains("stayed at 0%"),
        "{p}"
    );
    assert!(smi_problems(&idle, 4, "decode").contains("decoder's use stayed at 0%"));
    assert_eq!(smi_problems(&rows(&["0, 0, 0, 35, 60"]), 0, "decode"), "");
    assert_eq!(
        smi_problems(&[], 4, "require"),
        "",
        "no nvidia-smi: nothing to check"
    );
}

#[test]
fn a_ten_bit_output_keeps_its_depth_and_tags() {
    let tagged = |pix: &str, depth, trc: &str| Probe {
        pix_fmt: pix.into(),
        bit_depth: depth,
        primaries: Some("bt2020".into()),
        transfer: Some(trc.into()),
        matrix: Some("bt2020nc".into()),
        ..Probe::default()
    };
    let src = tagged("yuv420p10le", 10, "smpte2084");
    assert_eq!(
        pixel_problems(&tagged("yuv420p10le", 10, "smpte2084"), &src),
        ""
    );
    let p = pixel_problems(&tagged("yuv420p", 8, "smpte2084"), &src);
    assert!(p.contains("yuv420p (8-bit), not 10-bit"), "{p}");
    let p = pixel_problems(&tagged("yuv420p10le", 10, "bt709"), &src);
    assert!(p.contains("transfer Some(\"bt709\")"), "{p}");
    let untagged = Probe {
        pix_fmt: "yuv420p10le".into(),
        bit_depth: 10,
        ..Probe::default()
    };
    assert!(pixel_problems(&untagged, &src).contains("primaries None"));
}

#[test]
fn budgets_and_av1_decoders_come_from_the_inventory() {
    let json = r#"{"cards": [{"index": 0, "encode_budget": 4, "av1_nvdec": false},
                             {"index": 1, "encode_budget": 8, "av1_nvdec": true}]}"#;
    let (budgets, av1) = budgets_of(json);
    assert_eq!(budgets, BTreeMap::from([(0, 4), (1, 8)]));
    assert_eq!(av1, BTreeSet::from([1]));
    assert_eq!(budgets_of("not json"), (BTreeMap::new(), BTreeSet::new()));
}
