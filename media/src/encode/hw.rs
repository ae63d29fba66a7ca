//! Encode one segment on an NVIDIA card: NVDEC (or software decode + one upload per frame),
//! scale_cuda per rendition, NVENC; frames stay on the card from decode to encode.
//!
//! Why a separate path: the contract is the software path's (same frames via `RangeGate`,
//! source pts kept, IDR first, closed GOP), but the frames are CUDA frames whose hw frames
//! context must be known before filters and encoders can be configured, so each rendition's
//! scale_cuda graph and encoder are built when the first frame in range arrives.

mod dts;
mod encoder;
mod filters;
pub(crate) mod nvenc;
mod rendition;
mod upload;

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::str::FromStr;
use std::time::Instant;

use ffmpeg_next as ff;

use super::range::{chunk_stream, decode_all, RangeGate};
use crate::demux::{open_input, open_named_video_decoder, open_video_decoder_with};
use crate::ffi::cuda::{self, AvFailure, LogCapture};
use crate::gpu::{
    choose_decode_path, classify_gpu_failure, gpu_error, gpu_unavailable, hw_capabilities,
    nvdec_decoder_name, GpuFailure, GpuStage,
};
use crate::{ffi, MediaError};
use nvenc::{nvenc_encoder_name, nvenc_settings, NvencSettings};
use rendition::HwRendition;
use tessera_model::capabilities::{DecodePath, DecodePlan, HwCapabilities};
use tessera_model::encode::{EncodeRequest, EncodeResult, GpuDecode, HardwareEncode};
use upload::Uploader;

/// Encodes the frames of `[start_pts, end_pts)` from the chunk on card `hw.device`;
/// `progress` gets the running count of frames encoded. The request is already checked.
///
/// When NVDEC was planned but does not take the stream before its first frame (the decoder
/// fell back to software inside FFmpeg, or AV1's native decoder, which decodes only through
/// NVDEC, found none), the segment starts again with a software decode on the request's
/// threads and one upload a frame (second GPU review, failure 2 and M1): before, the fallback
/// decoded on one thread, or AV1 failed the segment as `gpu_request_unsupported`. Its report
/// still says NVDEC was planned, so the worker warns and counts the frames.
pub(crate) fn encode_hw(
    req: &EncodeRequest,
    hw: &HardwareEncode,
    progress: &mut dyn FnMut(u64),
) -> Result<EncodeResult, MediaError> {
    if !hw_capabilities().gpu_path() {
        return Err(gpu_unavailable(
            hw.device,
            "this FFmpeg build lacks the CUDA hwaccel or the scale_cuda filter",
        ));
    }
    match encode_on_card(req, hw, progress)? {
        Ok(result) => Ok(result),
        Err(reason) => {
            tracing::warn!(device = hw.device, %reason, threads = req.threads,
                "NVDEC did not take the segment's first frame: decoding it in software");
            let software = HardwareEncode {
                nvdec: false,
                ..hw.clone()
            };
            let mut result = encode_on_card(req, &software, progress)?
                .map_err(|reason| gpu_unavailable(hw.device, reason))?;
            if let Some(d) = result.gpu_decode.as_mut() {
                d.nvdec_planned = true;
            }
            Ok(result)
        }
    }
}

/// Whether NVDEC is lost for a segment: it was planned, and no frame has come out yet when
/// a software frame comes out (`software_frame`) or the decoder fails (`failed`). Later, a
/// restart would cost the frames already encoded: the segment goes on (a software frame is
/// uploaded and counted; an error stops it, as `decode_failure` says).
fn nvdec_lost(nvdec: bool, frames_seen: u64, software_frame: bool, failed: bool) -> bool {
    nvdec && frames_seen == 0 && (software_frame || failed)
}

/// One attempt at [`encode_hw`]: `Ok(Err(reason))` when NVDEC was lost before the first
/// frame (see [`nvdec_lost`]), nothing encoded yet.
fn encode_on_card(
    req: &EncodeRequest,
    hw: &HardwareEncode,
    progress: &mut dyn FnMut(u64),
) -> Result<Result<EncodeResult, String>, MediaError> {
    let started = Instant::now();
    let dev = hw.device;
    let settings = rendition_settings(req, hw, &hw_capabilities())?;
    let _capture = LogCapture::start();
    cuda::clear_log();
    let device = cuda::device(dev)
        .map_err(|f| gpu_error(dev, GpuStage::Device, &f, |r| gpu_unavailable(dev, r)))?;
    let chunk = req.chunk.as_path();
    let mut ictx = open_input(chunk)?;
    let stream = chunk_stream(&ictx, chunk)?;
    let chunk_tb = stream.time_base();
    let plan = decode_plan(&stream, &settings, hw);
    let nvdec = plan.path == DecodePath::Nvdec;
    let mut decoder = open_gpu_decoder(&stream, chunk, nvdec, req.threads, &device, dev)?;
    let upload_format = ff::format::Pixel::from_str(plan.gpu_format)
        .map_err(|e| MediaError::encode("hwupload", e))?;
    let mut uploader = Uploader::new(device.clone(), upload_format, dev);
    let mut renditions = hw_renditions(req, settings, &decoder, &stream)?;
    let mut gate = RangeGate::new(req, chunk_tb);
    let (mut cuda_frames, mut uploaded_frames) = (0u64, 0u64);
    let (seen, lost) = (Cell::new(0u64), RefCell::new(None::<String>));
    let mut on_frame = |frame: &mut ff::frame::Video| -> Result<(), MediaError> {
        let software = frame.format() != ff::format::Pixel::CUDA;
        if nvdec_lost(nvdec, seen.get(), software, false) {
            let why = lost
                .borrow_mut()
                .insert("its first frame was decoded in software".into())
                .clone();
            return Err(gpu_unavailable(dev, why));
        }
        seen.set(seen.get() + 1);
        let Some(pts) = gate.admit_frame(frame) else {
            return Ok(());
        };
        let mut uploaded;
        let gpu: &mut ff::frame::Video = if frame.format() == ff::format::Pixel::CUDA {
            cuda_frames += 1;
            frame
        } else {
            uploaded_frames += 1;
            uploaded = uploader.upload(frame)?;
            &mut uploaded
        };
        gpu.set_pts(Some(pts));
        gpu.set_kind(ff::picture::Type::None);
        for r in renditions.iter_mut() {
            r.push(gpu, dev)?;
        }
        progress(gate.in_range);
        Ok(())
    };
    let reject = |e: ff::Error| {
        let stop = decode_failure(e, dev, nvdec, chunk)?;
        if nvdec_lost(nvdec, seen.get(), false, true) {
            *lost.borrow_mut() = Some(format!("the decoder failed before its first frame: {stop}"));
        }
        Some(stop)
    };
    // Not on the GPU path yet: NVDEC's frame pool with skipped frames is unproven on a card.
    let decoded = decode_all(
        &mut ictx,
        &mut decoder,
        chunk,
        &mut on_frame,
        Some(&reject),
        None,
    );
    let rejected = match (decoded, lost.take()) {
        (Err(_), Some(why)) => return Ok(Err(why)),
        (decoded, _) => decoded?,
    };
    if gate.decoded == 0 {
        return Err(MediaError::decode(chunk, "no frame could be decoded"));
    }
    let gpu_decode = GpuDecode {
        nvdec_planned: nvdec,
        hwaccel: cuda::hwaccel_name(&decoder),
        uploaded_frames,
        cuda_frames,
        pci_bus_id: cuda::pci_bus_id(&device),
    };
    let results = renditions
        .into_iter()
        .map(|r| r.finish(&device, req, dev))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Ok(EncodeResult {
        decoded_frames: gate.decoded,
        frames_in_range: gate.in_range,
        renditions: results,
        media_seconds: started.elapsed().as_secs_f64(),
        decode_errors: rejected + gate.damaged,
        gpu_decode: Some(gpu_decode),
    }))
}

/// Each output's rendition (its scale_cuda graph and encoder open at the first frame), at the
/// source's size (the request's, else the decoder's) and the stream's frame rate.
fn hw_renditions(
    req: &EncodeRequest,
    settings: Vec<NvencSettings>,
    decoder: &ff::decoder::Video,
    stream: &ff::format::stream::Stream,
) -> Result<Vec<HwRendition>, MediaError> {
    let size = (req.source.source_size).unwrap_or((decoder.width(), decoder.height()));
    let stream_rate = Some(stream.avg_frame_rate())
        .filter(|r| r.numerator() > 0 && r.denominator() > 0)
        .or(Some(stream.rate()));
    (req.outputs.iter().zip(settings))
        .map(|(o, s)| HwRendition::new(req, o, s, size, stream_rate))
        .collect()
}

/// The GPU path's answer to a decode error: `None` skips the packet, `Some` stops the segment.
///
/// A damaged packet (`AVERROR_INVALIDDATA`: the source's fault, not the card's) is skipped
/// and counted against the job's `source_corrupt` limit, on NVDEC as on the software path
/// (GPU re-review, failure 1: before, one damaged packet sent the whole job off the GPU).
/// Any other error on NVDEC stops the segment (a failed surface map or "No decoder surfaces
/// left" would otherwise drop frames silently); a software decode skips a bad packet unless
/// the error is a GPU condition. An NVDEC error that is no GPU condition (a stream NVDEC
/// refuses) is `gpu_request_unsupported`: a job that may run anywhere then runs on the CPU.
fn decode_failure(e: ff::Error, dev: u32, nvdec: bool, chunk: &Path) -> Option<MediaError> {
    if matches!(e, ff::Error::InvalidData) {
        return None;
    }
    let f = AvFailure::from_error(e, "decoding");
    match classify_gpu_failure(GpuStage::Running, f.code, &f.describe()) {
        GpuFailure::Other if !nvdec => None,
        _ => Some(gpu_error(dev, GpuStage::Running, &f, |r| {
            MediaError::GpuRequestUnsupported {
                device: dev,
                reason: format!("NVDEC could not decode {}: {r}", chunk.display()),
            }
        })),
    }
}

/// Each rendition's encoder settings: NVENC's, or with `software_encode` what a software
/// encoder needs of the GPU side. A codec this build has no NVENC encoder for is
/// `gpu_request_unsupported`.
fn rendition_settings(
    req: &EncodeRequest,
    hw: &HardwareEncode,
    caps: &HwCapabilities,
) -> Result<Vec<NvencSettings>, MediaError> {
    let mut settings = Vec::with_capacity(req.outputs.len());
    for o in &req.outputs {
        if hw.software_encode {
            settings.push(software_settings(&o.spec, req.source.source_bit_depth)?);
            continue;
        }
        if !caps.has_encoder(o.spec.codec) {
            // The codec, not the card: a job that may run anywhere then runs on the CPU.
            return Err(MediaError::GpuRequestUnsupported {
                device: hw.device,
                reason: format!(
                    "this FFmpeg build has no {}",
                    nvenc_encoder_name(o.spec.codec)
                ),
            });
        }
        let s = nvenc_settings(&o.spec, hw, req.source.source_bit_depth)
            .map_err(MediaError::InvalidRequest)?;
        settings.push(s);
    }
    Ok(settings)
}

/// NVDEC or a software decode and upload for the chunk's `stream`, as `choose_decode_path`
/// rules from its codec and pixel format and the renditions' bit depth.
fn decode_plan(
    stream: &ff::format::stream::Stream,
    settings: &[NvencSettings],
    hw: &HardwareEncode,
) -> DecodePlan {
    let pix = ffi::codecpar_format(stream);
    let pix_name = pix.descriptor().map_or("unknown", |d| d.name());
    let codec_name = stream.parameters().id().name();
    let ten_bit = settings.iter().any(|s| s.sw_format == "p010le");
    let plan = choose_decode_path(
        codec_name,
        pix_name,
        ffi::pixel_depth(pix),
        hw.nvdec,
        ten_bit,
    );
    tracing::debug!(device = hw.device, path = ?plan.path, reason = %plan.reason, "gpu decode path");
    plan
}

/// What a software-encoded rendition needs of the GPU side: the frames' format on the card
/// (p010 for a 10-bit output, else nv12) and the encoder's name.
fn software_settings(
    spec: &tessera_model::encode::RenditionSpec,
    source_bit_depth: u8,
) -> Result<NvencSettings, MediaError> {
    let encoder = tessera_model::settings::encoder_name(spec.codec);
    if ff::encoder::find_by_name(encoder).is_none() {
        return Err(MediaError::encode(
            encoder,
            "encoder not in this FFmpeg build",
        ));
    }
    let ten_bit =
        tessera_model::settings::output_pix_fmt(spec.codec, source_bit_depth).contains("10");
    Ok(NvencSettings {
        encoder,
        options: Vec::new(),
        sw_format: if ten_bit { "p010le" } else { "nv12" },
    })
}

/// The decoder of a GPU segment. On NVDEC: one thread (the card decodes), and for AV1 the
/// native `av1` decoder, which decodes only through a hwaccel: FFmpeg's default AV1 decoder
/// is libdav1d, which has no NVDEC. Where that open fails (no AV1 NVDEC on this card or
/// build), and on the software-upload path, frame threads decode on the CPU.
fn open_gpu_decoder(
    stream: &ff::format::stream::Stream,
    chunk: &Path,
    nvdec: bool,
    threads: usize,
    device: &cuda::HwRef,
    dev: u32,
) -> Result<ff::decoder::Video, MediaError> {
    if !nvdec {
        return open_video_decoder_with(stream, chunk, threads, |_| {});
    }
    let attach = |ctx: &mut ff::codec::Context| cuda::attach_nvdec(ctx, device);
    match nvdec_decoder_name(stream.parameters().id().name()) {
        Some(name) => {
            cuda::clear_log();
            match open_named_video_decoder(stream, chunk, name, attach) {
                Ok(d) => Ok(d),
                Err(e) => {
                    tracing::debug!(device = dev, error = %e, "{name} on NVDEC refused; CPU decode");
                    open_video_decoder_with(stream, chunk, threads, |_| {})
                }
            }
        }
        None => open_video_decoder_with(stream, chunk, 1, attach),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GPU re-review, failure 1: a damaged packet on NVDEC is skipped and counted, as on the
    /// software path, instead of sending the job off the GPU; any other NVDEC error still
    /// stops the segment with a GPU class.
    #[test]
    fn a_damaged_packet_on_nvdec_is_skipped_and_other_errors_stop_the_segment() {
        let chunk = Path::new("/work/chunk.nut");
        for nvdec in [true, false] {
            assert!(decode_failure(ff::Error::InvalidData, 0, nvdec, chunk).is_none());
        }
        let enomem = ff::Error::Other {
            errno: ff::util::error::ENOMEM,
        };
        let stop = decode_failure(enomem, 1, true, chunk).expect("stops the segment");
        assert_eq!(stop.code().as_str(), "gpu_request_unsupported", "{stop}");
        assert!(stop.to_string().contains("/work/chunk.nut"), "{stop}");
    }

    /// GPU re-review, failure 2 and M1: NVDEC is given up for a segment (a restart with a
    /// software decode) only while planned and before its first frame; later, or on the
    /// software path, the segment goes on.
    #[test]
    fn nvdec_is_given_up_only_before_the_first_frame() {
        // A software frame first, or a decoder that fails first (AV1's native decoder
        // without AV1 NVDEC): restart.
        assert!(nvdec_lost(true, 0, true, false));
        assert!(nvdec_lost(true, 0, false, true));
        // A CUDA frame first: nothing lost.
        assert!(!nvdec_lost(true, 0, false, false));
        // After frames came out, or never planned: go on.
        assert!(!nvdec_lost(true, 1, true, false));
        assert!(!nvdec_lost(true, 5, false, true));
        assert!(!nvdec_lost(false, 0, true, true));
    }
}
