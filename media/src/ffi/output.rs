//! Setting up an output's streams before its header is written: the display matrix, the
//! audio's priming samples, and codec tags the muxer accepts.
//!
//! Why: a stream copy carries the source's codec parameters, whose tags and side data the
//! output container may not take as they are; ffmpeg-next has no setters for these fields.

use ff::ffi;
use ffmpeg_next as ff;

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

/// Sets the priming samples on an output stream's codec parameters before the header.
pub(crate) fn set_initial_padding(stream: &mut ff::format::stream::StreamMut, samples: i32) {
    // SAFETY: codecpar is allocated by avformat_new_stream and owned by the stream; the header
    // is not written yet, so the muxer has not read it.
    unsafe {
        (*(*stream.as_mut_ptr()).codecpar).initial_padding = samples;
    }
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
