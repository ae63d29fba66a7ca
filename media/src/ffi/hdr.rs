//! The HDR10 static metadata FFmpeg attaches to a stream or a decoded frame.
//!
//! Why: the generated bindings leave out the structs FFmpeg stores it in, so they are declared
//! here with FFmpeg 5.1's layout and read once into tessera-model's `HdrMetadata`.

use ff::ffi;
use ffmpeg_next as ff;

/// libavutil/mastering_display_metadata.h (FFmpeg 5.1), which the generated bindings leave
/// out: the layout FFmpeg allocates these side-data entries with.
#[repr(C)]
struct AVMasteringDisplayMetadata {
    display_primaries: [[ffi::AVRational; 2]; 3],
    white_point: [ffi::AVRational; 2],
    min_luminance: ffi::AVRational,
    max_luminance: ffi::AVRational,
    has_primaries: libc::c_int,
    has_luminance: libc::c_int,
}

/// See [`AVMasteringDisplayMetadata`].
#[repr(C)]
#[allow(non_snake_case)]
struct AVContentLightMetadata {
    MaxCLL: libc::c_uint,
    MaxFALL: libc::c_uint,
}

/// The HDR10 static metadata FFmpeg attached to a stream (Matroska/MP4 `mdcv`/`clli`) or, when
/// `frame` is given, to a decoded frame (HEVC/AV1 SEI or metadata OBUs).
pub(crate) fn hdr_metadata(
    stream: Option<&ff::format::stream::Stream>,
    frame: Option<&ff::frame::Video>,
) -> tessera_model::hdr::HdrMetadata {
    use tessera_model::hdr::{HdrMetadata, MasteringDisplay};
    let q = |r: ffi::AVRational, scale: f64| -> u32 {
        if r.den == 0 {
            0
        } else {
            (f64::from(r.num) / f64::from(r.den) * scale)
                .round()
                .max(0.0) as u32
        }
    };
    // SAFETY: `av_stream_get_side_data` and `av_frame_get_side_data` return either null or a
    // pointer into side data owned by the live stream/frame borrowed here; FFmpeg sizes these
    // entries as the AVMasteringDisplayMetadata/AVContentLightMetadata structs they hold, and
    // the values are copied out before the borrow ends.
    unsafe {
        let lookup = |stream_kind: ffi::AVPacketSideDataType,
                      frame_kind: ffi::AVFrameSideDataType|
         -> *const u8 {
            if let Some(f) = frame {
                let sd = ffi::av_frame_get_side_data(f.as_ptr(), frame_kind);
                if !sd.is_null() {
                    return (*sd).data;
                }
            }
            if let Some(s) = stream {
                let mut size = 0;
                let data = ffi::av_stream_get_side_data(s.as_ptr(), stream_kind, &mut size);
                if !data.is_null() {
                    return data;
                }
            }
            std::ptr::null()
        };
        let md = lookup(
            ffi::AVPacketSideDataType::AV_PKT_DATA_MASTERING_DISPLAY_METADATA,
            ffi::AVFrameSideDataType::AV_FRAME_DATA_MASTERING_DISPLAY_METADATA,
        ) as *const AVMasteringDisplayMetadata;
        let mastering = (!md.is_null() && (*md).has_primaries != 0 && (*md).has_luminance != 0)
            .then(|| {
                let p = (*md).display_primaries;
                let xy = |i: usize| [q(p[i][0], 50000.0), q(p[i][1], 50000.0)];
                MasteringDisplay {
                    // FFmpeg stores R, G, B; x265 and the SEI order is G, B, R.
                    primaries: [xy(1), xy(2), xy(0)],
                    white: [
                        q((*md).white_point[0], 50000.0),
                        q((*md).white_point[1], 50000.0),
                    ],
                    max_luminance: q((*md).max_luminance, 10000.0),
                    min_luminance: q((*md).min_luminance, 10000.0),
                }
            });
        let cl = lookup(
            ffi::AVPacketSideDataType::AV_PKT_DATA_CONTENT_LIGHT_LEVEL,
            ffi::AVFrameSideDataType::AV_FRAME_DATA_CONTENT_LIGHT_LEVEL,
        ) as *const AVContentLightMetadata;
        let light_level = (!cl.is_null()).then(|| ((*cl).MaxCLL, (*cl).MaxFALL));
        HdrMetadata {
            mastering,
            light_level,
        }
    }
}
