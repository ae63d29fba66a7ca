//! Probe: container, streams and the video packet index, by a packet scan without decoding.
//!
//! Why: planning needs every keyframe position and every shown frame's pts; a packet scan
//! gives both at demux speed (seconds for a feature film), where decoding would take minutes.

use std::path::Path;

use ff::media::Type;
use ffmpeg_next as ff;

use crate::demux::{open_audio_decoder, open_input, open_video_decoder, read_packet};
use crate::ffi;
use crate::types::{AudioInfo, ColorInfo, PacketEntry, Probe, ProbeInfo, Rational, VideoInfo};
use crate::MediaError;

/// Largest width or height tessera accepts (8K is 7680; DCI 8K 8192).
pub const MAX_DIMENSION: u32 = 16384;
/// Longest input tessera accepts, in seconds (48 hours).
pub const MAX_DURATION_SECONDS: f64 = 48.0 * 3600.0;

/// Probes `path`: stream facts and the decode-order list of video packets.
pub fn probe(path: &Path) -> Result<Probe, MediaError> {
    crate::init();
    let size_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let mut ictx = open_input(path)?;
    let container = ictx.format().name().to_string();
    let (video_index, mut video) = describe_video(&ictx, path)?;
    let mut audio = describe_audio(&ictx, path);

    let vtb = video.time_base;
    let mut packets = Vec::new();
    // Per audio track: (first shown pts, end of last shown packet), in the track's time base.
    let mut audio_span: Vec<Option<(i64, i64)>> = vec![None; audio.len()];
    let mut audio_skip_until: Vec<Option<i64>> = vec![None; audio.len()];
    while let Some(packet) = read_packet(&mut ictx, path)? {
        let idx = packet.stream();
        let discard = ffi::packet_is_discard(&packet);
        if idx == video_index {
            let Some((pts, dts)) = packet_times(&packet) else {
                continue;
            };
            packets.push(PacketEntry {
                pts,
                dts,
                key: packet.is_key(),
                discard,
            });
        } else if let Some(pos) = audio.iter().position(|a| a.index == idx) {
            let Some(pts) = packet.pts().or(packet.dts()) else {
                continue;
            };
            // Samples the decoder drops from here on (priming, edit-list trim): the first
            // sound heard is that much later. The count may span several packets.
            let skip = skip_samples(&packet);
            if skip > 0 {
                let tb = audio[pos].time_base;
                let rate = i64::from(audio[pos].sample_rate.max(1));
                let until = pts + skip * i64::from(tb.den) / (rate * i64::from(tb.num.max(1)));
                audio_skip_until[pos] = audio_skip_until[pos].max(Some(until));
            }
            if discard {
                audio[pos].trimmed = true;
                continue;
            }
            let end = pts + packet.duration().max(0);
            let span = audio_span[pos].get_or_insert((pts, end));
            span.0 = span.0.min(pts);
            span.1 = span.1.max(end);
        }
    }
    let shown: Vec<&PacketEntry> = packets.iter().filter(|p| !p.discard).collect();
    if shown.is_empty() {
        return Err(MediaError::NoVideo {
            path: path.display().to_string(),
            found: "a video stream with no frames".into(),
        });
    }
    video.frames = shown.len() as u64;
    let video_start = vtb.seconds(shown.iter().map(|p| p.pts).min().unwrap_or(0));
    let video_end = vtb.seconds(shown.iter().map(|p| p.pts).max().unwrap_or(0));

    let mut start_seconds = video_start;
    for ((info, span), skip) in audio.iter_mut().zip(&audio_span).zip(&audio_skip_until) {
        if let Some((first, end)) = span {
            let first = &(*first).max(skip.unwrap_or(i64::MIN));
            let s = info.time_base.seconds(*first);
            info.start_seconds = Some(s);
            info.duration_seconds = info.time_base.seconds(end - first);
            start_seconds = start_seconds.min(s);
        }
    }
    let container_duration = if ictx.duration() > 0 {
        ictx.duration() as f64 / f64::from(ff::ffi::AV_TIME_BASE)
    } else {
        0.0
    };
    let duration_seconds = if container_duration > 0.0 {
        container_duration
    } else {
        video_end - video_start
    };
    if duration_seconds > MAX_DURATION_SECONDS {
        return Err(MediaError::Unsupported {
            path: path.display().to_string(),
            reason: format!(
                "duration {duration_seconds:.0} s exceeds the limit of {MAX_DURATION_SECONDS:.0} s"
            ),
        });
    }
    Ok(Probe {
        info: ProbeInfo {
            container,
            duration_seconds,
            start_seconds,
            video,
            audio,
            size_bytes,
        },
        packets,
    })
}

fn describe_video(
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
    let sar = ffi::codecpar_sar(&stream);
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
        },
        frames: 0,
    };
    Ok((stream.index(), info))
}

fn describe_audio(ictx: &ff::format::context::Input, path: &Path) -> Vec<AudioInfo> {
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
            })
        })
        .collect()
}

/// The number of samples a packet's skip-samples side data tells the decoder to drop at its
/// start (0 when none).
fn skip_samples(packet: &ff::Packet) -> i64 {
    packet
        .side_data()
        .find(|sd| sd.kind() == ff::codec::packet::side_data::Type::SkipSamples)
        .and_then(|sd| {
            sd.data()
                .get(..4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        })
        .map(i64::from)
        .unwrap_or(0)
}

/// A packet's (pts, dts), falling back to each other; `None` when it has neither.
///
/// Why one function: probe and split must skip exactly the same packets, or the packet
/// indices in a plan would point at the wrong packets.
pub(crate) fn packet_times(packet: &ff::Packet) -> Option<(i64, i64)> {
    let pts = packet.pts().or(packet.dts())?;
    Some((pts, packet.dts().unwrap_or(pts)))
}

pub(crate) fn rational(r: ff::Rational) -> Rational {
    Rational::new(r.numerator(), r.denominator())
}

/// Counter-clockwise rotation in degrees encoded by a 3x3 display matrix (16.16 fixed point).
pub fn rotation_of(matrix: &[u8]) -> f64 {
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
