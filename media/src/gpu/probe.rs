//! The probe of a card, at a GPU worker's start (`TESSERA_GPU=require`) and when a card
//! marked unhealthy has waited out its probation: what a segment needs of the card, tried on
//! two small pictures.
//!
//! Why more than a CUDA context: a pod without the driver's video libraries
//! (`NVIDIA_DRIVER_CAPABILITIES` without `video`: no libnvidia-encode, no libnvcuvid), or a
//! card whose NVENC refuses every session, opens a context fine. Such a card came back after
//! every probation, failed its next segments again and bounced them (second GPU review,
//! finding 5). The probe opens the context, an NVENC session that encodes the pictures
//! (unless the worker encodes in software: cards without NVENC), and an NVDEC decoder that
//! decodes the encoded pictures into card memory; software frames coming out of the decoder
//! fail it, as NVDEC was not used.

use ffmpeg_next as ff;

use super::{gpu_error, gpu_unavailable, hw_capabilities, GpuStage};
use crate::ffi::cuda::{self, clear_log, AvFailure, HwRef, LogCapture};
use crate::MediaError;
use tessera_model::capabilities::CardProbeReport;

/// The probe pictures' size: small, but above NVENC's and NVDEC's minimums (145x49 and
/// 48x16 on every generation that has them).
const SIZE: (u32, u32) = (256, 144);
/// Pictures encoded and decoded.
const PICTURES: i64 = 2;

/// Probes card `device` (a CUDA ordinal): its CUDA context, with `encode` an NVENC session
/// encoding two pictures (else libx264 makes them), and NVDEC decoding them on the card.
/// The error names the step that failed, classified as GPU failures are elsewhere.
pub fn probe_card(device: u32, encode: bool) -> Result<CardProbeReport, MediaError> {
    crate::init();
    let caps = hw_capabilities();
    if !caps.cuda_hwaccel {
        return Err(gpu_unavailable(
            device,
            "this FFmpeg build lacks the CUDA hwaccel",
        ));
    }
    if encode && !caps.h264_nvenc {
        return Err(gpu_unavailable(
            device,
            "this FFmpeg build lacks h264_nvenc",
        ));
    }
    let _capture = LogCapture::start();
    let unavailable =
        |stage, f: &AvFailure| gpu_error(device, stage, f, |r| gpu_unavailable(device, r));
    let dev = cuda::device(device).map_err(|f| unavailable(GpuStage::Device, &f))?;
    let picture = picture()?;
    let (encoder, packets) = if encode {
        let frames = cuda::new_frames(&dev, ff::format::Pixel::NV12, SIZE.0, SIZE.1)
            .map_err(|f| unavailable(GpuStage::Running, &f))?;
        let pictures = (0..PICTURES)
            .map(|_| {
                cuda::upload(&frames, &picture).map_err(|f| unavailable(GpuStage::Running, &f))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let packets = encode_pictures("h264_nvenc", Some(&frames), pictures)
            .map_err(|(stage, f)| unavailable(stage, &f))?;
        ("h264_nvenc", packets)
    } else {
        let pictures = (0..PICTURES).map(|_| picture.clone()).collect();
        let packets = encode_pictures("libx264", None, pictures)
            .map_err(|(_, f)| MediaError::encode("libx264", f.describe()))?;
        ("libx264", packets)
    };
    let (decoder, frames) = decode_on_card(device, &dev, &packets)?;
    Ok(CardProbeReport {
        device,
        encoder: encoder.to_string(),
        decoder,
        frames,
        pci_bus_id: cuda::pci_bus_id(&dev),
    })
}

/// A mid-grey NV12 picture of [`SIZE`].
fn picture() -> Result<ff::frame::Video, MediaError> {
    let mut frame = ff::frame::Video::new(ff::format::Pixel::NV12, SIZE.0, SIZE.1);
    if frame.planes() != 2 {
        return Err(MediaError::encode(
            "probe",
            "cannot allocate an NV12 picture",
        ));
    }
    frame.data_mut(0).fill(110);
    frame.data_mut(1).fill(128);
    Ok(frame)
}

/// Encodes `pictures` with encoder `name` (on the card when `frames` is its CUDA pool)
/// into H.264 packets with their headers in band; a failure with the GPU stage it met.
fn encode_pictures(
    name: &str,
    frames: Option<&HwRef>,
    pictures: Vec<ff::frame::Video>,
) -> Result<Vec<ff::Packet>, (GpuStage, AvFailure)> {
    let missing = || {
        (
            GpuStage::EncoderOpen,
            AvFailure::new(-libc::ENOSYS, format!("no {name}")),
        )
    };
    let codec = ff::encoder::find_by_name(name).ok_or_else(missing)?;
    fn failed(stage: GpuStage, what: &str) -> impl Fn(ff::Error) -> (GpuStage, AvFailure) + '_ {
        move |e| (stage, AvFailure::from_error(e, what))
    }
    let mut enc = ff::codec::Context::new_with_codec(codec)
        .encoder()
        .video()
        .map_err(failed(GpuStage::EncoderOpen, "allocating the encoder"))?;
    enc.set_width(SIZE.0);
    enc.set_height(SIZE.1);
    enc.set_time_base((1, 25));
    enc.set_frame_rate(Some((25, 1)));
    match frames {
        Some(frames) => {
            enc.set_format(ff::format::Pixel::CUDA);
            cuda::set_encoder_frames(&mut enc, frames);
        }
        None => enc.set_format(ff::format::Pixel::NV12),
    }
    clear_log();
    let mut encoder = enc
        .open_as(codec)
        .map_err(failed(GpuStage::EncoderOpen, &format!("opening {name}")))?;
    let mut packets = Vec::new();
    let mut drain = |encoder: &mut ff::encoder::Video| {
        let mut packet = ff::Packet::empty();
        while encoder.receive_packet(&mut packet).is_ok() {
            packets.push(packet.clone());
        }
    };
    for (i, mut picture) in pictures.into_iter().enumerate() {
        picture.set_pts(Some(i as i64));
        clear_log();
        (encoder.send_frame(&picture)).map_err(failed(GpuStage::Running, "encoding"))?;
        drain(&mut encoder);
    }
    (encoder.send_eof()).map_err(failed(GpuStage::Running, "flushing the encoder"))?;
    drain(&mut encoder);
    if packets.is_empty() {
        return Err((
            GpuStage::Running,
            AvFailure::new(-libc::EIO, format!("{name} gave no packet")),
        ));
    }
    Ok(packets)
}

/// Decodes H.264 `packets` on card `device` through NVDEC; the decoder's name and the CUDA
/// frames that came out. Software frames (NVDEC refused the stream) fail it.
fn decode_on_card(
    device: u32,
    dev: &HwRef,
    packets: &[ff::Packet],
) -> Result<(String, u64), MediaError> {
    let unavailable =
        |f: &AvFailure| gpu_error(device, GpuStage::Running, f, |r| gpu_unavailable(device, r));
    let codec = ff::decoder::find(ff::codec::Id::H264)
        .ok_or_else(|| gpu_unavailable(device, "this FFmpeg build has no H.264 decoder"))?;
    let mut ctx = ff::codec::Context::new_with_codec(codec);
    cuda::attach_nvdec(&mut ctx, dev);
    clear_log();
    let mut decoder = (ctx.decoder().video())
        .map_err(|e| unavailable(&AvFailure::from_error(e, "opening the NVDEC decoder")))?;
    let mut frame = ff::frame::Video::empty();
    let mut frames = 0;
    let mut take = |decoder: &mut ff::decoder::Video| -> Result<(), MediaError> {
        while decoder.receive_frame(&mut frame).is_ok() {
            if frame.format() != ff::format::Pixel::CUDA {
                return Err(gpu_unavailable(
                    device,
                    "NVDEC did not decode the probe's H.264 (software frames came out)",
                ));
            }
            frames += 1;
        }
        Ok(())
    };
    for packet in packets {
        clear_log();
        (decoder.send_packet(packet))
            .map_err(|e| unavailable(&AvFailure::from_error(e, "NVDEC decode")))?;
        take(&mut decoder)?;
    }
    let _ = decoder.send_eof();
    take(&mut decoder)?;
    if frames != PICTURES as u64 {
        return Err(gpu_unavailable(
            device,
            format!("NVDEC decoded {frames} of the probe's {PICTURES} pictures"),
        ));
    }
    let hwaccel = cuda::hwaccel_name(&decoder).unwrap_or_else(|| "no hwaccel".into());
    Ok((format!("h264 via {hwaccel}"), frames))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The software half runs anywhere: libx264 makes the probe's two pictures. On a machine
    /// without a card the probe fails at the CUDA context, as a GPU that is unavailable.
    #[test]
    fn the_probe_pictures_encode_and_a_machine_without_a_card_fails_unavailable() {
        crate::init();
        let pictures = vec![picture().expect("picture"), picture().expect("picture")];
        let packets = encode_pictures("libx264", None, pictures).expect("libx264 encodes");
        assert!(packets.iter().any(|p| p.is_key()), "a keyframe");
        match encode_pictures("no_such_encoder", None, Vec::new()) {
            Err((stage, _)) => assert_eq!(stage, GpuStage::EncoderOpen),
            Ok(_) => panic!("an encoder that does not exist encoded"),
        }
        if std::path::Path::new("/dev/nvidiactl").exists() {
            return;
        }
        for encode in [true, false] {
            match probe_card(0, encode) {
                Err(MediaError::GpuUnavailable { device: 0, reason }) => {
                    assert!(!reason.is_empty())
                }
                other => panic!("without a card: {other:?}"),
            }
        }
    }
}
