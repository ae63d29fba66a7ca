//! Probe: container, streams and the video packet index, by a packet scan without decoding.
//!
//! Why: planning needs every keyframe position and every shown frame's pts; a packet scan
//! gives both at demux speed (seconds for a feature film), where decoding would take minutes.

use std::path::Path;

use ffmpeg_next as ff;

use crate::bitstream::{self, Access, Framing, NalCodec};
use crate::demux::{open_input, read_packet};
use crate::duration::{checked_duration, covered_until, Header};
use crate::ffi;
use crate::reorder;
use crate::streams::{describe_audio, describe_ignored, describe_video};
use crate::MediaError;
use tessera_model::probe::{PacketEntry, Probe, ProbeInfo, Rational};
use tessera_model::timestamps::DerivedPts;
use tessera_model::timestamps::DtsRule;

/// Largest width or height tessera accepts (8K is 7680; DCI 8K 8192).
pub const MAX_DIMENSION: u32 = 16384;
/// Longest input tessera accepts, in seconds (48 hours).
pub const MAX_DURATION_SECONDS: f64 = 48.0 * 3600.0;
/// Most video frames tessera accepts (24 hours at 60 fps): the packet scan stops there, so a
/// file of millions of tiny frames cannot exhaust the probe's memory.
pub const MAX_VIDEO_FRAMES: usize = 24 * 3600 * 60;
/// Highest average frame rate tessera accepts (high-speed cameras shoot 240 fps).
pub const MAX_FRAME_RATE: f64 = 480.0;

/// Probes `path`: stream facts and the decode-order list of video packets.
pub fn probe(path: &Path) -> Result<Probe, MediaError> {
    probe_within(path, MAX_VIDEO_FRAMES)
}

/// [`probe`] refusing inputs of more than `max_frames` video frames (a farm's admission limit,
/// at most [`MAX_VIDEO_FRAMES`]): the scan stops at the limit, so the cost of refusing a
/// hostile file is bounded too.
pub fn probe_within(path: &Path, max_frames: usize) -> Result<Probe, MediaError> {
    let max_frames = max_frames.min(MAX_VIDEO_FRAMES);
    crate::init();
    let size_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let mut ictx = open_input(path)?;
    let container = ictx.format().name().to_string();
    let (video_index, mut video) = describe_video(&ictx, path)?;
    if tessera_model::hdr::is_hdr_transfer(video.color.transfer.as_deref()) {
        let meta = crate::hdr::read_metadata(path, video_index)?;
        video.color.hdr = (meta != Default::default()).then_some(meta);
    }
    let mut audio = describe_audio(&ictx, path);
    let mut subtitles = crate::subtitles::Collector::new(&ictx);
    let ignored = describe_ignored(&ictx, video_index, &audio, &subtitles);
    let chapters: Vec<tessera_model::probe::Chapter> = ictx
        .chapters()
        .map(|c| {
            let tb = rational(c.time_base());
            tessera_model::probe::Chapter {
                start_seconds: tb.seconds(c.start()),
                end_seconds: tb.seconds(c.end()),
                title: c.metadata().get("title").map(str::to_string),
            }
        })
        .collect();
    let title = ictx.metadata().get("title").map(str::to_string);

    let vtb = video.time_base;
    let nal = NalCodec::from_name(&video.codec).map(|codec| {
        let extradata = ictx
            .stream(video_index)
            .map(|s| ffi::stream_extradata(&s))
            .unwrap_or_default();
        (codec, Framing::from_extradata(codec, &extradata))
    });
    let mut packets = Vec::new();
    // H.264/HEVC: whether each packet is a reference picture (for recovery distances).
    let mut references: Vec<bool> = Vec::new();
    // Per audio track: (first shown pts, end of last shown packet), in the track's time base.
    let mut audio_span: Vec<Option<(i64, i64)>> = vec![None; audio.len()];
    let mut audio_skip_until: Vec<Option<i64>> = vec![None; audio.len()];
    // Per audio track: the pts of the last packet seen, and the current run of rising
    // timestamps (start, end, the length of the runs before it).
    let mut audio_last: Vec<Option<i64>> = vec![None; audio.len()];
    let mut audio_runs: Vec<Option<(i64, i64, i64)>> = vec![None; audio.len()];
    // Whether the container stores presentation times at all (see `reorder`).
    let (mut pts_missing, mut pts_differ) = (false, false);
    // Video packets with neither pts nor dts (a raw elementary stream has no timing at all).
    let mut untimed = 0u64;
    let video_delay = ictx
        .stream(video_index)
        .map_or(0, |s| ffi::stream_video_delay(&s));
    while let Some(packet) = read_packet(&mut ictx, path)? {
        let idx = packet.stream();
        let discard = ffi::packet_is_discard(&packet);
        if idx == video_index {
            let Some((pts, dts)) = packet_times(&packet) else {
                untimed += 1;
                continue;
            };
            pts_missing |= packet.pts().is_none();
            pts_differ |= packet.pts() != packet.dts();
            let (key, recovery) = match (packet.is_key(), nal) {
                (true, Some((codec, framing))) => {
                    match bitstream::classify(codec, framing, packet.data().unwrap_or(&[])) {
                        Access::Clean => (true, None),
                        Access::Recovery(n) => (false, Some(n)),
                        Access::None => (false, None),
                    }
                }
                (key, _) => (key, None),
            };
            if let Some((codec, framing)) = nal {
                let data = packet.data().unwrap_or(&[]);
                references.push(bitstream::is_reference(codec, framing, data));
            }
            if packets.len() >= max_frames {
                return Err(MediaError::Unsupported {
                    path: path.display().to_string(),
                    reason: format!("more than {max_frames} video frames, over the limit"),
                });
            }
            packets.push(PacketEntry {
                pts,
                dts,
                key,
                discard,
                recovery,
            });
        } else if subtitles.holds(idx) {
            subtitles.take(&packet);
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
            // A packet that starts before the previous one: recordings joined, timestamps
            // that overlap or start over. A stream copy would write them backwards.
            if audio_last[pos].is_some_and(|last| pts < last) {
                audio[pos].discontinuous = true;
            }
            audio_last[pos] = Some(pts);
            let span = audio_span[pos].get_or_insert((pts, end));
            // A jump back of a second or more starts a run of its own: the runs play one
            // after the other (see `rejoin_runs`), so their lengths add up.
            let jump = audio[pos].time_base.ticks(1.0);
            let run = audio_runs[pos].get_or_insert((pts, end, 0));
            if pts < run.1 - jump {
                *run = (pts, end, run.2 + run.1 - run.0);
            }
            run.1 = run.1.max(end);
            if run.2 == 0 {
                span.0 = span.0.min(pts);
            }
            span.1 = span.1.max(end);
        }
    }
    let mut derived_pts = if reorder::needs_derived_pts(pts_missing, pts_differ, video_delay) {
        let ranks = reorder::display_ranks(path, video_index, packets.len())?;
        let dts: Vec<i64> = packets.iter().map(|p| p.dts).collect();
        let derived = reorder::derive_pts(&dts, &ranks);
        for (p, &pts) in packets.iter_mut().zip(&derived.pts) {
            p.pts = pts;
        }
        for &h in &derived.hidden {
            packets[h as usize].discard = true;
        }
        Some(derived)
    } else {
        None
    };
    // Recordings joined byte for byte: each run of timestamps follows the one before.
    let mut warnings = Vec::new();
    let mut pts_now: Vec<i64> = packets.iter().map(|p| p.pts).collect();
    let threshold = tessera_model::timestamps::jump_threshold(&pts_now, vtb.ticks(1.0));
    let jumps = tessera_model::timestamps::rejoin_runs(&mut pts_now, threshold);
    // Frames that share a time (a coarse time base): a tick apart, every one kept, in the
    // order the decoder shows them (which only a decode pass can tell; only such files pay).
    let separated = if tessera_model::timestamps::has_equal_pts(&pts_now) {
        let ranks = reorder::display_ranks(path, video_index, packets.len())?;
        tessera_model::timestamps::separate_equal_pts(&mut pts_now, |i| {
            ranks.get(i).copied().flatten().unwrap_or(usize::MAX)
        })
    } else {
        0
    };
    if separated > 0 {
        tracing::info!(
            separated,
            "frames sharing a presentation time moved a tick apart"
        );
    }
    if !jumps.is_empty() || separated > 0 {
        for &(i, back) in &jumps {
            warnings.push(format!(
                "video timestamps jump back by {:.3} s at packet {i} (recordings joined?): \
                 the parts are kept in the order of the file, one after the other",
                vtb.seconds(back)
            ));
        }
        for (p, &pts) in packets.iter_mut().zip(&pts_now) {
            p.pts = pts;
        }
        let hidden = derived_pts.take().map(|d| d.hidden).unwrap_or_default();
        derived_pts = Some(DerivedPts {
            pts: pts_now,
            hidden,
        });
    }
    // Demuxers' dts are missing (Matroska), guessed (NUT) or absent (AVI) too often to copy:
    // every intermediate uses dts derived from the pts by one rule.
    let pts_in_decode_order: Vec<i64> = packets.iter().map(|p| p.pts).collect();
    let dts_rule = DtsRule::of(&pts_in_decode_order);
    let mut deriver = dts_rule.deriver();
    for p in &mut packets {
        p.dts = deriver.next(p.pts);
    }
    recovery_in_packets(&mut packets, &references, dts_rule.depth);
    let shown: Vec<&PacketEntry> = packets.iter().filter(|p| !p.discard).collect();
    if shown.is_empty() && untimed > 0 {
        return Err(MediaError::Unsupported {
            path: path.display().to_string(),
            reason: format!(
                "{untimed} video packets and not one timestamp: a raw elementary stream \
                 (.h264, .hevc) carries no timing; put it in a container first, e.g. \
                 `ffmpeg -framerate 25 -i INPUT -c copy OUTPUT.mp4` with its frame rate"
            ),
        });
    }
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
    for (i, ((info, span), skip)) in audio
        .iter_mut()
        .zip(&audio_span)
        .zip(&audio_skip_until)
        .enumerate()
    {
        if let Some((first, end)) = span {
            let first = &(*first).max(skip.unwrap_or(i64::MIN));
            let s = info.time_base.seconds(*first);
            info.start_seconds = Some(s);
            info.duration_seconds = info.time_base.seconds(end - first);
            if let Some((run_start, run_end, before)) = audio_runs[i] {
                if before > 0 {
                    info.duration_seconds = info.time_base.seconds(before + run_end - run_start);
                }
            }
            start_seconds = start_seconds.min(s);
        }
    }
    let container_duration = if ictx.duration() > 0 {
        ictx.duration() as f64 / f64::from(ff::ffi::AV_TIME_BASE)
    } else {
        0.0
    };
    let duration_seconds = checked_duration(
        path,
        Header {
            seconds: container_duration,
            measured: !ffi::duration_is_bitrate_guess(&ictx),
        },
        video_end - video_start,
        shown.len(),
        &audio,
        covered_until(video_start, video_end, shown.len(), &audio, start_seconds),
    )?;
    Ok(Probe {
        info: ProbeInfo {
            container,
            duration_seconds,
            start_seconds,
            video,
            audio,
            size_bytes,
            ignored,
            chapters,
            title,
            subtitles: subtitles.finish(),
            warnings,
        },
        packets,
        dts_rule,
        derived_pts,
    })
}

/// Turns each recovery point's count (reference pictures until the picture is whole again)
/// into a distance in packets, decode order, plus the reorder depth as a margin; a point that
/// never recovers within the stream gets no recovery at all.
fn recovery_in_packets(packets: &mut [PacketEntry], references: &[bool], depth: u32) {
    // refs_before[k]: reference pictures among packets 0..k.
    let mut refs_before = Vec::with_capacity(packets.len() + 1);
    refs_before.push(0u64);
    for k in 0..packets.len() {
        let is_ref = references.get(k).copied().unwrap_or(true);
        refs_before.push(refs_before[k] + u64::from(is_ref));
    }
    for j in 0..packets.len() {
        let Some(count) = packets[j].recovery else {
            continue;
        };
        let need = refs_before[j] + u64::from(count) + 1;
        let k = refs_before.partition_point(|&r| r < need);
        packets[j].recovery = (k <= packets.len()).then(|| {
            u32::try_from(k - j)
                .unwrap_or(u32::MAX)
                .saturating_add(depth)
        });
    }
}

/// The number of samples a packet's skip-samples side data tells the decoder to drop at its
/// start (0 when none).
pub(crate) fn skip_samples(packet: &ff::Packet) -> i64 {
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
