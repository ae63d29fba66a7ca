//! One rendition on a software encoder (libx264, libx265, libsvtav1): its encoder settings,
//! its scaler or HDR-to-SDR tone map, and its output.
//!
//! Why apart from the software path: both paths encode with it. The software path (sw.rs)
//! feeds it the frames it decodes; the GPU path (hw/rendition.rs) feeds it frames decoded and
//! scaled on the card and downloaded (`HardwareEncode::software_encode`). Either way the
//! encoder settings and the output are the same, and the output is finished as the NVENC
//! renditions' are (output.rs).

use std::str::FromStr;

use ffmpeg_next as ff;

use super::output::RenditionFile;
use super::tonemap::Tonemapper;
use crate::{ffi, MediaError};
use tessera_model::encode::{EncodeRequest, RenditionOutput, RenditionResult};
use tessera_model::settings::{encoder_name, encoder_options, output_pix_fmt, output_size};

/// A software-encoded rendition: frames may come in any size and format (converted when they
/// differ from the output's).
pub(crate) struct SwRendition {
    width: u32,
    height: u32,
    format: ff::format::Pixel,
    scaler: Option<(ff::software::scaling::Context, ff::format::Pixel, u32, u32)>,
    /// HDR to SDR: the source's colour and the graph (built on the first frame).
    tonemap: Option<(tessera_model::probe::ColorInfo, Option<Tonemapper>)>,
    encoder: ff::encoder::Video,
    file: RenditionFile,
}

impl SwRendition {
    /// Opens the encoder and output of `out` for a source of `src` size whose frames come in
    /// `src_format`.
    pub(crate) fn open(
        req: &EncodeRequest,
        out: &RenditionOutput,
        (src_w, src_h): (u32, u32),
        src_format: ff::format::Pixel,
    ) -> Result<Self, MediaError> {
        let spec = &out.spec;
        let name = encoder_name(spec.codec);
        let codec = ff::encoder::find_by_name(name)
            .ok_or_else(|| MediaError::encode(name, "encoder not in this FFmpeg build"))?;
        let (width, height) = output_size(src_w, src_h, spec.height);
        let tonemap =
            tessera_model::settings::hdr::tonemaps(spec.hdr, spec.codec, &req.source.color);
        let pix_fmt = if tonemap {
            "yuv420p"
        } else {
            output_pix_fmt(spec.codec, req.source.source_bit_depth)
        };
        let format =
            ff::format::Pixel::from_str(pix_fmt).map_err(|e| MediaError::encode(name, e))?;
        let tb = ff::Rational::new(req.source.time_base.num, req.source.time_base.den);

        let mut enc = ff::codec::Context::new_with_codec(codec)
            .encoder()
            .video()
            .map_err(|e| MediaError::encode(name, e))?;
        enc.set_width(width);
        enc.set_height(height);
        enc.set_format(format);
        enc.set_time_base(tb);
        if req.source.frame_rate.num > 0 && req.source.frame_rate.den > 0 {
            enc.set_frame_rate(Some(ff::Rational::new(
                req.source.frame_rate.num,
                req.source.frame_rate.den,
            )));
        }
        if req.source.sample_aspect_ratio.num > 0 {
            enc.set_aspect_ratio(ff::Rational::new(
                req.source.sample_aspect_ratio.num,
                req.source.sample_aspect_ratio.den,
            ));
        }
        // NUT (and MP4/MKV later) carry parameter sets out of band. set_flags replaces the
        // codec's default flags, so libx264's default closed GOPs ("+cgop") are stated again:
        // every I-frame an encoder places on its own stays a clean point to start decoding.
        enc.set_flags(ff::codec::Flags::GLOBAL_HEADER | ff::codec::Flags::CLOSED_GOP);
        let color = output_color(req, tonemap, src_format);
        ffi::set_encoder_color(&mut enc, &color);
        let mut dict = ff::Dictionary::new();
        for (k, mut v) in encoder_options(spec, req.threads).map_err(MediaError::InvalidRequest)? {
            // HDR kept: the encoder writes the source's static metadata (SEI / metadata OBUs).
            let hdr = color.hdr.as_ref().filter(|_| !tonemap);
            let extra = match (k.as_str(), hdr) {
                ("x265-params", Some(h)) => tessera_model::settings::hdr::x265_params(h),
                ("svtav1-params", Some(h)) => tessera_model::settings::hdr::svtav1_params(h),
                _ => None,
            };
            if let Some(extra) = extra {
                v = format!("{v}:{extra}");
            }
            dict.set(&k, &v);
        }
        let encoder = enc
            .open_as_with(codec, dict)
            .map_err(|e| MediaError::encode(name, format!("cannot open: {e}")))?;
        let file =
            RenditionFile::create(&spec.name, &out.path, (width, height), codec, &encoder, tb)?;
        Ok(SwRendition {
            width,
            height,
            format,
            scaler: None,
            tonemap: tonemap.then(|| (req.source.color.clone(), None)),
            encoder,
            file,
        })
    }

    /// The output size.
    pub(crate) fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    /// Encodes one frame at output pts `pts`; with `key` it becomes an IDR.
    pub(crate) fn encode(
        &mut self,
        frame: &ff::frame::Video,
        pts: i64,
        key: bool,
    ) -> Result<(), MediaError> {
        let direct = frame.format() == self.format
            && frame.width() == self.width
            && frame.height() == self.height;
        // A new reference to the same buffers, not a pixel copy (ffmpeg-next's clone() is one).
        let mut out = if let Some((source, graph)) = self.tonemap.as_mut() {
            if !graph.as_ref().is_some_and(|g| g.fits(frame)) {
                *graph = Some(Tonemapper::new(frame, source, self.width, self.height)?);
            }
            match graph.as_mut() {
                Some(g) => g.run(frame)?,
                None => self.scale(frame)?,
            }
        } else if direct {
            ffi::frame_ref(frame).map_err(|e| MediaError::encode(self.file.name(), e))?
        } else {
            self.scale(frame)?
        };
        out.set_pts(Some(pts));
        out.set_kind(if key {
            ff::picture::Type::I
        } else {
            ff::picture::Type::None
        });
        self.encoder
            .send_frame(&out)
            .map_err(|e| MediaError::encode(self.file.name(), e))?;
        self.file.sent(Some(pts));
        self.drain()
    }

    /// Flushes the encoder and closes the output.
    pub(crate) fn finish(mut self, req: &EncodeRequest) -> Result<RenditionResult, MediaError> {
        self.encoder
            .send_eof()
            .map_err(|e| MediaError::encode(self.file.name(), e))?;
        self.drain()?;
        self.file.finish(req.source.bias)
    }

    fn scale(&mut self, frame: &ff::frame::Video) -> Result<ff::frame::Video, MediaError> {
        let key = (frame.format(), frame.width(), frame.height());
        let stale = !matches!(&self.scaler, Some((_, f, w, h)) if (*f, *w, *h) == key);
        if stale {
            let ctx = ff::software::scaling::Context::get(
                key.0,
                key.1,
                key.2,
                self.format,
                self.width,
                self.height,
                ff::software::scaling::Flags::BICUBIC,
            )
            .map_err(|e| MediaError::encode("swscale", e))?;
            let mut ctx = ctx;
            if super::settings::is_full_range_format(key.0) {
                ffi::scaler_keeps_full_range(&mut ctx);
            }
            self.scaler = Some((ctx, key.0, key.1, key.2));
        }
        let mut scaled = ff::frame::Video::empty();
        if let Some((ctx, ..)) = self.scaler.as_mut() {
            ctx.run(frame, &mut scaled)
                .map_err(|e| MediaError::encode("swscale", e))?;
        }
        // Side data (captions, HDR metadata), colour tags and timestamps come with the props;
        // a "J" source's range is stated, as the scaler kept it full.
        ffi::copy_frame_props(&mut scaled, frame);
        if super::settings::is_full_range_format(frame.format()) {
            scaled.set_color_range(ff::util::color::Range::JPEG);
        }
        Ok(scaled)
    }

    fn drain(&mut self) -> Result<(), MediaError> {
        let mut packet = ff::Packet::empty();
        while self.encoder.receive_packet(&mut packet).is_ok() {
            self.file.write(&mut packet)?;
        }
        Ok(())
    }
}

/// The colour tags of the output: SDR when tone-mapped; full-range sources stay full range
/// (the scaler is told so, see `scale`), tagged "pc"; else the source's.
fn output_color(
    req: &EncodeRequest,
    tonemap: bool,
    src_format: ff::format::Pixel,
) -> tessera_model::probe::ColorInfo {
    if tonemap {
        tessera_model::settings::hdr::sdr_color()
    } else if super::settings::is_full_range_format(src_format) {
        tessera_model::probe::ColorInfo {
            range: Some("pc".into()),
            ..req.source.color.clone()
        }
    } else {
        req.source.color.clone()
    }
}
