//! What the software scaler needs beyond ffmpeg-next: keeping full-range samples full range,
//! and the properties of the frame it scaled.
//!
//! Why: swscale copies only pixels and would squeeze "J" formats to limited range; without
//! these, captions, HDR metadata and colour tags would be lost on every scaled frame.

use ff::ffi;
use ffmpeg_next as ff;

/// Makes a scaler keep full-range samples full range (it would squeeze the "J" formats'
/// 0-255 into 16-235 when writing a plain YUV format): the output is then tagged full range,
/// as the source is, and FFmpeg's CLI does the same.
pub(crate) fn scaler_keeps_full_range(scaler: &mut ff::software::scaling::Context) {
    // SAFETY: the context is a live, initialised SwsContext owned by `scaler`; the getter
    // hands back pointers to tables inside it, which the setter reads before returning.
    unsafe {
        let ctx = scaler.as_mut_ptr();
        let (mut inv, mut table) = (std::ptr::null_mut(), std::ptr::null_mut());
        let (mut src_range, mut dst_range) = (0, 0);
        let (mut brightness, mut contrast, mut saturation) = (0, 0, 0);
        let got = ffi::sws_getColorspaceDetails(
            ctx,
            &mut inv,
            &mut src_range,
            &mut table,
            &mut dst_range,
            &mut brightness,
            &mut contrast,
            &mut saturation,
        );
        if got >= 0 {
            ffi::sws_setColorspaceDetails(ctx, inv, 1, table, 1, brightness, contrast, saturation);
        }
    }
}

/// Copies a frame's properties (side data such as ATSC A53 closed captions and HDR metadata,
/// colour tags, timestamps) onto a frame made from it by the scaler, which copies only
/// pixels: captions carried in the source's SEI then reach the encoder.
pub(crate) fn copy_frame_props(dst: &mut ff::frame::Video, src: &ff::frame::Video) {
    // SAFETY: both frames are live AVFrames owned by their wrappers for these borrows;
    // av_frame_copy_props only reads `src` and adds references/copies to `dst`.
    unsafe {
        ffi::av_frame_copy_props(dst.as_mut_ptr(), src.as_ptr());
    }
}
