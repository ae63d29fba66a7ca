//! Reading a source's HDR10 static metadata with FFmpeg (the rules that use it live in
//! tessera-model's `hdr`).
//!
//! Why apart from the probe: most files carry it only in-band, so it takes a decode.

use tessera_model::hdr::HdrMetadata;

/// Reads a source's HDR10 static metadata: the container's stream side data, else the first
/// decoded frame's (HEVC SEI, AV1 metadata OBUs), as most files carry it only in-band.
pub(crate) fn read_metadata(
    path: &std::path::Path,
    video_index: usize,
) -> Result<HdrMetadata, crate::MediaError> {
    use crate::demux::{open_input, open_video_decoder, read_packet};
    /// Packets fed before giving up on a first frame (a long reorder delay or broken start).
    const MAX_PACKETS: usize = 64;
    let mut ictx = open_input(path)?;
    let stream = ictx
        .stream(video_index)
        .ok_or_else(|| crate::MediaError::invalid(path, "video stream vanished"))?;
    let from_stream = crate::ffi::hdr_metadata(Some(&stream), None);
    if from_stream.mastering.is_some() && from_stream.light_level.is_some() {
        return Ok(from_stream);
    }
    let mut decoder = open_video_decoder(&stream, path, 1)?;
    let mut frame = ffmpeg_next::frame::Video::empty();
    let mut fed = 0;
    while let Some(packet) = read_packet(&mut ictx, path)? {
        if packet.stream() != video_index {
            continue;
        }
        let _ = decoder.send_packet(&packet);
        if decoder.receive_frame(&mut frame).is_ok() {
            let from_frame = crate::ffi::hdr_metadata(None, Some(&frame));
            return Ok(HdrMetadata {
                mastering: from_frame.mastering.or(from_stream.mastering),
                light_level: from_frame.light_level.or(from_stream.light_level),
            });
        }
        fed += 1;
        if fed >= MAX_PACKETS {
            break;
        }
    }
    Ok(from_stream)
}
