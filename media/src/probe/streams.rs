//! What the probe says of each stream before the packet scan: the video's facts (size, pixel
//! format, colour, rotation), the decodable audio tracks, and the streams left out, in words.
//!
//! Why apart from the probe: describing streams reads parameters and side data only; the
//! probe's own work is the packet scan.

use std::path::Path;

use ff::media::Type;
use ffmpeg_next as ff;

use super::limits::MAX_DIMENSION;
use super::subtitles::Collector;
use crate::demux::{open_audio_decoder, open_video_decoder, rational};
use crate::ffi;
use crate::MediaError;
use tessera_model::probe::{AudioInfo, ColorInfo, VideoInfo};

pub(crate) fn describe_video(
    ictx: &ff::format::context::Input,
    path: &Path,
) -> Result<(usize, VideoInfo), MediaError> {
    let Some(stream) = ictx.streams().best(Type::Video) else {
        let kinds: Vec<String> = ictx
            .streams()
            .map(|s| format!("{:?}", s.parameters().medium()).to_lowercase())
            .collect();
        let found = if kinds.is_empty() {
            "the file has no streams".to_string()
        } else {
            format!("found only: {}", kinds.join(", "))
        };
        return Err(MediaError::NoVideo {
            path: path.display().to_string(),
            found,
        });
    };
    let decoder = open_video_decoder(&stream, path, 1)?;
    let (width, height) = (decoder.width(), decoder.height());
    if width == 0 || height == 0 || width > MAX_DIMENSION || height > MAX_DIMENSION {
        return Err(MediaError::Unsupported {
            path: path.display().to_string(),
            reason: format!("video dimensions {width}x{height} are outside 1..={MAX_DIMENSION}"),
        });
    }
    let pix = decoder.format();
    let display_matrix = stream
        .side_data()
        .find(|sd| sd.kind() == ff::codec::packet::side_data::Type::DisplayMatrix)
        .map(|sd| sd.data().to_vec());
    let rotation = display_matrix.as_deref().map(rotation_of).unwrap_or(0.0);
    let sar = ffi::guessed_sar(ictx, &stream);
    let info = VideoInfo {
        index: stream.index(),
        codec: stream.parameters().id().name().to_string(),
        width,
        height,
        pix_fmt: pix
            .descriptor()
            .map(|d| d.name().to_string())
            .unwrap_or_default(),
        bit_depth: ffi::pixel_depth(pix),
        avg_frame_rate: rational(stream.avg_frame_rate()),
        frame_rate: rational(stream.rate()),
        time_base: rational(stream.time_base()),
        sample_aspect_ratio: rational(sar),
        rotation,
        display_matrix,
        color: ColorInfo {
            primaries: decoder.color_primaries().name().map(str::to_string),
            transfer: decoder
                .color_transfer_characteristic()
                .name()
                .map(str::to_string),
            matrix: decoder.color_space().name().map(str::to_string),
            range: decoder.color_range().name().map(str::to_string),
            hdr: None,
        },
        frames: 0,
    };
    Ok((stream.index(), info))
}

pub(crate) fn describe_audio(ictx: &ff::format::context::Input, path: &Path) -> Vec<AudioInfo> {
    ictx.streams()
        .filter(|s| s.parameters().medium() == Type::Audio)
        .filter_map(|s| {
            // A track we cannot decode is left out (and said so), not a reason to fail the job.
            let dec = match open_audio_decoder(&s, path) {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(track = s.index(), error = %e, "audio track skipped");
                    return None;
                }
            };
            Some(AudioInfo {
                index: s.index(),
                codec: s.parameters().id().name().to_string(),
                sample_rate: dec.rate(),
                channels: dec.channels(),
                language: s
                    .metadata()
                    .get("language")
                    .filter(|l| !l.is_empty() && *l != "und")
                    .map(str::to_string),
                time_base: rational(s.time_base()),
                start_seconds: None,
                duration_seconds: 0.0,
                trimmed: false,
                discontinuous: false,
            })
        })
        .collect()
}

/// Every stream that is neither the video nor a decodable audio track, in words.
pub(crate) fn describe_ignored(
    ictx: &ff::format::context::Input,
    video_index: usize,
    audio: &[AudioInfo],
    subtitles: &Collector,
) -> Vec<String> {
    ictx.streams()
        .filter(|s| s.index() != video_index && !audio.iter().any(|a| a.index == s.index()))
        .filter(|s| !subtitles.holds(s.index()))
        .map(|s| {
            let kind = format!("{:?}", s.parameters().medium()).to_lowercase();
            let codec = s.parameters().id().name().to_string();
            let lang = s
                .metadata()
                .get("language")
                .map(|l| format!(" ({l})"))
                .unwrap_or_default();
            format!("stream {}: {kind} {codec}{lang}", s.index())
        })
        .collect()
}

/// Counter-clockwise rotation in degrees encoded by a 3x3 display matrix (16.16 fixed point).
pub(crate) fn rotation_of(matrix: &[u8]) -> f64 {
    if matrix.len() < 36 {
        return 0.0;
    }
    let m: Vec<f64> = matrix
        .chunks_exact(4)
        .map(|c| f64::from(i32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
        .collect();
    let scale0 = m[0].hypot(m[3]);
    let scale1 = m[1].hypot(m[4]);
    if scale0 == 0.0 || scale1 == 0.0 {
        return 0.0;
    }
    let rotation = (m[1] / scale1).atan2(m[0] / scale0).to_degrees();
    let r = -rotation;
    if r == -0.0 {
        0.0
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(a: i32, b: i32, c: i32, d: i32) -> Vec<u8> {
        let vals = [a, b, 0, c, d, 0, 0, 0, 1 << 30];
        vals.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    #[test]
    fn rotation_from_display_matrix() {
        let one = 1 << 16;
        assert_eq!(rotation_of(&matrix(one, 0, 0, one)), 0.0);
        // av_display_rotation_set(m, 90) gives [0, -1, 1, 0] (in 16.16).
        assert!((rotation_of(&matrix(0, -one, one, 0)) - 90.0).abs() < 1e-9);
        assert!((rotation_of(&matrix(0, one, -one, 0)) + 90.0).abs() < 1e-9);
        assert_eq!(rotation_of(&[1, 2, 3]), 0.0);
    }
}
