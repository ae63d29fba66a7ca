//! New references to a frame's buffers, for the software and the GPU path.
//!
//! Why: ffmpeg-next's `Video::clone()` is a deep copy (`av_frame_get_buffer` then
//! `av_frame_copy`): a full pixel copy of a software frame, and for a CUDA frame an *empty*
//! frame (no buffers can be allocated for a hardware format), which a buffer source then
//! refuses with EINVAL. Passing a frame on to an encoder or filter needs a reference.

use ff::ffi;
use ffmpeg_next as ff;

/// A new frame referring to the same buffers as `src` (`av_frame_ref`: no pixel copy), with
/// its properties (pts, colour, side data, hw frames context).
pub(crate) fn frame_ref(src: &ff::frame::Video) -> Result<ff::frame::Video, ff::Error> {
    let mut dst = ff::frame::Video::empty();
    // SAFETY: `dst` is a freshly allocated, blank AVFrame we own (av_frame_ref requires a
    // blank destination); `src` is a valid frame borrowed for the call; on failure FFmpeg
    // leaves `dst` blank, and it is freed by its Drop.
    let ret = unsafe { ffi::av_frame_ref(dst.as_mut_ptr(), src.as_ptr()) };
    if ret < 0 {
        Err(ff::Error::from(ret))
    } else {
        Ok(dst)
    }
}

/// Hands a buffer source a new reference to `frame` (`av_buffersrc_write_frame`, i.e.
/// `AV_BUFFERSRC_FLAG_KEEP_REF`), leaving `frame` intact for the other renditions that
/// still need it.
pub(crate) fn buffersrc_write(
    src: &mut ff::filter::Context,
    frame: &ff::frame::Video,
) -> Result<(), ff::Error> {
    // SAFETY: `src` is a configured buffer-source context of a graph the caller holds;
    // with KEEP_REF semantics FFmpeg takes its own reference and only reads `frame`.
    let ret = unsafe { ffi::av_buffersrc_write_frame(src.as_mut_ptr(), frame.as_ptr()) };
    if ret < 0 {
        Err(ff::Error::from(ret))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gray(w: u32, h: u32, pts: i64) -> ff::frame::Video {
        crate::init();
        let mut f = ff::frame::Video::new(ff::format::Pixel::YUV420P, w, h);
        for plane in 0..3 {
            f.data_mut(plane).fill(128);
        }
        f.set_pts(Some(pts));
        f
    }

    #[test]
    fn a_reference_shares_the_pixels_where_clone_copies_them() {
        let f = gray(64, 48, 7);
        let r = frame_ref(&f).unwrap();
        assert_eq!(r.data(0).as_ptr(), f.data(0).as_ptr(), "same buffer");
        assert_eq!((r.width(), r.height(), r.pts()), (64, 48, Some(7)));
        let c = f.clone();
        assert_ne!(
            c.data(0).as_ptr(),
            f.data(0).as_ptr(),
            "ffmpeg-next's clone() is a deep copy"
        );
    }

    #[test]
    fn a_buffer_source_takes_its_own_reference_and_leaves_the_frame() {
        let f = gray(32, 32, 3);
        let mut g = ff::filter::Graph::new();
        g.add(
            &ff::filter::find("buffer").unwrap(),
            "in",
            "video_size=32x32:pix_fmt=yuv420p:time_base=1/25:pixel_aspect=1/1",
        )
        .unwrap();
        g.add(&ff::filter::find("buffersink").unwrap(), "out", "")
            .unwrap();
        g.output("in", 0)
            .and_then(|p| p.input("out", 0))
            .and_then(|p| p.parse("null"))
            .unwrap();
        g.validate().unwrap();
        // Twice, as two renditions would: the caller's frame survives both.
        for _ in 0..2 {
            buffersrc_write(&mut g.get("in").unwrap(), &f).unwrap();
        }
        assert!(!f.data(0).is_empty() && f.data(0)[0] == 128, "frame intact");
        let mut out = ff::frame::Video::empty();
        g.get("out").unwrap().sink().frame(&mut out).unwrap();
        assert_eq!(out.data(0).as_ptr(), f.data(0).as_ptr(), "no pixel copy");
        assert_eq!(out.pts(), Some(3));
    }
}
