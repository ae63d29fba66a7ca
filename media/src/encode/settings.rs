//! FFmpeg-side encoder settings (the pure rules are tessera-model's `settings`).
//!
//! Why apart: these name FFmpeg's own types.

/// Whether `format` is one of FFmpeg's full-range "J" formats (MJPEG's yuvj420p and kin),
/// which swscale would squeeze to limited range when it writes an encoder's format unless
/// told to keep the range.
pub fn is_full_range_format(format: ffmpeg_next::format::Pixel) -> bool {
    use ffmpeg_next::format::Pixel;
    matches!(
        format,
        Pixel::YUVJ420P | Pixel::YUVJ422P | Pixel::YUVJ444P | Pixel::YUVJ440P | Pixel::YUVJ411P
    )
}
