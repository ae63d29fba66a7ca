use super::test_boxes::*;
use super::*;
use proptest::prelude::*;

fn kinds(data: &[u8]) -> Vec<Result<(String, usize, usize), BmffError>> {
    Boxes::new(data)
        .map(|b| b.map(|b| (b.kind(), b.offset, b.payload.len())))
        .collect()
}

#[test]
fn iterates_plain_large_and_to_end_boxes() {
    let mut data = bx(b"ftyp", b"isom");
    let mut large = 1u32.to_be_bytes().to_vec();
    large.extend_from_slice(b"mdat");
    large.extend_from_slice(&19u64.to_be_bytes());
    large.extend_from_slice(b"abc");
    data.extend(large);
    data.extend_from_slice(&0u32.to_be_bytes());
    data.extend_from_slice(b"free12");
    assert_eq!(
        kinds(&data),
        vec![
            Ok(("ftyp".into(), 0, 4)),
            Ok(("mdat".into(), 12, 3)),
            Ok(("free".into(), 31, 2))
        ]
    );
}

#[test]
fn reports_truncated_and_overlong_boxes_then_stops() {
    let mut data = bx(b"ftyp", b"isom");
    data.extend_from_slice(&[0, 0, 0]);
    assert_eq!(
        kinds(&data)[1],
        Err(BmffError::TruncatedHeader { offset: 12 })
    );
    let mut data = 100u32.to_be_bytes().to_vec();
    data.extend_from_slice(b"moov1234");
    let got = kinds(&data);
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0],
        Err(BmffError::BadSize {
            fourcc: "moov".into(),
            offset: 0,
            size: 100,
            available: 12
        })
    );
    let mut small = 4u32.to_be_bytes().to_vec();
    small.extend_from_slice(b"free");
    assert!(matches!(
        kinds(&small)[0],
        Err(BmffError::BadSize { size: 4, .. })
    ));
}

#[test]
fn children_carry_absolute_offsets() {
    let data = [bx(b"ftyp", b"isom"), bx(b"moov", &bx(b"trak", b"xy"))].concat();
    let moov = find(Boxes::new(&data), b"moov").unwrap().unwrap();
    let trak = find(moov.children(), b"trak").unwrap().unwrap();
    assert_eq!((trak.offset, trak.payload), (20, &b"xy"[..]));
}

#[test]
fn avc_codec_string_is_hex_of_profile_constraints_level() {
    assert_eq!(
        codec_string("avc1", &avcc(0x64, 0x00, 0x1f)[8..]),
        Some("avc1.64001f".into())
    );
    assert_eq!(
        codec_string("avc3", &[1, 0x42, 0xc0, 0x1e]),
        Some("avc3.42c01e".into())
    );
    assert_eq!(codec_string("avc1", &[1, 0x42]), None);
}

#[test]
fn hevc_codec_strings_follow_annex_e() {
    let main = hvcc(0, 0, 1, 0x6000_0000, [0x90, 0, 0, 0, 0, 0], 93);
    assert_eq!(
        codec_string("hvc1", &main[8..]),
        Some("hvc1.1.6.L93.90".into())
    );
    let main10 = hvcc(0, 0, 2, 0x2000_0000, [0x90, 0, 0, 0, 0, 0], 120);
    assert_eq!(
        codec_string("hvc1", &main10[8..]),
        Some("hvc1.2.4.L120.90".into())
    );
    let apple = hvcc(0, 0, 2, 0x2000_0000, [0xb0, 0, 0, 0, 0, 0], 123);
    assert_eq!(
        codec_string("hvc1", &apple[8..]),
        Some("hvc1.2.4.L123.B0".into())
    );
    let high = hvcc(0, 1, 1, 0x6000_0000, [0x90, 0, 0, 0, 0, 0], 150);
    assert_eq!(
        codec_string("hev1", &high[8..]),
        Some("hev1.1.6.H150.90".into())
    );
    let spaced = hvcc(1, 0, 4, 0x0800_0000, [0xb0, 0, 0, 0, 0, 0x01], 60);
    assert_eq!(
        codec_string("hvc1", &spaced[8..]),
        Some("hvc1.A4.10.L60.B0.00.00.00.00.01".into())
    );
    let bare = hvcc(0, 0, 1, 0x6000_0000, [0; 6], 93);
    assert_eq!(
        codec_string("hvc1", &bare[8..]),
        Some("hvc1.1.6.L93".into())
    );
    assert_eq!(codec_string("hvc1", &main[8..20]), None);
}

#[test]
fn av1_codec_strings() {
    assert_eq!(
        codec_string("av01", &av1c(0, 8, 0, false, false)[8..]),
        Some("av01.0.08M.08".into())
    );
    assert_eq!(
        codec_string("av01", &av1c(0, 9, 0, true, false)[8..]),
        Some("av01.0.09M.10".into())
    );
    assert_eq!(
        codec_string("av01", &av1c(2, 13, 1, true, true)[8..]),
        Some("av01.2.13H.12".into())
    );
}

#[test]
fn aac_codec_string_reads_the_object_type_with_escape() {
    assert_eq!(
        codec_string("mp4a", &[0x12, 0x10]),
        Some("mp4a.40.2".into())
    );
    assert_eq!(
        codec_string("mp4a", &[0x2b, 0x92, 0x08]),
        Some("mp4a.40.5".into())
    );
    assert_eq!(
        codec_string("mp4a", &[0xf9, 0x40]),
        Some("mp4a.40.42".into())
    );
    assert_eq!(codec_string("mp4a", &[0xf9]), None);
    assert_eq!(codec_string("wvtt", &[]), Some("wvtt".into()));
    assert_eq!(codec_string("mp4v", &[1, 2, 3, 4]), None);
}

#[test]
fn esds_descriptors_yield_object_type_and_asc() {
    let b = esds(&[0x11, 0x90]);
    assert_eq!(esds_config(&b[8..]), Ok((0x40, Some(&[0x11u8, 0x90][..]))));
}

#[test]
fn init_info_of_avc_hevc_av1_aac_and_wvtt() {
    let avc = init_segment(
        b"vide",
        90000,
        0,
        &visual_entry(b"avc1", 1920, 1080, &avcc(0x64, 0, 0x28)),
    );
    assert_eq!(
        init_info(&avc),
        Ok(InitInfo {
            timescale: 90000,
            handler: "vide".into(),
            fourcc: "avc1".into(),
            dimensions: Some((1920, 1080)),
            channels: None,
            sample_rate: None,
            codec: Some("avc1.640028".into()),
        })
    );
    let hevc_entry = visual_entry(
        b"hvc1",
        3840,
        2160,
        &hvcc(0, 0, 2, 0x2000_0000, [0x90, 0, 0, 0, 0, 0], 153),
    );
    let hevc = init_info(&init_segment(b"vide", 60000, 1, &hevc_entry)).unwrap();
    assert_eq!(
        (hevc.timescale, hevc.dimensions),
        (60000, Some((3840, 2160)))
    );
    assert_eq!(hevc.codec.as_deref(), Some("hvc1.2.4.L153.90"));
    let av1 = init_info(&init_segment(
        b"vide",
        24,
        0,
        &visual_entry(b"av01", 640, 360, &av1c(0, 4, 0, false, false)),
    ))
    .unwrap();
    assert_eq!(av1.codec.as_deref(), Some("av01.0.04M.08"));
    let aac = init_info(&init_segment(
        b"soun",
        48000,
        0,
        &audio_entry(6, 48000, &esds(&[0x11, 0xb0])),
    ))
    .unwrap();
    assert_eq!(
        (aac.handler.as_str(), aac.fourcc.as_str()),
        ("soun", "mp4a")
    );
    assert_eq!(
        (aac.channels, aac.sample_rate, aac.codec.as_deref()),
        (Some(6), Some(48000), Some("mp4a.40.2"))
    );
    let vtt = init_info(&init_segment(
        b"text",
        1000,
        0,
        &bx(b"wvtt", &[0, 0, 0, 0, 0, 0, 0, 1]),
    ))
    .unwrap();
    assert_eq!(
        (vtt.handler.as_str(), vtt.codec.as_deref(), vtt.dimensions),
        ("text", Some("wvtt"), None)
    );
}

#[test]
fn init_info_reports_missing_boxes() {
    assert_eq!(
        init_info(&bx(b"ftyp", b"isom")),
        Err(BmffError::Missing("moov"))
    );
    assert_eq!(
        init_info(&bx(b"moov", &bx(b"trak", &[]))),
        Err(BmffError::Missing("mdia"))
    );
}

#[test]
fn segment_info_sums_durations_and_finds_first_sample_end() {
    let s = [
        Sample {
            duration: 3000,
            size: 5000,
            cto: 6000,
        },
        Sample {
            duration: 3000,
            size: 700,
            cto: 0,
        },
        Sample {
            duration: 3000,
            size: 800,
            cto: -3000,
        },
    ];
    let seg = media_segment(7, 1, 900_000, &s);
    let moof_at = 24; // styp is 24 bytes
    let moof_len = fragment(7, 1, 900_000, &s).len() - (5000 + 700 + 800 + 8);
    let info = segment_info(&seg).unwrap();
    assert_eq!(
        info,
        SegmentInfo {
            track_id: 1,
            base_media_decode_time: 900_000,
            duration: 9000,
            sample_count: 3,
            earliest_presentation_time: 903_000,
            first_sample_end: Some((moof_at + moof_len + 8 + 5000) as u64),
        }
    );
    assert_eq!(info.first_sample_end, Some(24 + 124 + 8 + 5000));
}

#[test]
fn segment_info_spans_several_fragments() {
    let mut seg = bx(b"styp", b"msdh\0\0\0\0");
    seg.extend(bx(b"sidx", &[0u8; 32]));
    seg.extend(fragment(1, 2, 1000, &samples(2, 512, 10)));
    seg.extend(fragment(2, 2, 2024, &samples(3, 512, 10)));
    let info = segment_info(&seg).unwrap();
    assert_eq!(
        (
            info.base_media_decode_time,
            info.duration,
            info.sample_count
        ),
        (1000, 2560, 5)
    );
    assert_eq!((info.track_id, info.earliest_presentation_time), (2, 1000));
}

fn default_duration_segment(tfhd_flags: u32) -> Vec<u8> {
    let mut tfhd = 1u32.to_be_bytes().to_vec();
    tfhd.extend_from_slice(&1024u32.to_be_bytes());
    tfhd.extend_from_slice(&300u32.to_be_bytes());
    let mut traf = full(b"tfhd", 0, tfhd_flags, &tfhd);
    traf.extend(full(b"tfdt", 0, 0, &48000u32.to_be_bytes()));
    traf.extend(full(b"trun", 0, 0, &4u32.to_be_bytes()));
    let mut out = bx(b"moof", &bx(b"traf", &traf));
    out.extend(bx(b"mdat", &[0u8; 1200]));
    out
}

#[test]
fn segment_info_uses_tfhd_defaults_or_fails_without_them() {
    let info = segment_info(&default_duration_segment(0x02_0018)).unwrap();
    assert_eq!(
        (
            info.base_media_decode_time,
            info.duration,
            info.sample_count
        ),
        (48000, 4096, 4)
    );
    // No data_offset in trun: the first sample starts at the moof (the base) itself.
    assert_eq!(info.first_sample_end, Some(300));
    let err = segment_info(&default_duration_segment(0x02_0000)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "sample duration is in neither trun nor tfhd (the trex default is unknown)"
    );
}

#[test]
fn segment_info_without_moof_or_samples_is_an_error() {
    assert_eq!(
        segment_info(&bx(b"styp", b"msdh")),
        Err(BmffError::Missing("moof"))
    );
    let mut traf = full(b"tfhd", 0, 0x02_0000, &1u32.to_be_bytes());
    traf.extend(full(b"trun", 0, 0x100, &100u32.to_be_bytes()));
    assert_eq!(
        segment_info(&bx(b"moof", &bx(b"traf", &traf))),
        Err(BmffError::Truncated("trun"))
    );
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let total: usize = Boxes::new(&data).filter_map(Result::ok).map(|b| b.size()).sum();
        prop_assert!(total <= data.len());
        let _ = init_info(&data);
        let _ = segment_info(&data);
        let _ = esds_config(&data);
        for f in ["avc1", "hvc1", "av01", "mp4a"] {
            let _ = codec_string(f, &data);
        }
    }

    #[test]
    fn mutated_segments_never_panic(pos in 0usize..200, byte in any::<u8>()) {
        let mut seg = media_segment(1, 1, 0, &samples(3, 1000, 50));
        let i = pos % seg.len();
        seg[i] = byte;
        let _ = segment_info(&seg);
    }

    #[test]
    fn built_fragments_read_back(tfdt in 0u64..1 << 40, durs in proptest::collection::vec(1u32..100_000, 1..20)) {
        let s: Vec<Sample> = durs.iter().map(|&d| Sample { duration: d, size: 3, cto: 0 }).collect();
        let info = segment_info(&media_segment(1, 5, tfdt, &s)).unwrap();
        prop_assert_eq!(info.base_media_decode_time, tfdt);
        prop_assert_eq!(info.duration, durs.iter().map(|&d| u64::from(d)).sum::<u64>());
        prop_assert_eq!(info.sample_count, durs.len() as u64);
    }

    #[test]
    fn hevc_compat_flags_reverse(compat in any::<u32>()) {
        let b = hvcc(0, 0, 1, compat, [0; 6], 93);
        let s = codec_string("hvc1", &b[8..]).unwrap();
        let field = s.split('.').nth(2).unwrap();
        prop_assert_eq!(u32::from_str_radix(field, 16).unwrap().reverse_bits(), compat);
    }
}
