//! The few raw FFmpeg calls ffmpeg-next does not wrap. Every `unsafe` in the crate lives here.
//!
//! Why: keeping the FFI in one small audited module means the rest of the crate is safe Rust,
//! and each block below states the invariant it relies on. The CUDA hardware-context FFI of
//! the GPU path is the submodule `cuda` (ffi/cuda.rs, with the log capture in ffi/avlog.rs),
//! frame references (ffi/frame.rs), the decoder switches (ffi/decoder.rs), the demuxer index
//! reader (ffi/index.rs) and the open without stream-info probing (ffi/open.rs), under the same
//! rule.

mod avlog;
pub(crate) mod cuda;
mod decoder;
mod frame;
mod index;
mod open;

pub(crate) use decoder::{decode_fast, decode_references, skip_nonref_frames};
pub(crate) use frame::{buffersrc_write, frame_ref};
pub(crate) use index::keyframe_times;
pub(crate) use open::{find_stream_info, open_without_stream_info};

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

/// Attaches a display matrix (36 bytes) to an output stream before the header is written.
pub(crate) fn add_display_matrix(stream: &mut ff::format::stream::StreamMut, matrix: &[u8]) {
    if matrix.len() != 36 {
        return;
    }
    // SAFETY: the stream pointer is valid while `stream` borrows the output context, the
    // header is not written yet (side data must be set before), and av_stream_new_side_data
    // returns either null or a buffer of exactly `matrix.len()` bytes that the stream owns.
    unsafe {
        let dst = ffi::av_stream_new_side_data(
            stream.as_mut_ptr(),
            ffi::AVPacketSideDataType::AV_PKT_DATA_DISPLAYMATRIX,
            matrix.len(),
        );
        if !dst.is_null() {
            std::ptr::copy_nonoverlapping(matrix.as_ptr(), dst, matrix.len());
        }
    }
}

/// The encoder's priming samples (AAC: 1024), which the MP4 muxer turns into an edit list.
pub(crate) fn encoder_initial_padding(encoder: &ff::codec::encoder::Audio) -> i32 {
    // SAFETY: the encoder context is open and owned by `encoder`; initial_padding is a plain
    // int set by avcodec_open2.
    unsafe { (*encoder.as_ptr()).initial_padding }
}

/// Sets the priming samples on an output stream's codec parameters before the header.
pub(crate) fn set_initial_padding(stream: &mut ff::format::stream::StreamMut, samples: i32) {
    // SAFETY: codecpar is allocated by avformat_new_stream and owned by the stream; the header
    // is not written yet, so the muxer has not read it.
    unsafe {
        (*(*stream.as_mut_ptr()).codecpar).initial_padding = samples;
    }
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

/// Whether the muxer of `octx` has its own codec tag for `id` (MP4 has `avc1` for H.264; NUT
/// has none for ProRes).
pub(crate) fn muxer_has_tag(octx: &ff::format::context::Output, id: ff::codec::Id) -> bool {
    let mut tag: libc::c_uint = 0;
    // SAFETY: the output format is a static libavformat descriptor; `codec_tag` is null or a
    // null-terminated list of tables, which av_codec_get_tag2 only reads.
    unsafe {
        let tags = (*octx.format().as_ptr()).codec_tag;
        !tags.is_null() && ffi::av_codec_get_tag2(tags, id.into(), &mut tag) != 0
    }
}

/// Drops a codec tag copied from another container when the muxer has its own for the codec
/// (an MP4 `avc1` is invalid in NUT and vice versa); otherwise keeps it, as FFmpeg's remuxer
/// does, so codecs the muxer has no table entry for (ProRes in NUT) still go through.
pub(crate) fn adapt_codec_tag(stream: &mut ff::format::stream::StreamMut, muxer_has_tag: bool) {
    if !muxer_has_tag {
        return;
    }
    // SAFETY: codecpar is owned by the stream of an output context whose header is unwritten.
    unsafe {
        (*(*stream.as_mut_ptr()).codecpar).codec_tag = 0;
    }
}

/// Sets a stream's fourcc (HEVC in a streaming package must be `hvc1`, which Apple players
/// require, not the MP4 muxer's default `hev1`).
pub(crate) fn set_codec_tag(stream: &mut ff::format::stream::StreamMut, fourcc: [u8; 4]) {
    // SAFETY: codecpar is owned by the stream of an output context whose header is unwritten.
    unsafe {
        (*(*stream.as_mut_ptr()).codecpar).codec_tag = u32::from_le_bytes(fourcc);
    }
}

/// Gives a stream of a NUT intermediate the fourcc NUT's own tag tables have for its codec,
/// else the source's (ProRes), else the RIFF or QuickTime tag the NUT demuxer reads back.
///
/// Why not clear it as [`adapt_codec_tag`] does: NUT writes its native tag for the codecs it
/// knows and otherwise the stream's, and refuses a stream with neither ("No codec tag
/// defined"). MXF carries no fourcc for DNxHD, whose tag NUT finds only in the RIFF table it
/// also accepts; setting the table's tag works for every codec the tables know.
pub(crate) fn set_nut_codec_tag(
    octx: &mut ff::format::context::Output,
    stream_index: usize,
    id: ff::codec::Id,
) {
    let mut tag: libc::c_uint = 0;
    // SAFETY: the output format and the RIFF/QuickTime tables are static libavformat data:
    // null or null-terminated lists of tables that av_codec_get_tag2 only reads. The stream's
    // codecpar is owned by the output context, whose header is not written yet.
    unsafe {
        let ctx = octx.as_mut_ptr();
        if stream_index >= (*ctx).nb_streams as usize {
            return;
        }
        let par = (*(*(*ctx).streams.add(stream_index))).codecpar;
        let own = (*(*ctx).oformat).codec_tag;
        if !own.is_null() && ffi::av_codec_get_tag2(own, id.into(), &mut tag) != 0 {
            (*par).codec_tag = tag;
            return;
        }
        if (*par).codec_tag != 0 {
            return;
        }
        let tables = [
            ffi::avformat_get_riff_video_tags(),
            ffi::avformat_get_mov_video_tags(),
            std::ptr::null(),
        ];
        if ffi::av_codec_get_tag2(tables.as_ptr(), id.into(), &mut tag) != 0 {
            (*par).codec_tag = tag;
        }
    }
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

/// True when the demuxer's duration is an estimate from the bit rate (no header duration and
/// no timestamps read at the end), so it cannot tell a truncated file from a whole one.
pub(crate) fn duration_is_bitrate_guess(ictx: &ff::format::context::Input) -> bool {
    // SAFETY: `as_ptr` points at the live AVFormatContext owned by `ictx`; reading an enum
    // field set by avformat_find_stream_info does not alias any mutable access.
    let method = unsafe { (*ictx.as_ptr()).duration_estimation_method };
    method == ffi::AVDurationEstimationMethod::AVFMT_DURATION_FROM_BITRATE
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

/// The codec's reorder delay in frames as the stream's parameters state it (`video_delay`,
/// filled from the decoder during stream-info probing): non-zero when pictures are decoded
/// ahead of their display (B-frames).
pub(crate) fn stream_video_delay(stream: &ff::format::stream::Stream) -> i32 {
    // SAFETY: `parameters().as_ptr()` points at the stream's live AVCodecParameters for this
    // borrow; reading an int field does not alias any mutable access.
    unsafe { (*stream.parameters().as_ptr()).video_delay }
}

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

/// A subtitle decoder's ASS header (the styles its events refer to), or "" when it has none.
pub(crate) fn subtitle_header(decoder: &ff::decoder::Subtitle) -> String {
    // SAFETY: the decoder context is live for this borrow; `subtitle_header` is either null or
    // `subtitle_header_size` bytes owned by the context, copied out here.
    unsafe {
        let ctx = decoder.as_ptr();
        let (data, size) = ((*ctx).subtitle_header, (*ctx).subtitle_header_size);
        if data.is_null() || size <= 0 {
            return String::new();
        }
        let bytes = std::slice::from_raw_parts(data, size as usize);
        String::from_utf8_lossy(bytes)
            .trim_end_matches('\0')
            .to_string()
    }
}

/// Gives a subtitle encoder (not yet opened) an ASS header: the text encoders (mov_text,
/// subrip, ass) parse their events against it and refuse to open without one.
pub(crate) fn set_subtitle_header(enc: &mut ff::encoder::subtitle::Subtitle, header: &str) {
    let header = if header.is_empty() {
        DEFAULT_ASS_HEADER
    } else {
        header
    };
    // SAFETY: the context is allocated and not opened; the buffer is allocated with av_mallocz
    // (one byte more, so it is NUL-terminated) and handed to the context, which frees it.
    unsafe {
        let ctx = enc.as_mut_ptr();
        let buf = ffi::av_mallocz(header.len() + 1) as *mut u8;
        if buf.is_null() {
            return;
        }
        std::ptr::copy_nonoverlapping(header.as_ptr(), buf, header.len());
        (*ctx).subtitle_header = buf;
        (*ctx).subtitle_header_size = header.len() as libc::c_int;
    }
}

/// The ASS header FFmpeg's text decoders write by default (ff_ass_subtitle_header_default).
const DEFAULT_ASS_HEADER: &str = "[Script Info]\r\nScriptType: v4.00+\r\nPlayResX: 384\r\nPlayResY: 288\r\nScaledBorderAndShadow: yes\r\n\r\n[V4+ Styles]\r\nFormat: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, Shadow, Alignment, MarginL, MarginR, MarginV, Encoding\r\nStyle: Default,Arial,16,&Hffffff,&Hffffff,&H0,&H0,0,0,0,0,100,100,0,0,1,1,0,2,10,10,10,1\r\n\r\n[Events]\r\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\r\n";

/// Encodes one subtitle into `buf`; the number of bytes written (ffmpeg-next's wrapper drops
/// it, and a packet needs it).
pub(crate) fn encode_subtitle(
    enc: &mut ff::encoder::subtitle::Encoder,
    sub: &ff::Subtitle,
    buf: &mut [u8],
) -> Result<usize, ff::Error> {
    // SAFETY: the encoder is open; `buf` is a valid writable slice of the given length and
    // `sub` a live AVSubtitle, both borrowed for the call only.
    let n = unsafe {
        ffi::avcodec_encode_subtitle(
            enc.as_mut_ptr(),
            buf.as_mut_ptr(),
            libc::c_int::try_from(buf.len()).unwrap_or(libc::c_int::MAX),
            sub.as_ptr(),
        )
    };
    if n < 0 {
        Err(ff::Error::from(n))
    } else {
        Ok(n as usize)
    }
}
