//! Probe: container, streams and the video packet index, by a packet scan without decoding.
//!
//! Why: planning needs every keyframe position and every shown frame's pts; a packet scan
//! gives both at demux speed (seconds for a feature film), where decoding would take minutes.
//!
//! The steps, in order: describe the streams (streams.rs, with HDR metadata from hdr.rs and
//! subtitle cues collected by subtitles.rs), scan the packets once (scan.rs, which reads the
//! random-access points with bitstream.rs), repair the video's timestamps (reorder.rs where
//! the container stores no pts), derive dts, then judge the duration (duration.rs) against
//! the limits (limits.rs).

mod bitstream;
mod duration;
mod first_sound;
mod hdr;
mod head;
pub(crate) mod limits;
mod reorder;
mod repairs;
mod scan;
mod streams;
mod subtitles;

use std::path::Path;

use ffmpeg_next as ff;

use crate::demux::{open_input, rational};
use crate::ffi;
use crate::MediaError;
use duration::{checked_duration, covered_until, Header};
use limits::MAX_VIDEO_FRAMES;
use repairs::audio_repairs;
use scan::{scan_packets, AudioSpan, VideoScan};
use streams::{describe_audio, describe_ignored, describe_video};
use subtitles::Collector;
use tessera_model::probe::{AudioInfo, Chapter, PacketEntry, Probe, ProbeInfo, Rational};
use tessera_model::timestamps::DerivedPts;
use tessera_model::timestamps::DtsRule;

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
        let meta = hdr::read_metadata(path, video_index)?;
        video.color.hdr = (meta != Default::default()).then_some(meta);
    }
    let mut audio = describe_audio(&ictx, path);
    let mut subtitles = Collector::new(&ictx);
    let ignored = describe_ignored(&ictx, video_index, &audio, &subtitles);
    let chapters = chapters(&ictx);
    let title = ictx.metadata().get("title").map(str::to_string);
    let video_delay = ictx
        .stream(video_index)
        .map_or(0, |s| ffi::stream_video_delay(&s));
    let (scan, spans) = scan_packets(
        &mut ictx,
        path,
        &video,
        &mut audio,
        &mut subtitles,
        max_frames,
    )?;
    let vtb = video.time_base;
    let VideoTimes {
        mut packets,
        references,
        derived_pts,
        mut warnings,
        run_shifts,
        untimed,
    } = video_times(path, video_index, vtb, scan, video_delay)?;
    let dts_rule = derive_dts(&mut packets, &references);
    let (frames, video_start, video_end) = shown_span(path, &packets, untimed, vtb)?;
    video.frames = frames as u64;
    let run_shifts_seconds: Vec<f64> = run_shifts.iter().map(|&s| vtb.seconds(s)).collect();
    let first_sounds = first_sound::first_sounds(path, &audio)?;
    let start_seconds = audio_timing(&mut audio, &spans, &first_sounds, video_start);
    warnings.extend(audio_repairs(&audio, &spans, &run_shifts_seconds));
    let duration_seconds = checked_duration(
        path,
        container_header(&ictx),
        video_end - video_start,
        frames,
        &audio,
        covered_until(video_start, video_end, frames, &audio, start_seconds),
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
            run_shifts_seconds,
        },
        packets,
        dts_rule,
        derived_pts,
    })
}

/// The video's times from its scan, repaired (see [`repair_pts`]), untimed packets placed, and
/// the undecodable head of a recording cut mid-GOP discarded, with their warnings.
struct VideoTimes {
    packets: Vec<PacketEntry>,
    references: Vec<bool>,
    derived_pts: Option<DerivedPts>,
    warnings: Vec<String>,
    /// The shift of each run after the first (video time base).
    run_shifts: Vec<i64>,
    untimed: u64,
}

/// Makes the [`VideoTimes`] of a scan of `path`'s video stream `video_index`.
fn video_times(
    path: &Path,
    video_index: usize,
    vtb: Rational,
    scan: VideoScan,
    video_delay: i32,
) -> Result<VideoTimes, MediaError> {
    let VideoScan {
        mut packets,
        references,
        pts_missing,
        pts_differ,
        untimed,
        filled,
        ..
    } = scan;
    // Whether the container stores presentation times at all (see `reorder`).
    let derive = reorder::needs_derived_pts(pts_missing, pts_differ, video_delay);
    let mut unshown_untimed = 0;
    if !filled.is_empty() && !derive && video_delay > 0 {
        // Untimed pictures of a reordering codec (H.264 or HEVC in a program stream): their
        // place in display order is the decoder's word (only such files pay the decode).
        let ranks = reorder::display_ranks(path, video_index, packets.len())?;
        unshown_untimed = reorder::place_untimed(&mut packets, &filled, &ranks);
    }
    let (mut derived_pts, mut warnings, run_shifts) =
        repair_pts(path, video_index, vtb, &mut packets, derive)?;
    if !filled.is_empty() && derived_pts.is_none() {
        // The filled-in times must reach the split, which reads the container's (none).
        derived_pts = Some(DerivedPts {
            pts: packets.iter().map(|p| p.pts).collect(),
            hidden: Vec::new(),
        });
    }
    // The head of a recording cut mid-GOP: packets the display-order decodes showed nothing
    // for (untimed ones included), and those the head's own decode finds (head.rs).
    let first_shown = packets.iter().position(|p| !p.discard).unwrap_or(0);
    let hidden_head = derived_pts.as_ref().map_or(0, |d| {
        d.hidden
            .iter()
            .filter(|&&h| (h as usize) < first_shown)
            .count()
    });
    let undecodable = head::discard_undecodable_head(path, video_index, &mut packets)?
        + hidden_head
        + unshown_untimed;
    if undecodable > 0 {
        let what = match undecodable {
            1 => "video packet cannot".to_string(),
            n => format!("{n} video packets cannot"),
        };
        warnings.push(format!(
            "the first {what} be decoded (the recording starts in the middle of a GOP, \
             before its first keyframe): the output starts at the first picture that decodes, \
             the audio keeps its offset from it"
        ));
    }
    Ok(VideoTimes {
        packets,
        references,
        derived_pts,
        warnings,
        run_shifts,
        untimed,
    })
}

/// The input's chapters, in seconds.
fn chapters(ictx: &ff::format::context::Input) -> Vec<Chapter> {
    ictx.chapters()
        .map(|c| {
            let tb = rational(c.time_base());
            Chapter {
                start_seconds: tb.seconds(c.start()),
                end_seconds: tb.seconds(c.end()),
                title: c.metadata().get("title").map(str::to_string),
            }
        })
        .collect()
}

/// What [`repair_pts`] gives: the repaired times when any repair applied, a warning per jump
/// back, and the shift of each run after the first (video time base).
type Repaired = (Option<DerivedPts>, Vec<String>, Vec<i64>);

/// Repairs the video's presentation times in `packets`: derived from the decoder's display
/// order where the container stores none (`derive`, see `reorder`), recordings joined byte
/// for byte laid one after the other, frames that share a time moved a tick apart.
fn repair_pts(
    path: &Path,
    video_index: usize,
    vtb: Rational,
    packets: &mut [PacketEntry],
    derive: bool,
) -> Result<Repaired, MediaError> {
    let mut derived_pts = if derive {
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
    let before: Vec<i64> = pts_now.clone();
    let jumps = tessera_model::timestamps::rejoin_runs(&mut pts_now, threshold);
    let run_shifts: Vec<i64> = jumps.iter().map(|&(i, _)| pts_now[i] - before[i]).collect();
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
    Ok((derived_pts, warnings, run_shifts))
}

/// Sets every packet's dts from the pts by one rule, and each recovery point's distance.
///
/// Why: demuxers' dts are missing (Matroska), guessed (NUT) or absent (AVI) too often to
/// copy, so every intermediate uses dts derived from the pts by one rule.
fn derive_dts(packets: &mut [PacketEntry], references: &[bool]) -> DtsRule {
    let pts_in_decode_order: Vec<i64> = packets.iter().map(|p| p.pts).collect();
    let dts_rule = DtsRule::of(&pts_in_decode_order);
    let mut deriver = dts_rule.deriver();
    for p in packets.iter_mut() {
        p.dts = deriver.next(p.pts);
    }
    recovery_in_packets(packets, references, dts_rule.depth);
    dts_rule
}

/// The shown video frames: how many, and the first and last pts in seconds. No shown frame is
/// an error: a raw elementary stream when its `untimed` packets had no timestamp, else a
/// video stream with no frames.
fn shown_span(
    path: &Path,
    packets: &[PacketEntry],
    untimed: u64,
    vtb: Rational,
) -> Result<(usize, f64, f64), MediaError> {
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
    let video_start = vtb.seconds(shown.iter().map(|p| p.pts).min().unwrap_or(0));
    let video_end = vtb.seconds(shown.iter().map(|p| p.pts).max().unwrap_or(0));
    Ok((shown.len(), video_start, video_end))
}

/// Sets each audio track's start and duration from what the scan saw of it (the first sound
/// heard comes after the samples its decoder skips, and no earlier than its first decoded
/// frame, `first_sounds`; runs joined one after the other add up), and gives the earliest
/// start of any stream, the video's `video_start` included.
fn audio_timing(
    audio: &mut [AudioInfo],
    spans: &[AudioSpan],
    first_sounds: &[Option<f64>],
    video_start: f64,
) -> f64 {
    let mut start_seconds = video_start;
    for (k, (info, seen)) in audio.iter_mut().zip(spans).enumerate() {
        if let Some((first, end)) = seen.span {
            let decoded = first_sounds.get(k).copied().flatten();
            let first = first
                .max(seen.skip_until.unwrap_or(i64::MIN))
                .max(decoded.map_or(i64::MIN, |s| info.time_base.ticks(s)));
            let s = info.time_base.seconds(first);
            info.start_seconds = Some(s);
            info.duration_seconds = info.time_base.seconds(end - first);
            if let Some((run_start, run_end, before)) = seen.run {
                if before > 0 {
                    info.duration_seconds = info.time_base.seconds(before + run_end - run_start);
                }
            }
            start_seconds = start_seconds.min(s);
        }
    }
    start_seconds
}

/// The duration the container's header states, and whether it was measured.
fn container_header(ictx: &ff::format::context::Input) -> Header {
    let seconds = if ictx.duration() > 0 {
        ictx.duration() as f64 / f64::from(ff::ffi::AV_TIME_BASE)
    } else {
        0.0
    };
    Header {
        seconds,
        measured: !ffi::duration_is_bitrate_guess(ictx),
    }
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
