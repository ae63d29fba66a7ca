//! What a demuxed input, its streams and its decoded frames say that ffmpeg-next does not
//! expose: packet and frame flags, a stream's codec parameters and side data, the demuxer's
//! duration estimate.
//!
//! Why: the probe, the split and the QC gate read these to tell a damaged or hostile input
//! from a whole one; each read below states the invariant it relies on.

use ff::ffi;
use ff::packet::Ref as _;
use ffmpeg_next as ff;

/// True when the demuxer flagged the packet as "decode but do not show" (edit-list pre-roll).
pub(crate) fn packet_is_discard(packet: &ff::Packet) -> bool {
    // SAFETY: `as_ptr` points at the live AVPacket owned by `packet` for this borrow; reading
    // an int field does not alias any mutable access.
    let flags = unsafe { (*packet.as_ptr()).flags };
    flags & ffi::AV_PKT_FLAG_DISCARD != 0
}

/// True when the decoder says a frame is damaged: flagged corrupt, or rebuilt by error
/// concealment (`decode_error_flags`). Counted against the job's `source_corrupt` limit.
pub(crate) fn frame_is_damaged(frame: &ff::frame::Video) -> bool {
    // SAFETY: `as_ptr` points at the live AVFrame owned by `frame` for this borrow; reading
    // two int fields does not alias any mutable access.
    let (flags, errors) = unsafe {
        let f = frame.as_ptr();
        ((*f).flags, (*f).decode_error_flags)
    };
    flags & ffi::AV_FRAME_FLAG_CORRUPT != 0 || errors != 0
}

/// Bits per component of a pixel format (8 for yuv420p, 10 for yuv422p10le).
pub(crate) fn pixel_depth(format: ff::format::Pixel) -> u8 {
    let Some(desc) = format.descriptor() else {
        return 8;
    };
    // SAFETY: the descriptor is a static table entry from libavutil; comp[0] always exists.
    let depth = unsafe { (*desc.as_ptr()).comp[0].depth };
    u8::try_from(depth).unwrap_or(8)
}

/// The sample aspect ratio FFmpeg's own tools give a stream (`av_guess_sample_aspect_ratio`
/// without a frame): the container's when it states one, else the codec's.
///
/// Why not the codec's alone: some bitstreams imply an aspect the container overrides. An
/// H.263 picture header without an extended PAR means 12:11 to the decoder, while a 3GP
/// `pasp` box (and every player) says square pixels.
pub(crate) fn guessed_sar(
    ictx: &ff::format::context::Input,
    stream: &ff::format::stream::Stream,
) -> ff::Rational {
    // SAFETY: both pointers come from live ffmpeg-next wrappers that `ictx` owns for the
    // duration of the call; with a null frame the function only reads the stream's and its
    // codecpar's `sample_aspect_ratio` fields and writes nothing.
    unsafe {
        ffi::av_guess_sample_aspect_ratio(
            ictx.as_ptr() as *mut ffi::AVFormatContext,
            stream.as_ptr() as *mut ffi::AVStream,
            std::ptr::null_mut(),
        )
        .into()
    }
}

/// The pixel format a stream's codec parameters declare (`None` when unknown).
pub(crate) fn codecpar_format(stream: &ff::format::stream::Stream) -> ff::format::Pixel {
    // SAFETY: the stream and its codecpar live as long as the input context `stream` borrows.
    let raw = unsafe { (*(*stream.as_ptr()).codecpar).format };
    if raw < 0 || raw >= ffi::AVPixelFormat::AV_PIX_FMT_NB as libc::c_int {
        return ff::format::Pixel::None;
    }
    // SAFETY: libavformat writes codecpar.format from an AVPixelFormat, and the value is
    // checked to lie inside the enum's range, which has no gaps.
    unsafe { std::mem::transmute::<libc::c_int, ffi::AVPixelFormat>(raw) }.into()
}

/// The codec extradata (SPS/PPS, sequence header) of a stream, to check segments agree.
pub(crate) fn stream_extradata(stream: &ff::format::stream::Stream) -> Vec<u8> {
    // SAFETY: codecpar lives as long as the input context; extradata is either null or
    // `extradata_size` readable bytes.
    unsafe {
        let par = (*stream.as_ptr()).codecpar;
        let (ptr, len) = ((*par).extradata, (*par).extradata_size);
        if ptr.is_null() || len <= 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(ptr, len as usize).to_vec()
        }
    }
}

/// The codec's reorder delay in frames as the stream's parameters state it (`video_delay`,
/// filled from the decoder during stream-info probing): non-zero when pictures are decoded
/// ahead of their display (B-frames).
pub(crate) fn stream_video_delay(stream: &ff::format::stream::Stream) -> i32 {
    // SAFETY: `parameters().as_ptr()` points at the stream's live AVCodecParameters for this
    // borrow; reading an int field does not alias any mutable access.
    unsafe { (*stream.parameters().as_ptr()).video_delay }
}

/// True when the demuxer's duration is an estimate from the bit rate (no header duration and
/// no timestamps read at the end), so it cannot tell a truncated file from a whole one.
pub(crate) fn duration_is_bitrate_guess(ictx: &ff::format::context::Input) -> bool {
    // SAFETY: `as_ptr` points at the live AVFormatContext owned by `ictx`; reading an enum
    // field set by avformat_find_stream_info does not alias any mutable access.
    let method = unsafe { (*ictx.as_ptr()).duration_estimation_method };
    method == ffi::AVDurationEstimationMethod::AVFMT_DURATION_FROM_BITRATE
}
