//! Opening a file tessera wrote itself without `avformat_find_stream_info`.
//!
//! Why: that call decodes the first frames of every stream to fill in parameters a container
//! may lack. The segments, audio files and stitched outputs tessera reads back (to stitch and
//! to check them) carry everything a remux or a decoder needs in their headers, and on a
//! 5-second job the call cost about a tenth of the stitch and check: five to eight opens of
//! a few frames' decode each, all on the job's path after the last encode.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

use ff::ffi;
use ffmpeg_next as ff;

/// Opens `path` with `options` for reading packets; streams carry what the demuxer read from
/// the header only (no decoded-frame guesses such as the pixel format).
pub(crate) fn open_without_stream_info(
    path: &Path,
    options: ff::Dictionary,
) -> Result<ff::format::context::Input, ff::Error> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| ff::Error::InvalidData)?;
    let mut ctx: *mut ffi::AVFormatContext = ptr::null_mut();
    // SAFETY: `disown` hands us the dictionary's pointer; it is given back to an owner below.
    let mut opts = unsafe { options.disown() };
    // SAFETY: `ctx` starts null, so avformat_open_input allocates the context and, on failure,
    // frees it and leaves `ctx` null; `c_path` outlives the call; `opts` is a dictionary we own
    // (from `disown`), which the call may replace with the options it did not use.
    let rc =
        unsafe { ffi::avformat_open_input(&mut ctx, c_path.as_ptr(), ptr::null_mut(), &mut opts) };
    // SAFETY: `opts` is ours again (null or the unused options); `own` frees it on drop.
    drop(unsafe { ff::Dictionary::own(opts) });
    if rc < 0 {
        return Err(ff::Error::from(rc));
    }
    // SAFETY: on success `ctx` is an opened input context that nothing else owns; `Input`
    // closes it with avformat_close_input when dropped.
    Ok(unsafe { ff::format::context::Input::wrap(ctx) })
}

/// Runs the stream-info probe that [`open_without_stream_info`] left out, on `ictx`, for a
/// reader that needs what only decoding tells (e.g. the dts of a container without them).
pub(crate) fn find_stream_info(ictx: &mut ff::format::context::Input) -> Result<(), ff::Error> {
    // SAFETY: `ictx` owns an opened input context for this borrow; the call only reads
    // packets and fills in its streams' fields.
    let rc = unsafe { ffi::avformat_find_stream_info(ictx.as_mut_ptr(), ptr::null_mut()) };
    if rc < 0 {
        return Err(ff::Error::from(rc));
    }
    Ok(())
}
