//! Still images (posters, thumbnails, sprite tiles) taken from frames a segment encode
//! already decodes, and sprite sheets composed from such tiles.
//!
//! Why in the encode: a thumbnail every few seconds of a long video would otherwise cost a
//! second decode of the source; the segment worker holds each frame anyway, so a still is a
//! scale and one image encode.

use std::path::Path;

use ffmpeg_next as ff;

use super::tonemap::Tonemapper;
use crate::MediaError;
use tessera_model::images::ImageFormat;
use tessera_model::images::StillImage;
use tessera_model::images::StillShot;
use tessera_model::probe::ColorInfo;

/// Whether this FFmpeg can write `format` (WebP needs libwebp).
pub(crate) fn image_encoder_available(format: ImageFormat) -> bool {
    crate::init();
    ff::encoder::find_by_name(encoder_name(format)).is_some()
}

/// Makes still images of frames: tone-mapped to SDR first when the source is HDR, so a
/// poster of an HDR10 video is not washed out.
pub(crate) struct StillMaker {
    color: ColorInfo,
    hdr: bool,
    tonemap: Option<Tonemapper>,
}

impl StillMaker {
    /// A maker for frames of a source tagged `color`.
    pub(crate) fn new(color: &ColorInfo) -> Self {
        StillMaker {
            color: color.clone(),
            hdr: tessera_model::hdr::is_hdr_transfer(color.transfer.as_deref()),
            tonemap: None,
        }
    }

    /// Writes every image of `shot` from `frame`.
    pub(crate) fn make(
        &mut self,
        frame: &ff::frame::Video,
        shot: &StillShot,
    ) -> Result<(), MediaError> {
        let sdr;
        let source = if self.hdr {
            if !self.tonemap.as_ref().is_some_and(|t| t.fits(frame)) {
                self.tonemap = Some(Tonemapper::new(
                    frame,
                    &self.color,
                    frame.width(),
                    frame.height(),
                )?);
            }
            match self.tonemap.as_mut() {
                Some(t) => {
                    sdr = t.run(frame)?;
                    &sdr
                }
                None => frame,
            }
        } else {
            frame
        };
        for (image, path) in &shot.images {
            let mut scaled = scale(
                source,
                image.width,
                image.height,
                pixel_format(image.format),
            )?;
            write_image(&mut scaled, *image, path)?;
        }
        Ok(())
    }
}

/// `frame` converted to `format` at `width`x`height` (bicubic; a full-range source stays
/// full range in a JPEG).
pub(crate) fn scale(
    frame: &ff::frame::Video,
    width: u32,
    height: u32,
    format: ff::format::Pixel,
) -> Result<ff::frame::Video, MediaError> {
    let mut ctx = ff::software::scaling::Context::get(
        frame.format(),
        frame.width(),
        frame.height(),
        format,
        width,
        height,
        ff::software::scaling::Flags::BICUBIC,
    )
    .map_err(|e| MediaError::encode("swscale", e))?;
    if super::settings::is_full_range_format(frame.format()) {
        crate::ffi::scaler_keeps_full_range(&mut ctx);
    }
    let mut out = ff::frame::Video::empty();
    ctx.run(frame, &mut out)
        .map_err(|e| MediaError::encode("swscale", e))?;
    Ok(out)
}

/// Encodes one frame (already in the format's pixel format) as an image file at `path`,
/// written beside it and renamed, so a reader never sees half an image.
pub(crate) fn write_image(
    frame: &mut ff::frame::Video,
    image: StillImage,
    path: &Path,
) -> Result<(), MediaError> {
    let name = encoder_name(image.format);
    let codec = ff::encoder::find_by_name(name)
        .ok_or_else(|| MediaError::encode(name, "encoder not in this FFmpeg build"))?;
    let mut enc = ff::codec::Context::new_with_codec(codec)
        .encoder()
        .video()
        .map_err(|e| MediaError::encode(name, e))?;
    enc.set_width(frame.width());
    enc.set_height(frame.height());
    enc.set_format(pixel_format(image.format));
    enc.set_time_base(ff::Rational::new(1, 25));
    let quality = image.quality.clamp(1, 100);
    let mut dict = ff::Dictionary::new();
    match image.format {
        ImageFormat::Jpeg => {
            // JPEG's quantiser scale: 2 (best) .. 31; quality 100 -> 2, 1 -> 31, held
            // there by the rate control's bounds.
            let q = 2 + (i32::from(100 - quality) * 29) / 99;
            enc.set_qmin(q);
            enc.set_qmax(q);
        }
        ImageFormat::Webp => dict.set("quality", &quality.to_string()),
    }
    let mut encoder = enc
        .open_as_with(codec, dict)
        .map_err(|e| MediaError::encode(name, format!("cannot open: {e}")))?;
    frame.set_pts(Some(0));
    frame.set_kind(ff::picture::Type::None);
    encoder
        .send_frame(frame)
        .and_then(|()| encoder.send_eof())
        .map_err(|e| MediaError::encode(name, e))?;
    let mut bytes = Vec::new();
    let mut packet = ff::Packet::empty();
    while encoder.receive_packet(&mut packet).is_ok() {
        bytes.extend_from_slice(packet.data().unwrap_or_default());
    }
    if bytes.is_empty() {
        return Err(MediaError::encode(name, "the encoder wrote no image"));
    }
    let part = path.with_extension("part");
    std::fs::write(&part, &bytes)
        .and_then(|()| std::fs::rename(&part, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&part);
            MediaError::write(path, e)
        })
}

/// The FFmpeg encoder that writes `format`.
fn encoder_name(format: ImageFormat) -> &'static str {
    match format {
        ImageFormat::Jpeg => "mjpeg",
        ImageFormat::Webp => "libwebp",
    }
}

/// The pixel format an image of `format` is written in.
fn pixel_format(format: ImageFormat) -> ff::format::Pixel {
    match format {
        // Full-range 4:2:0, what JPEG files carry.
        ImageFormat::Jpeg => ff::format::Pixel::YUVJ420P,
        ImageFormat::Webp => ff::format::Pixel::YUV420P,
    }
}
