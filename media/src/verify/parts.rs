//! The QC gate's video decode, split into parts decoded side by side.
//!
//! Why: the stitched output is decoded end to end before it is published, after every encode
//! has finished, so its decode is on the job's critical path, and on a long film it is long
//! (a 2-hour 1080p output is ~170,000 frames: ~15 minutes on one core). One decoder with frame
//! threads scales poorly (two threads on 150 frames of 720p: 0.2 s of wall time for 0.33 s of
//! CPU). Every keyframe of our encoders' output is a closed-GOP entry point (IDR; x265 is run
//! with `open-gop=0`, SVT-AV1 with key-frame refresh), so a fresh decoder can start at any of
//! them: the video is cut at keyframes into one part per thread, and each part is read (its
//! own demuxer, seeked near its start) and decoded by a single-threaded decoder of its own.
//!
//! The parts agree on their borders without talking: part k owns the packets from the first
//! keyframe whose dts reaches its border time up to (not including) the first keyframe whose
//! dts reaches the next border. Every frame is decoded once; the parts' timestamps are checked
//! to follow one another. Should a part still disagree with the plan, the caller decodes the
//! whole video again in one part before it fails anything.
//!
//! Every frame is decoded, the frames nothing refers to (most B-frames) too: damage in one of
//! them is damage a viewer sees, so a look that only decoded the references (about half the
//! cost) let it through (re-review N14). The cost is measured by `media/benches/qc_gate.rs`.

use std::path::Path;

use ffmpeg_next as ff;

use crate::demux::{open_own_file_with_dts, open_video_decoder_with, read_packet};
use crate::{ffi, MediaError};

/// How far before its border a part seeks: demuxers seek to a keyframe at or before the
/// target, and some round; starting a little early costs a few skipped packets.
const SEEK_MARGIN_SECONDS: f64 = 1.0;

/// The shown frames of one part (or the whole video): count and first/last timestamps.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Shown {
    /// Frames shown.
    pub frames: u64,
    /// Of those, the frames decoded (all of them: kept for the report's figures).
    pub decoded: u64,
    /// Seconds of the first shown frame.
    pub first: Option<f64>,
    /// Seconds of the last shown frame.
    pub last: Option<f64>,
}

impl Shown {
    fn take(&mut self, frame: &ff::frame::Video, tb: ff::Rational) -> Result<(), String> {
        let Some(ts) = frame.timestamp() else {
            return Err(format!(
                "a video frame after {} has no timestamp",
                at(self.last)
            ));
        };
        let t = seconds(ts, tb);
        if ffi::frame_is_damaged(frame) {
            return Err(format!("the video frame at {t:.3} s decodes damaged"));
        }
        if let Some(prev) = self.last.filter(|&p| t <= p) {
            return Err(format!(
                "video timestamps go backwards: {t:.6} s after {prev:.6} s"
            ));
        }
        self.first.get_or_insert(t);
        self.last = Some(t);
        self.frames += 1;
        self.decoded += 1;
        Ok(())
    }

    /// Appends the next part: its frames must all come after this one's.
    fn then(self, next: Shown) -> Result<Shown, String> {
        if let (Some(prev), Some(first)) = (self.last, next.first) {
            if first <= prev {
                return Err(format!(
                    "video timestamps go backwards: {first:.6} s after {prev:.6} s"
                ));
            }
        }
        Ok(Shown {
            frames: self.frames + next.frames,
            decoded: self.decoded + next.decoded,
            first: self.first.or(next.first),
            last: next.last.or(self.last),
        })
    }
}

/// Seconds of `ts` in time base `tb`.
pub(crate) fn seconds(ts: i64, tb: ff::Rational) -> f64 {
    ts as f64 * f64::from(tb.numerator()) / f64::from(tb.denominator())
}

fn at(t: Option<f64>) -> String {
    t.map_or_else(|| "the start".into(), |t| format!("{t:.3} s"))
}

/// The border times of up to `parts` parts of a video spanning `[start, end]` seconds whose
/// keyframes are at `keyframes` seconds (the demuxer's index): part k begins at the first
/// keyframe whose dts reaches `borders[k]` (part 0 at the first packet). Borders sit just
/// before the keyframes nearest to even shares of the span; when the index holds fewer
/// keyframes than parts (Matroska indexes one per cluster, some formats none), they are the
/// even shares themselves and each part starts at the first keyframe past its share. Pure.
pub(crate) fn borders(keyframes: &[f64], start: f64, end: f64, parts: usize) -> Vec<f64> {
    let parts = parts.max(1);
    let span = (end - start).max(0.0);
    let even = |k: usize| start + span * k as f64 / parts as f64;
    if keyframes.len() < parts {
        return (0..parts).map(even).collect();
    }
    let first = keyframes.iter().copied().fold(f64::INFINITY, f64::min);
    let mut chosen = vec![start.min(first)];
    for k in 1..parts {
        let prev = *chosen.last().unwrap_or(&start);
        let best = keyframes
            .iter()
            .copied()
            .filter(|&t| t > prev && t > first)
            .min_by(|a, b| (a - even(k)).abs().total_cmp(&(b - even(k)).abs()));
        if let Some(t) = best {
            chosen.push(t);
        }
    }
    // Just before the keyframe, so a timestamp rounded on its way through a time base still
    // reaches the border.
    let mut out: Vec<f64> = chosen.iter().skip(1).map(|t| t - 1e-6).collect();
    out.insert(0, chosen[0]);
    out
}

/// Which part a packet belongs to, given the part the previous packet was in: a keyframe
/// whose dts reaches the next border opens the next part (or a later one). Pure.
pub(crate) fn part_of(current: usize, key: bool, dts: f64, borders: &[f64]) -> usize {
    if !key {
        return current;
    }
    let mut part = current;
    while part + 1 < borders.len() && dts >= borders[part + 1] {
        part += 1;
    }
    part
}

/// Decodes every frame of the video stream `index` of `path` in `borders.len()` parts on
/// threads of their own (single-threaded decoders; one part gets `threads` frame threads).
pub(crate) fn decode_video(
    path: &Path,
    index: usize,
    borders: &[f64],
    threads: usize,
) -> Result<Shown, String> {
    if borders.len() <= 1 {
        return decode_part(path, index, borders, 0, threads);
    }
    let parts: Vec<Result<Shown, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..borders.len())
            .map(|k| scope.spawn(move || decode_part(path, index, borders, k, 1)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("the video decoder crashed".into()))
            })
            .collect()
    });
    let mut whole = Shown::default();
    for part in parts {
        whole = whole.then(part?)?;
    }
    Ok(whole)
}

/// Reads and decodes the packets of part `k` (see [`part_of`]).
fn decode_part(
    path: &Path,
    index: usize,
    borders: &[f64],
    k: usize,
    threads: usize,
) -> Result<Shown, String> {
    let media = |e: MediaError| e.to_string();
    let mut ictx = open_own_file_with_dts(path).map_err(media)?;
    let stream = ictx
        .stream(index)
        .ok_or_else(|| format!("no stream {index}"))?;
    let tb = stream.time_base();
    let mut decoder =
        open_video_decoder_with(&stream, path, threads, ffi::decode_fast).map_err(media)?;
    if k > 0 {
        seek_before(&mut ictx, borders[k] - SEEK_MARGIN_SECONDS)?;
    }
    let mut part = 0;
    let mut shown = Shown::default();
    let mut frame = ff::frame::Video::empty();
    let mut first_packet = true;
    while let Some(packet) = read_packet(&mut ictx, path).map_err(media)? {
        if packet.stream() != index {
            continue;
        }
        let dts = packet.dts().or(packet.pts()).map(|t| seconds(t, tb));
        if first_packet && k > 0 && dts.is_some_and(|d| d >= borders[k]) {
            // The seek went past this part's border: its first keyframe may be behind us.
            return Err(format!(
                "cannot read the video from {:.3} s on its own",
                borders[k]
            ));
        }
        first_packet = false;
        if let Some(d) = dts {
            part = part_of(part, packet.is_key(), d, borders);
        }
        if part < k {
            continue;
        }
        if part > k {
            break;
        }
        decoder.send_packet(&packet).map_err(|e| {
            format!(
                "a video packet after {} is undecodable: {e}",
                at(shown.last)
            )
        })?;
        while decoder.receive_frame(&mut frame).is_ok() {
            shown.take(&frame, tb)?;
        }
    }
    let _ = decoder.send_eof();
    while decoder.receive_frame(&mut frame).is_ok() {
        shown.take(&frame, tb)?;
    }
    Ok(shown)
}

/// Seeks the demuxer to a keyframe at or before `target` seconds (the file's start when the
/// target is before it).
fn seek_before(ictx: &mut ff::format::context::Input, target: f64) -> Result<(), String> {
    let us = (target.max(0.0) * 1e6).floor() as i64;
    ictx.seek(us, ..us)
        .map_err(|e| format!("cannot seek the video to {target:.3} s: {e}"))
}

#[cfg(test)]
mod tests;
