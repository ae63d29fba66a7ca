//! NVDEC smoke check: decode a file on a card's NVDEC (CUDA frames, never downloaded) and
//! count the frames.
//!
//! Why: cards without NVENC (A100/H100/H200) still have NVDEC; this proves the CUDA device
//! context, the hwaccel and the driver work on a machine where an encode cannot be tried.

use std::path::Path;
use std::time::Instant;

use ffmpeg_next as ff;

use super::{classify_gpu_failure, gpu_error, gpu_unavailable, hw_capabilities};
use super::{GpuFailure, GpuStage};
use crate::demux::{open_input, open_video_decoder_with, read_packet};
use crate::ffi::cuda::{self, AvFailure, LogCapture};
use crate::{ffi, MediaError};
use tessera_model::capabilities::NvdecReport;

/// Decodes the best video stream of `path` on card `device` with NVDEC and counts frames.
/// Fails (rather than silently decoding on the CPU) when NVDEC does not take the stream.
pub fn nvdec_decode_check(path: &Path, device: u32) -> Result<NvdecReport, MediaError> {
    crate::init();
    if !hw_capabilities().cuda_hwaccel {
        return Err(gpu_unavailable(
            device,
            "this FFmpeg build lacks the CUDA hwaccel",
        ));
    }
    let _capture = LogCapture::start();
    let dev = cuda::device(device)
        .map_err(|f| gpu_error(device, GpuStage::Device, &f, |r| gpu_unavailable(device, r)))?;
    let mut ictx = open_input(path)?;
    let stream =
        ictx.streams()
            .best(ff::media::Type::Video)
            .ok_or_else(|| MediaError::NoVideo {
                path: path.display().to_string(),
                found: format!("{} other stream(s)", ictx.nb_streams()),
            })?;
    let index = stream.index();
    let codec = stream.parameters().id().name().to_string();
    let mut decoder =
        open_video_decoder_with(&stream, path, 1, |ctx| cuda::attach_nvdec(ctx, &dev))?;
    let started = Instant::now();
    let mut frame = ff::frame::Video::empty();
    let mut frames = 0u64;
    let mut gpu_format = String::new();
    let mut take = |decoder: &mut ff::decoder::Video| -> Result<(), MediaError> {
        while decoder.receive_frame(&mut frame).is_ok() {
            if frame.format() != ff::format::Pixel::CUDA {
                return Err(gpu_unavailable(
                    device,
                    format!("NVDEC did not take this {codec} stream (software frames came out)"),
                ));
            }
            if gpu_format.is_empty() {
                if let Some(f) = cuda::frame_hw_frames(&frame) {
                    gpu_format = f
                        .frames_info()
                        .0
                        .descriptor()
                        .map_or("?", |d| d.name())
                        .into();
                }
            }
            frames += 1;
        }
        Ok(())
    };
    while let Some(packet) = read_packet(&mut ictx, path)? {
        if packet.stream() != index {
            continue;
        }
        if let Err(e) = decoder.send_packet(&packet) {
            let f = AvFailure::from_error(e, "NVDEC decode");
            if classify_gpu_failure(GpuStage::Running, f.code, &f.describe()) != GpuFailure::Other {
                return Err(gpu_error(device, GpuStage::Running, &f, |r| {
                    MediaError::decode(path, r)
                }));
            }
            tracing::debug!(error = %e, "decoder rejected a packet");
        }
        take(&mut decoder)?;
    }
    let _ = decoder.send_eof();
    take(&mut decoder)?;
    let seconds = started.elapsed().as_secs_f64();
    let hwaccel = ffi::cuda::hwaccel_name(&decoder).unwrap_or_else(|| "no hwaccel".into());
    Ok(NvdecReport {
        frames,
        seconds,
        fps: if seconds > 0.0 {
            frames as f64 / seconds
        } else {
            0.0
        },
        decoder: format!("{codec} via {hwaccel}"),
        width: decoder.width(),
        height: decoder.height(),
        gpu_format,
    })
}
