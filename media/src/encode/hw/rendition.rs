//! One rendition on the GPU: its scale_cuda graph (built when the first CUDA frame shows the
//! input pool), its NVENC encoder and its NUT output.

use std::path::PathBuf;
use std::str::FromStr;

use ffmpeg_next as ff;

use super::encoder::{open_encoder, Opened};
use super::filters::{nvenc_frame_rate, rendition_filters};
use super::nvenc::NvencSettings;
use crate::encode::range::is_end_or_again as is_again;
use crate::encode::rendition::SwRendition;
use crate::ffi::cuda::{self, clear_log, AvFailure, HwRef};
use crate::gpu::{gpu_error, GpuStage};
use crate::{ffi, MediaError};
use tessera_model::encode::{EncodeRequest, RenditionOutput, RenditionResult};
use tessera_model::settings::output_size;

/// What a filter graph was built for: input size and the input pool's format and size.
type GraphKey = (u32, u32, ff::format::Pixel, u32, u32);

/// Maps a failed call while frames flow: GPU conditions get their codes, the rest `other`.
fn running(dev: u32, e: ff::Error, what: &str, other: &str) -> MediaError {
    gpu_error(
        dev,
        GpuStage::Running,
        &AvFailure::from_error(e, what),
        |r| MediaError::encode(other, r),
    )
}

pub(super) struct HwRendition {
    name: String,
    path: PathBuf,
    width: u32,
    height: u32,
    settings: NvencSettings,
    out_format: ff::format::Pixel,
    tb: ff::Rational,
    frame_rate: Option<ff::Rational>,
    sar: Option<ff::Rational>,
    color: tessera_model::probe::ColorInfo,
    graph: Option<(ff::filter::Graph, GraphKey)>,
    opened: Option<Opened>,
    /// Software encode (`HardwareEncode::software_encode`): frames leave the card after
    /// scale_cuda and go to this encoder instead of NVENC.
    software: Option<SwRendition>,
    /// Frames pushed out of the graph (the first is made an IDR).
    frames: u64,
    /// Biased pts of the frames that must be IDRs (a streaming package's segment starts).
    keyframes: Vec<i64>,
}

impl HwRendition {
    pub(super) fn new(
        req: &EncodeRequest,
        out: &RenditionOutput,
        settings: NvencSettings,
        (src_w, src_h): (u32, u32),
        stream_rate: Option<ff::Rational>,
    ) -> Result<Self, MediaError> {
        let (width, height) = output_size(src_w, src_h, out.spec.height);
        let rate = |r: tessera_model::probe::Rational, den_ok: bool| {
            (r.num > 0 && den_ok).then(|| ff::Rational::new(r.num, r.den))
        };
        let bitrate_mode = matches!(
            out.spec.rate,
            tessera_model::encode::RateControl::Bitrate(_)
        );
        let requested = (req.source.frame_rate.num, req.source.frame_rate.den);
        let stream = stream_rate.map(|r| (r.numerator(), r.denominator()));
        let (fr_num, fr_den) =
            nvenc_frame_rate(Some(requested), stream, bitrate_mode).map_err(|why| {
                MediaError::GpuRequestUnsupported {
                    device: req.hardware.as_ref().map_or(0, |h| h.device),
                    reason: format!("rendition {}: {why}", out.spec.name),
                }
            })?;
        let settings =
            settings.with_cq_ceiling(width, height, f64::from(fr_num) / f64::from(fr_den.max(1)));
        let out_format = ff::format::Pixel::from_str(settings.sw_format)
            .map_err(|e| MediaError::encode(settings.encoder, e))?;
        let software = match req.hardware.as_ref().is_some_and(|h| h.software_encode) {
            true => Some(SwRendition::open(req, out, (src_w, src_h), out_format)?),
            false => None,
        };
        if let Some(sw) = &software {
            debug_assert_eq!(sw.size(), (width, height));
        }
        Ok(HwRendition {
            name: out.spec.name.clone(),
            path: out.path.clone(),
            width,
            height,
            settings,
            out_format,
            tb: ff::Rational::new(req.source.time_base.num, req.source.time_base.den),
            frame_rate: Some(ff::Rational::new(fr_num, fr_den)),
            sar: rate(req.source.sample_aspect_ratio, true),
            color: req.source.color.clone(),
            graph: None,
            opened: None,
            software,
            frames: 0,
            keyframes: req
                .source
                .keyframes
                .iter()
                .map(|k| k + req.source.bias)
                .collect(),
        })
    }

    /// Sends one CUDA frame (pts already set) through scale_cuda to the encoder.
    pub(super) fn push(&mut self, frame: &ff::frame::Video, dev: u32) -> Result<(), MediaError> {
        let frames = cuda::frame_hw_frames(frame)
            .ok_or_else(|| MediaError::encode("scale_cuda", "frame has no CUDA frames context"))?;
        let (pf, pw, ph) = frames.frames_info();
        let key = (frame.width(), frame.height(), pf, pw, ph);
        if self.graph.as_ref().map(|(_, k)| *k) != Some(key) {
            // A new input pool (first frame, or the stream changed size): rebuild the graph;
            // its output size and format, and so the encoder, stay the same.
            self.drain_graph(dev)?;
            let mut graph = self.build_graph(frame, &frames).map_err(|f| {
                gpu_error(dev, GpuStage::Running, &f, |r| {
                    MediaError::encode("scale_cuda", r)
                })
            })?;
            if self.opened.is_none() && self.software.is_none() {
                let out = graph
                    .get("out")
                    .and_then(|s| cuda::buffersink_frames(&s))
                    .unwrap_or(frames);
                self.open(&out, dev)?;
            }
            self.graph = Some((graph, key));
        }
        if let Some((graph, _)) = self.graph.as_mut() {
            // The other renditions still need this frame: the source takes its own reference
            // (ffmpeg-next's clone() of a CUDA frame would be an empty frame).
            let mut src = graph.get("in").expect("graph has its source");
            clear_log();
            ffi::buffersrc_write(&mut src, frame)
                .map_err(|e| running(dev, e, "scale_cuda input", "scale_cuda"))?;
        }
        self.pull(dev)
    }

    fn build_graph(
        &self,
        frame: &ff::frame::Video,
        frames: &HwRef,
    ) -> Result<ff::filter::Graph, AvFailure> {
        let fail = |e: ff::Error| AvFailure::from_error(e, "building the scale_cuda graph");
        let find = |n: &str| ff::filter::find(n).ok_or_else(|| fail(ff::Error::FilterNotFound));
        let sar = frame.aspect_ratio();
        let sar = if sar.numerator() > 0 && sar.denominator() > 0 {
            sar
        } else {
            ff::Rational::new(0, 1)
        };
        let args = format!(
            "video_size={}x{}:pix_fmt=cuda:time_base={}/{}:pixel_aspect={}/{}",
            frame.width(),
            frame.height(),
            self.tb.numerator(),
            self.tb.denominator(),
            sar.numerator(),
            sar.denominator()
        );
        clear_log();
        let mut g = ff::filter::Graph::new();
        g.add(&find("buffer")?, "in", &args).map_err(fail)?;
        g.add(&find("buffersink")?, "out", "").map_err(fail)?;
        let mut src = g.get("in").ok_or_else(|| fail(ff::Error::Bug))?;
        cuda::set_buffersrc_frames(&mut src, frames)?;
        let same_size = (frame.width(), frame.height()) == (self.width, self.height);
        let spec = rendition_filters(
            (self.width, self.height),
            self.settings.sw_format,
            same_size,
            self.software.is_some(),
        );
        g.output("in", 0)
            .and_then(|p| p.input("out", 0))
            .and_then(|p| p.parse(&spec))
            .map_err(fail)?;
        g.validate().map_err(fail)?;
        Ok(g)
    }

    fn open(&mut self, frames: &HwRef, dev: u32) -> Result<(), MediaError> {
        let name = self.settings.encoder;
        let codec =
            ff::encoder::find_by_name(name).ok_or_else(|| MediaError::GpuRequestUnsupported {
                device: dev,
                reason: format!("this FFmpeg build has no {name}"),
            })?;
        let mut enc = ff::codec::Context::new_with_codec(codec)
            .encoder()
            .video()
            .map_err(|e| MediaError::encode(name, e))?;
        enc.set_width(self.width);
        enc.set_height(self.height);
        enc.set_format(ff::format::Pixel::CUDA);
        enc.set_time_base(self.tb);
        // NVENC's rate control needs the frame rate (else it assumes 1/time_base fps).
        enc.set_frame_rate(self.frame_rate);
        if let Some(sar) = self.sar {
            enc.set_aspect_ratio(sar);
        }
        ffi::set_encoder_color(&mut enc, &self.color);
        cuda::set_encoder_frames(&mut enc, frames);
        self.opened = Some(open_encoder(
            enc,
            codec,
            &self.settings,
            (&self.name, &self.path, (self.width, self.height)),
            (self.tb, self.frame_rate),
            dev,
        )?);
        Ok(())
    }

    /// Moves every frame the graph has ready into the encoder.
    fn pull(&mut self, dev: u32) -> Result<(), MediaError> {
        let Some((mut graph, key)) = self.graph.take() else {
            return Ok(());
        };
        let result = self.pull_from(&mut graph, dev);
        self.graph = Some((graph, key));
        result
    }

    fn pull_from(&mut self, graph: &mut ff::filter::Graph, dev: u32) -> Result<(), MediaError> {
        loop {
            // A fresh frame each time: the sink moves into it and must not overwrite refs.
            let mut out = ff::frame::Video::empty();
            let got = graph
                .get("out")
                .expect("graph has its sink")
                .sink()
                .frame(&mut out);
            match got {
                Ok(()) => {}
                Err(e) if is_again(&e) => return Ok(()),
                Err(e) => return Err(running(dev, e, "scale_cuda output", "scale_cuda")),
            }
            // The first frame (and each package segment start) is forced to an I frame,
            // which forced-idr makes an IDR.
            let boundary = out
                .pts()
                .is_some_and(|p| self.keyframes.binary_search(&p).is_ok());
            let kind = if self.frames == 0 || boundary {
                ff::picture::Type::I
            } else {
                ff::picture::Type::None
            };
            out.set_kind(kind);
            let pts = out.pts();
            if let Some(sw) = self.software.as_mut() {
                let p = pts.ok_or_else(|| MediaError::encode("scale_cuda", "frame without pts"))?;
                sw.encode(&out, p, kind == ff::picture::Type::I)?;
                self.frames += 1;
                continue;
            }
            if self.opened.is_none() {
                return Err(MediaError::encode(
                    self.settings.encoder,
                    "encoder not open",
                ));
            }
            self.send(&out, dev)?;
            self.frames += 1;
            if let Some(o) = self.opened.as_mut() {
                o.file.sent(pts);
            }
            self.drain(dev)?;
        }
    }

    /// Sends one frame to the encoder. NVENC answers EAGAIN while its one buffered frame is
    /// still waiting: then its packets are drained and the frame sent again.
    fn send(&mut self, frame: &ff::frame::Video, dev: u32) -> Result<(), MediaError> {
        const TRIES: u32 = 1000;
        for _ in 0..TRIES {
            let Some(o) = self.opened.as_mut() else {
                return Err(MediaError::encode(
                    self.settings.encoder,
                    "encoder not open",
                ));
            };
            clear_log();
            match o.encoder.send_frame(frame) {
                Ok(()) => {
                    if let Some(p) = frame.pts() {
                        o.dts.sent(p);
                    }
                    return Ok(());
                }
                Err(e) if is_again(&e) && !matches!(e, ff::Error::Eof) => {
                    self.drain(dev)?;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(e) => return Err(running(dev, e, "sending a frame", self.settings.encoder)),
            }
        }
        Err(MediaError::encode(
            self.settings.encoder,
            "the encoder kept refusing a frame (EAGAIN) with nothing to drain",
        ))
    }

    /// Flushes the current graph (end of input, or before it is replaced).
    fn drain_graph(&mut self, dev: u32) -> Result<(), MediaError> {
        if let Some((graph, _)) = self.graph.as_mut() {
            let mut src = graph.get("in").expect("graph has its source");
            src.source()
                .flush()
                .map_err(|e| running(dev, e, "flushing scale_cuda", "scale_cuda"))?;
            self.pull(dev)?;
        }
        Ok(())
    }

    fn drain(&mut self, dev: u32) -> Result<(), MediaError> {
        let Some(o) = self.opened.as_mut() else {
            return Ok(());
        };
        let mut packet = ff::Packet::empty();
        loop {
            clear_log();
            match o.encoder.receive_packet(&mut packet) {
                Ok(()) => {}
                Err(e) if is_again(&e) => return Ok(()),
                Err(e) => return Err(running(dev, e, "receiving a packet", self.settings.encoder)),
            }
            if let Some(pts) = packet.pts() {
                packet.set_dts(Some(o.dts.next(pts)));
            }
            o.file.write(&mut packet)?;
        }
    }

    pub(super) fn finish(
        mut self,
        device: &HwRef,
        req: &EncodeRequest,
        dev: u32,
    ) -> Result<RenditionResult, MediaError> {
        self.drain_graph(dev)?;
        if let Some(sw) = self.software.take() {
            return sw.finish(req);
        }
        if self.opened.is_none() {
            // No frame reached this rendition: still write a valid (empty) file, as the
            // software path does.
            let frames = cuda::new_frames(device, self.out_format, self.width, self.height)
                .map_err(|f| {
                    gpu_error(dev, GpuStage::Running, &f, |r| {
                        MediaError::encode("cuda", r)
                    })
                })?;
            self.open(&frames, dev)?;
        }
        if let Some(o) = self.opened.as_mut() {
            clear_log();
            o.encoder
                .send_eof()
                .map_err(|e| running(dev, e, "flushing", self.settings.encoder))?;
        }
        self.drain(dev)?;
        let Some(o) = self.opened.take() else {
            unreachable!("opened above")
        };
        o.file.finish(req.source.bias)
    }
}
