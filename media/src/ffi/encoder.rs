//! Encoder fields ffmpeg-next has no accessor for: the colour tags set before opening, and the
//! priming samples read after.
//!
//! Why: the output must be tagged with the source's colour (or SDR after a tone map), and the
//! stitch needs the AAC priming to write the MP4 edit list.

use ff::ffi;
use ffmpeg_next as ff;

/// The encoder's priming samples (AAC: 1024), which the MP4 muxer turns into an edit list.
pub(crate) fn encoder_initial_padding(encoder: &ff::codec::encoder::Audio) -> i32 {
    // SAFETY: the encoder context is open and owned by `encoder`; initial_padding is a plain
    // int set by avcodec_open2.
    unsafe { (*encoder.as_ptr()).initial_padding }
}

/// Sets colour tags (by FFmpeg name) on an encoder context before it is opened.
pub(crate) fn set_encoder_color(
    enc: &mut ff::encoder::video::Video,
    color: &tessera_model::probe::ColorInfo,
) {
    fn lookup(
        name: &Option<String>,
        f: unsafe extern "C" fn(*const libc::c_char) -> libc::c_int,
    ) -> Option<libc::c_int> {
        let c = std::ffi::CString::new(name.as_deref()?).ok()?;
        // SAFETY: `c` is a valid NUL-terminated string for the duration of the call; the
        // *_from_name functions only read it and return a negative value when unknown.
        let v = unsafe { f(c.as_ptr()) };
        (v >= 0).then_some(v)
    }
    let primaries = lookup(&color.primaries, ffi::av_color_primaries_from_name);
    let transfer = lookup(&color.transfer, ffi::av_color_transfer_from_name);
    let matrix = lookup(&color.matrix, ffi::av_color_space_from_name);
    let range = lookup(&color.range, ffi::av_color_range_from_name);
    // SAFETY: the context is allocated and not yet opened; each value came from libavutil's
    // own name table, so it is a valid member of the corresponding enum.
    unsafe {
        let ctx = enc.as_mut_ptr();
        if let Some(v) = primaries {
            (*ctx).color_primaries = std::mem::transmute::<libc::c_int, ffi::AVColorPrimaries>(v);
        }
        if let Some(v) = transfer {
            (*ctx).color_trc =
                std::mem::transmute::<libc::c_int, ffi::AVColorTransferCharacteristic>(v);
        }
        if let Some(v) = matrix {
            (*ctx).colorspace = std::mem::transmute::<libc::c_int, ffi::AVColorSpace>(v);
        }
        if let Some(v) = range {
            (*ctx).color_range = std::mem::transmute::<libc::c_int, ffi::AVColorRange>(v);
        }
    }
}
