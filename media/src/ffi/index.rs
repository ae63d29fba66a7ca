//! The demuxer's own index of a stream (ffmpeg-next does not expose it).

use ff::ffi;
use ffmpeg_next as ff;

/// Timestamps (stream time base) of the keyframes the demuxer indexed for `stream`, in file
/// order: the sample table of MP4/MOV (the keyframes' dts), the cues of Matroska (their pts).
/// Empty when the format keeps no index. The QC gate cuts its parallel decode there.
pub(crate) fn keyframe_times(stream: &ff::format::stream::Stream) -> Vec<i64> {
    // SAFETY: the stream pointer is valid while `stream` borrows its input context, which is
    // not used (read or seeked) during this call; avformat_index_get_entry returns a pointer
    // into the stream's index array for 0 <= i < count, valid until the next read or seek,
    // and the entry is only read here.
    unsafe {
        let st = stream.as_ptr() as *mut ffi::AVStream;
        let count = ffi::avformat_index_get_entries_count(st);
        let mut times = Vec::new();
        for i in 0..count.max(0) {
            let entry = ffi::avformat_index_get_entry(st, i);
            if !entry.is_null() && (*entry).flags() & ffi::AVINDEX_KEYFRAME != 0 {
                times.push((*entry).timestamp);
            }
        }
        times
    }
}
