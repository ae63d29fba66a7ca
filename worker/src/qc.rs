//! The QC gate of a segment: every encoded rendition is checked against the plan before the
//! segment's event says done.
//!
//! Why here and not only at the stitch: a segment that lost frames (a decoder that could not
//! start where the plan said it could) must fail while its cause is known, with the segment
//! and the figures in the reason, not surface later as a stitched file that is short.

use tessera_farm::FarmError;
use tessera_model::encode::EncodeResult;
use tessera_model::error_code::{ErrorClass, ErrorCode};
use tessera_model::wire::SegmentEncode;

/// Checks each rendition of `result` against the plan in `encode`: it starts with a keyframe,
/// holds exactly the planned frames, and its first and last pts are the range's.
pub(crate) fn check_segment(
    segment: u32,
    encode: &SegmentEncode,
    result: &EncodeResult,
) -> Result<(), FarmError> {
    for r in &result.renditions {
        if r.frames > 0 && !r.starts_with_keyframe {
            // A fault of this encode, not of the source: another attempt may succeed.
            return Err(FarmError::Media {
                code: ErrorCode::EncodeFailed,
                class: ErrorClass::Retry,
                message: format!("rendition {} did not start with a keyframe", r.name),
            });
        }
        let what = || format!("segment {segment}, rendition {}", r.name);
        if r.frames != encode.expected_frames {
            return Err(qc_failed(
                what(),
                format!(
                    "{} frames encoded, the plan has {} (the source could not be decoded where \
                     the plan starts this segment, or lost frames)",
                    r.frames, encode.expected_frames
                ),
            ));
        }
        let Some((first, last)) = encode.expected_pts else {
            continue;
        };
        if r.first_pts != Some(first) {
            return Err(qc_failed(
                what(),
                format!(
                    "first frame at pts {}, the plan starts at {first}",
                    show(r.first_pts)
                ),
            ));
        }
        // The range gate nudges a repeated pts forward by one tick, so the last frame may sit
        // a little after the planned one, but never before it nor outside the range.
        let last_ok = r
            .last_pts
            .is_some_and(|p| p >= last && p < encode.source.end_pts.max(last + 1));
        if !last_ok {
            return Err(qc_failed(
                what(),
                format!(
                    "last frame at pts {}, the plan ends at {last}",
                    show(r.last_pts)
                ),
            ));
        }
    }
    Ok(())
}

fn show(pts: Option<i64>) -> String {
    pts.map_or_else(|| "none".into(), |p| p.to_string())
}

fn qc_failed(what: String, reason: String) -> FarmError {
    FarmError::Media {
        code: ErrorCode::QcFailed,
        class: ErrorClass::Abort,
        message: format!("{what}: quality control failed: {reason}"),
    }
}

/// What to warn about how a GPU encode decoded segment `segment`: NVDEC was planned but
/// frames came out of a software decode (and were uploaded), so the card's decoder sat idle
/// and one CPU thread decoded. Not a failure: the frames are right, only slow.
pub(crate) fn gpu_decode_warning(segment: u32, result: &EncodeResult) -> Option<String> {
    let d = result.gpu_decode.as_ref().filter(|d| d.fell_back())?;
    Some(format!(
        "segment {segment}: NVDEC was planned but {} of {} frames were decoded in software \
         (hwaccel {}): the decoder fell back",
        d.uploaded_frames,
        d.uploaded_frames + d.cuda_frames,
        d.hwaccel.as_deref().unwrap_or("none")
    ))
}

/// What to warn about the card a GPU encode of segment `segment` ran on: the driver names
/// another card than the one booked (`booked`, NVML's PCI bus id), so sessions went to a
/// card whose budget was not charged (the CUDA ordinal mapping is wrong: finding 9).
pub(crate) fn gpu_card_warning(
    segment: u32,
    booked: Option<&str>,
    result: &EncodeResult,
) -> Option<String> {
    let ran = result.gpu_decode.as_ref()?.pci_bus_id.as_deref()?;
    let booked = booked?;
    (!tessera_model::encode::same_pci_card(ran, booked)).then(|| {
        format!(
            "segment {segment}: encoded on the card at PCI {ran}, but the card booked is at \
             {booked}: check CUDA_VISIBLE_DEVICES and the device plugin"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::encode::{RenditionResult, SegmentSource};
    use tessera_model::probe::{ColorInfo, Rational};
    use tessera_model::wire::SegmentEncode;

    fn plan(frames: u64, pts: Option<(i64, i64)>) -> SegmentEncode {
        SegmentEncode {
            source: SegmentSource {
                start_pts: 100,
                end_pts: 200,
                time_base: Rational { num: 1, den: 25 },
                bias: 0,
                frame_rate: Rational { num: 25, den: 1 },
                sample_aspect_ratio: Rational { num: 1, den: 1 },
                source_size: None,
                color: ColorInfo::default(),
                source_bit_depth: 8,
                keyframes: Vec::new(),
            },
            expected_frames: frames,
            expected_pts: pts,
            source_codec: "h264".into(),
            source_pix_fmt: "yuv420p".into(),
        }
    }

    fn result(frames: u64, first: Option<i64>, last: Option<i64>, key: bool) -> EncodeResult {
        EncodeResult {
            decoded_frames: frames,
            frames_in_range: frames,
            renditions: vec![RenditionResult {
                name: "720p".into(),
                frames,
                first_pts: first,
                last_pts: last,
                width: 1280,
                height: 720,
                bytes: 1,
                starts_with_keyframe: key,
                encoder: "libx264".into(),
                target: None,
            }],
            media_seconds: 0.1,
            decode_errors: 0,
            gpu_decode: None,
        }
    }

    /// GPU re-review, failure 2: a decode planned on NVDEC whose frames came out in system
    /// memory is named; one on NVDEC, a planned CPU decode and the software path are not.
    #[test]
    fn an_nvdec_decode_that_fell_back_to_software_is_named() {
        use tessera_model::encode::GpuDecode;
        let mut r = result(100, Some(100), Some(199), true);
        assert_eq!(gpu_decode_warning(3, &r), None);
        let decode = |nvdec_planned, uploaded_frames, cuda_frames| GpuDecode {
            nvdec_planned,
            hwaccel: nvdec_planned.then(|| "h264_nvdec".to_string()),
            uploaded_frames,
            cuda_frames,
            pci_bus_id: None,
        };
        r.gpu_decode = Some(decode(true, 0, 100));
        assert_eq!(gpu_decode_warning(3, &r), None);
        r.gpu_decode = Some(decode(false, 100, 0));
        assert_eq!(gpu_decode_warning(3, &r), None);
        r.gpu_decode = Some(decode(true, 40, 60));
        let w = gpu_decode_warning(3, &r).expect("named");
        assert!(w.contains("segment 3") && w.contains("40 of 100"), "{w}");
    }

    /// Finding 9: a segment whose CUDA context was on another card than the one booked is
    /// named; the same card (NVML's and CUDA's spellings) and an unknown one are not.
    #[test]
    fn a_segment_on_another_card_than_booked_is_named() {
        use tessera_model::encode::GpuDecode;
        let mut r = result(100, Some(100), Some(199), true);
        let booked = Some("00000000:5E:00.0");
        assert_eq!(gpu_card_warning(3, booked, &r), None, "software");
        let on = |bus: Option<&str>| GpuDecode {
            nvdec_planned: true,
            hwaccel: Some("h264_nvdec".into()),
            uploaded_frames: 0,
            cuda_frames: 100,
            pci_bus_id: bus.map(String::from),
        };
        r.gpu_decode = Some(on(Some("0000:5e:00.0")));
        assert_eq!(gpu_card_warning(3, booked, &r), None);
        assert_eq!(gpu_card_warning(3, None, &r), None, "no NVML id");
        r.gpu_decode = Some(on(None));
        assert_eq!(
            gpu_card_warning(3, booked, &r),
            None,
            "the driver did not say"
        );
        r.gpu_decode = Some(on(Some("0000:1a:00.0")));
        let w = gpu_card_warning(3, booked, &r).expect("named");
        assert!(
            w.contains("segment 3") && w.contains("0000:1a:00.0") && w.contains("5E"),
            "{w}"
        );
    }

    fn code(r: Result<(), FarmError>) -> Option<(ErrorCode, ErrorClass)> {
        r.err().map(|e| (e.code(), e.class()))
    }

    #[test]
    fn a_segment_as_planned_passes() {
        let p = plan(100, Some((100, 199)));
        assert!(check_segment(0, &p, &result(100, Some(100), Some(199), true)).is_ok());
        // Older dispatcher: no pts to check, the count still is.
        let p = plan(100, None);
        assert!(check_segment(0, &p, &result(100, Some(120), Some(150), true)).is_ok());
    }

    #[test]
    fn every_deviation_fails_with_its_code() {
        let p = plan(100, Some((100, 199)));
        let qc = Some((ErrorCode::QcFailed, ErrorClass::Abort));
        for (frames, first, last) in [
            (88, Some(100), Some(199)),
            (101, Some(100), Some(199)),
            (0, None, None),
            (100, Some(112), Some(199)),
            (100, Some(100), Some(187)),
            (100, Some(100), Some(200)),
            (100, Some(100), None),
        ] {
            let r = result(frames, first, last, true);
            assert_eq!(
                code(check_segment(3, &p, &r)),
                qc,
                "{frames} {first:?} {last:?}"
            );
        }
        let r = result(100, Some(100), Some(199), false);
        assert_eq!(
            code(check_segment(3, &p, &r)),
            Some((ErrorCode::EncodeFailed, ErrorClass::Retry))
        );
    }

    #[test]
    fn the_reason_names_the_segment_rendition_and_figures() {
        let p = plan(100, Some((100, 199)));
        let err = check_segment(7, &p, &result(88, Some(100), Some(199), true)).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("segment 7, rendition 720p"), "{text}");
        assert!(text.contains("88 frames") && text.contains("100"), "{text}");
    }
}
