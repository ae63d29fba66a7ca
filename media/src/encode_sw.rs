//! The software path of a segment encode: decode its chunk, keep exactly the frames of its
//! range, encode them for every rendition from one decode (libx264, libx265, libsvtav1).
//!
//! Why one decode for all renditions: decoding is a large share of the work; a ladder of three
//! renditions from one decode costs one decode, not three.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Instant;

use ffmpeg_next as ff;

use crate::demux::{open_input, open_video_decoder};
use crate::range::{decode_all, RangeGate};
use crate::stills::StillMaker;
use crate::tonemap::Tonemapper;
use crate::{ffi, nut, MediaError};
use tessera_model::encode::{EncodeRequest, EncodeResult, RenditionOutput, RenditionResult};
use tessera_model::settings::{encoder_name, encoder_options, output_pix_fmt, output_size};

struct Rendition {
    name: String,
    path: PathBuf,
    width: u32,
    height: u32,
    format: ff::format::Pixel,
    scaler: Option<(ff::software::scaling::Context, ff::format::Pixel, u32, u32)>,
    /// HDR to SDR: the source's colour and the graph (built on the first frame).
    tonemap: Option<(tessera_model::probe::ColorInfo, Option<Tonemapper>)>,
    encoder: ff::encoder::Video,
    octx: ff::format::context::Output,
    enc_tb: ff::Rational,
    out_tb: ff::Rational,
    frames: u64,
    first_pts: Option<i64>,
    last_pts: Option<i64>,
    first_key: Option<bool>,
}

/// Encodes the frames of `[start_pts, end_pts)` from the chunk with the software encoders;
/// `progress` gets the running count of frames encoded. The request is already checked.
pub(crate) fn encode_sw(
    req: &EncodeRequest,
    progress: &mut dyn FnMut(u64),
) -> Result<EncodeResult, MediaError> {
    let started = Instant::now();
    let chunk = req.chunk.as_path();
    let mut ictx = open_input(chunk)?;
    let stream = ictx
        .stream(0)
        .ok_or_else(|| MediaError::invalid(chunk, "chunk has no stream"))?;
    let chunk_tb = stream.time_base();
    let mut decoder = open_video_decoder(&stream, chunk, req.threads)?;

    let (sw, sh) = req
        .source_size
        .unwrap_or((decoder.width(), decoder.height()));
    let mut renditions = req
        .outputs
        .iter()
        .map(|o| open_rendition(req, o, (sw, sh), decoder.format()))
        .collect::<Result<Vec<_>, _>>()?;

    let mut gate = RangeGate::new(req, chunk_tb);
    let lead_in = gate.lead_in();
    let mut stills = StillMaker::new(&req.color);
    let mut stills_made = 0usize;
    let mut on_frame = |frame: &mut ff::frame::Video| -> Result<(), MediaError> {
        let Some(pts) = gate.admit_frame(frame) else {
            return Ok(());
        };
        frame.set_kind(ff::picture::Type::None);
        // A streaming package's media segment starts here: every rendition makes it an IDR.
        let key = req.keyframes.binary_search(&(pts - req.bias)).is_ok();
        for shot in req.stills.iter().filter(|s| s.pts == pts - req.bias) {
            stills.make(frame, shot)?;
            stills_made += 1;
        }
        for r in renditions.iter_mut() {
            encode_frame(r, frame, pts, key)?;
        }
        progress(gate.in_range);
        Ok(())
    };
    let rejected = decode_all(
        &mut ictx,
        &mut decoder,
        chunk,
        &mut on_frame,
        None,
        Some(lead_in),
    )?;
    let (decoded, in_range) = (gate.decoded, gate.in_range);
    if decoded == 0 {
        return Err(MediaError::decode(chunk, "no frame could be decoded"));
    }
    if stills_made != req.stills.len() {
        return Err(MediaError::decode(
            chunk,
            format!(
                "{} of {} still frames were not in the decoded range",
                req.stills.len() - stills_made,
                req.stills.len()
            ),
        ));
    }

    let mut results = Vec::with_capacity(renditions.len());
    for r in renditions {
        results.push(finish_rendition(r, req)?);
    }
    Ok(EncodeResult {
        decoded_frames: decoded,
        frames_in_range: in_range,
        renditions: results,
        media_seconds: started.elapsed().as_secs_f64(),
        decode_errors: rejected + gate.damaged,
    })
}

/// A software-encoded rendition fed with frames decoded and scaled elsewhere (the GPU
/// path's NVDEC -> scale_cuda -> hwdownload): the same encoder settings and output as
/// the software path's own renditions.
pub(crate) struct SwRendition(Rendition);

impl SwRendition {
    /// Opens the encoder and output of `out` for a source of `src` size; frames may come in
    /// any size and format (converted when they differ).
    pub(crate) fn open(
        req: &EncodeRequest,
        out: &RenditionOutput,
        src: (u32, u32),
        src_format: ff::format::Pixel,
    ) -> Result<Self, MediaError> {
        open_rendition(req, out, src, src_format).map(SwRendition)
    }

    /// The output size.
    pub(crate) fn size(&self) -> (u32, u32) {
        (self.0.width, self.0.height)
    }

    /// Encodes one frame at output pts `pts`; a frame marked I becomes an IDR.
    pub(crate) fn encode(&mut self, frame: &ff::frame::Video, pts: i64) -> Result<(), MediaError> {
        let key = frame.kind() == ff::picture::Type::I;
        encode_frame(&mut self.0, frame, pts, key)
    }

    /// Flushes the encoder and closes the output.
    pub(crate) fn finish(self, req: &EncodeRequest) -> Result<RenditionResult, MediaError> {
        finish_rendition(self.0, req)
    }
}

fn finish_rendition(mut r: Rendition, req: &EncodeRequest) -> Result<RenditionResult, MediaError> {
    r.encoder
        .send_eof()
        .map_err(|e| MediaError::encode(&r.name, e))?;
    drain(&mut r)?;
    nut::finish(&mut r.octx, &r.path)?;
    Ok(RenditionResult {
        name: r.name,
        frames: r.frames,
        first_pts: r.first_pts.map(|p| p - req.bias),
        last_pts: r.last_pts.map(|p| p - req.bias),
        width: r.width,
        height: r.height,
        bytes: nut::file_size(&r.path),
        starts_with_keyframe: r.first_key.unwrap_or(false),
    })
}

fn open_rendition(
    req: &EncodeRequest,
    out: &RenditionOutput,
    (src_w, src_h): (u32, u32),
    src_format: ff::format::Pixel,
) -> Result<Rendition, MediaError> {
    let spec = &out.spec;
    let name = encoder_name(spec.codec);
    let codec = ff::encoder::find_by_name(name)
        .ok_or_else(|| MediaError::encode(name, "encoder not in this FFmpeg build"))?;
    let (width, height) = output_size(src_w, src_h, spec.height);
    let tonemap = tessera_model::settings::hdr::tonemaps(spec.hdr, spec.codec, &req.color);
    let pix_fmt = if tonemap {
        "yuv420p"
    } else {
        output_pix_fmt(spec.codec, req.source_bit_depth)
    };
    let format = ff::format::Pixel::from_str(pix_fmt).map_err(|e| MediaError::encode(name, e))?;
    let tb = ff::Rational::new(req.time_base.num, req.time_base.den);

    let mut enc = ff::codec::Context::new_with_codec(codec)
        .encoder()
        .video()
        .map_err(|e| MediaError::encode(name, e))?;
    enc.set_width(width);
    enc.set_height(height);
    enc.set_format(format);
    enc.set_time_base(tb);
    if req.frame_rate.num > 0 && req.frame_rate.den > 0 {
        enc.set_frame_rate(Some(ff::Rational::new(
            req.frame_rate.num,
            req.frame_rate.den,
        )));
    }
    if req.sample_aspect_ratio.num > 0 {
        enc.set_aspect_ratio(ff::Rational::new(
            req.sample_aspect_ratio.num,
            req.sample_aspect_ratio.den,
        ));
    }
    // NUT (and MP4/MKV later) carry parameter sets out of band. set_flags replaces the
    // codec's default flags, so libx264's default closed GOPs ("+cgop") are stated again:
    // every I-frame an encoder places on its own stays a clean point to start decoding.
    enc.set_flags(ff::codec::Flags::GLOBAL_HEADER | ff::codec::Flags::CLOSED_GOP);
    // Full-range sources stay full range (the scaler is told so, see `scale`), tagged "pc".
    let color = if tonemap {
        tessera_model::settings::hdr::sdr_color()
    } else if crate::settings::is_full_range_format(src_format) {
        tessera_model::probe::ColorInfo {
            range: Some("pc".into()),
            ..req.color.clone()
        }
    } else {
        req.color.clone()
    };
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

    let mut octx = nut::create(&out.path)?;
    let mut ost = octx
        .add_stream(codec)
        .map_err(|e| MediaError::write(&out.path, e))?;
    ost.set_parameters(&encoder);
    ost.set_time_base(tb);
    let enc_tb = encoder.time_base();
    let out_tb = nut::write_header(&mut octx, &out.path)?[0];
    Ok(Rendition {
        name: spec.name.clone(),
        path: out.path.clone(),
        width,
        height,
        format,
        scaler: None,
        tonemap: tonemap.then(|| (req.color.clone(), None)),
        encoder,
        octx,
        enc_tb,
        out_tb,
        frames: 0,
        first_pts: None,
        last_pts: None,
        first_key: None,
    })
}

fn encode_frame(
    r: &mut Rendition,
    frame: &ff::frame::Video,
    pts: i64,
    key: bool,
) -> Result<(), MediaError> {
    let direct =
        frame.format() == r.format && frame.width() == r.width && frame.height() == r.height;
    // A new reference to the same buffers, not a pixel copy (ffmpeg-next's clone() is one).
    let mut out = if let Some((source, graph)) = r.tonemap.as_mut() {
        if !graph.as_ref().is_some_and(|g| g.fits(frame)) {
            *graph = Some(Tonemapper::new(frame, source, r.width, r.height)?);
        }
        match graph.as_mut() {
            Some(g) => g.run(frame)?,
            None => scale(r, frame)?,
        }
    } else if direct {
        ffi::frame_ref(frame).map_err(|e| MediaError::encode(&r.name, e))?
    } else {
        scale(r, frame)?
    };
    out.set_pts(Some(pts));
    out.set_kind(if key {
        ff::picture::Type::I
    } else {
        ff::picture::Type::None
    });
    r.encoder
        .send_frame(&out)
        .map_err(|e| MediaError::encode(&r.name, e))?;
    r.frames += 1;
    r.first_pts.get_or_insert(pts);
    r.last_pts = Some(pts);
    drain(r)
}

fn scale(r: &mut Rendition, frame: &ff::frame::Video) -> Result<ff::frame::Video, MediaError> {
    let key = (frame.format(), frame.width(), frame.height());
    let stale = !matches!(&r.scaler, Some((_, f, w, h)) if (*f, *w, *h) == key);
    if stale {
        let ctx = ff::software::scaling::Context::get(
            key.0,
            key.1,
            key.2,
            r.format,
            r.width,
            r.height,
            ff::software::scaling::Flags::BICUBIC,
        )
        .map_err(|e| MediaError::encode("swscale", e))?;
        let mut ctx = ctx;
        if crate::settings::is_full_range_format(key.0) {
            ffi::scaler_keeps_full_range(&mut ctx);
        }
        r.scaler = Some((ctx, key.0, key.1, key.2));
    }
    let mut scaled = ff::frame::Video::empty();
    if let Some((ctx, ..)) = r.scaler.as_mut() {
        ctx.run(frame, &mut scaled)
            .map_err(|e| MediaError::encode("swscale", e))?;
    }
    // Side data (captions, HDR metadata), colour tags and timestamps come with the props;
    // a "J" source's range is stated, as the scaler kept it full.
    ffi::copy_frame_props(&mut scaled, frame);
    if crate::settings::is_full_range_format(frame.format()) {
        scaled.set_color_range(ff::util::color::Range::JPEG);
    }
    Ok(scaled)
}

fn drain(r: &mut Rendition) -> Result<(), MediaError> {
    let mut packet = ff::Packet::empty();
    while r.encoder.receive_packet(&mut packet).is_ok() {
        r.first_key.get_or_insert(packet.is_key());
        packet.set_stream(0);
        packet.rescale_ts(r.enc_tb, r.out_tb);
        nut::write(&mut r.octx, &packet, &r.path)?;
    }
    Ok(())
}
