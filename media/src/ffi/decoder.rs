//! Decoder switches ffmpeg-next has no setter for.

use ff::ffi;
use ffmpeg_next as ff;

/// Lets a decoder (not yet opened) take the shortcuts that change no frame count nor
/// timestamp (no loop filter, the codec's fast flags): the QC gate reads the structure of an
/// output, not its finest pixels, and should cost little next to the encodes.
pub(crate) fn decode_fast(ctx: &mut ff::codec::Context) {
    // SAFETY: the context is allocated and not yet opened; these are plain option fields.
    unsafe {
        let c = ctx.as_mut_ptr();
        (*c).skip_loop_filter = ffi::AVDiscard::AVDISCARD_ALL;
        (*c).flags2 |= ffi::AV_CODEC_FLAG2_FAST as libc::c_int;
    }
}

/// Makes an open decoder skip (`true`) or decode (`false`) the frames that no other frame
/// refers to, from the next packet sent on. A segment's chunk starts at the keyframe before
/// its range; the frames before the range are decoded only to serve as references, so the
/// ones nothing refers to need not be decoded at all. Decoders without the notion ignore it
/// (frame threads take the setting with each packet).
pub(crate) fn skip_nonref_frames(decoder: &mut ff::decoder::Video, skip: bool) {
    // SAFETY: the decoder owns a valid, opened AVCodecContext for this borrow; skip_frame is
    // a plain option field that libavcodec reads when a packet is sent.
    unsafe {
        let c = decoder.as_mut_ptr();
        (*c).skip_frame = if skip {
            ffi::AVDiscard::AVDISCARD_NONREF
        } else {
            ffi::AVDiscard::AVDISCARD_DEFAULT
        };
    }
}
