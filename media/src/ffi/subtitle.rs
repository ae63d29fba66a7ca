//! Text subtitle codecs: the ASS header a decoder reads and an encoder needs, and the encode
//! call whose byte count ffmpeg-next's wrapper drops.
//!
//! Why: the probe keeps each track's header with its cues, and the stitch encodes the cues for
//! the output's container (see probe/subtitles.rs and stitch/subtitles.rs).

use ff::ffi;
use ffmpeg_next as ff;

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
