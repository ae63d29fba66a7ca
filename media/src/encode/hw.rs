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
pub(crate) fn encode_hw(
    req: &EncodeRequest,
    hw: &HardwareEncode,
    progress: &mut dyn FnMut(u64),
) -> Result<EncodeResult, MediaError> {
    let started = Instant::now();
    let dev = hw.device;
    let caps = hw_capabilities();
    if !caps.gpu_path() {
        return Err(gpu_unavailable(
            dev,
            "this FFmpeg build lacks the CUDA hwaccel or the scale_cuda filter",
        ));
    }
    let settings = rendition_settings(req, hw, &caps)?;
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
    let (sw, sh) = req
        .source
        .source_size
        .unwrap_or((decoder.width(), decoder.height()));
    let stream_rate = Some(stream.avg_frame_rate())
        .filter(|r| r.numerator() > 0 && r.denominator() > 0)
        .or(Some(stream.rate()));
    let mut renditions = req
        .outputs
        .iter()
        .zip(settings)
        .map(|(o, s)| HwRendition::new(req, o, s, (sw, sh), stream_rate))
        .collect::<Result<Vec<_>, _>>()?;

    let mut gate = RangeGate::new(req, chunk_tb);
    let (mut cuda_frames, mut uploaded_frames) = (0u64, 0u64);
    let mut on_frame = |frame: &mut ff::frame::Video| -> Result<(), MediaError> {
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
    let reject = |e: ff::Error| decode_failure(e, dev, nvdec, chunk);
    // Not on the GPU path yet: NVDEC's frame pool with skipped frames is unproven on a card.
    let rejected = decode_all(
        &mut ictx,
        &mut decoder,
        chunk,
        &mut on_frame,
        Some(&reject),
        None,
    )?;
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
    Ok(EncodeResult {
        decoded_frames: gate.decoded,
        frames_in_range: gate.in_range,
        renditions: results,
        media_seconds: started.elapsed().as_secs_f64(),
        decode_errors: rejected + gate.damaged,
        gpu_decode: Some(gpu_decode),
    })
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
}
