//! The probe's packet scan: one read of every packet, without decoding, that indexes the video
//! packets, collects the subtitle cues and follows each audio track's timestamps.
//!
//! Why apart from the probe: the scan is the one loop over the whole file; what the probe then
//! makes of its findings (timestamp repair, durations, limits) are steps of their own.

use std::path::Path;

use ffmpeg_next as ff;

use super::bitstream::{self, Access, Framing, NalCodec};
use super::subtitles::Collector;
use crate::audio::timeline::{JUMP_SECONDS, TOLERANCE_SECONDS};
use crate::demux::{packet_times, read_packet, skip_samples};
use crate::{ffi, MediaError};
use tessera_model::probe::{AudioInfo, PacketEntry, VideoInfo};

/// What the scan found of the video stream.
pub(crate) struct VideoScan {
    /// The decode-order index of the video packets that carry a timestamp.
    pub(crate) packets: Vec<PacketEntry>,
    /// H.264/HEVC: whether each packet is a reference picture (for recovery distances).
    pub(crate) references: Vec<bool>,
    /// Some packet had no pts (see `reorder`).
    pub(crate) pts_missing: bool,
    /// Some packet's pts differed from its dts (see `reorder`).
    pub(crate) pts_differ: bool,
    /// Video packets with neither pts nor dts when no packet had one: a raw elementary stream
    /// (no index then).
    pub(crate) untimed: u64,
    /// Indices of the packets without a timestamp of their own (see `demux::packet_times`):
    /// their times are filled in from their neighbours' ([`fill_untimed`]).
    pub(crate) filled: Vec<usize>,
}

/// What the scan found of one audio track's timestamps, in the track's time base.
#[derive(Debug, Clone, Default)]
pub(crate) struct AudioSpan {
    /// First shown pts and the end of the last shown packet.
    pub(crate) span: Option<(i64, i64)>,
    /// Where the samples the decoder skips (priming, edit-list trim) end.
    pub(crate) skip_until: Option<i64>,
    /// The pts of the last packet seen.
    last: Option<i64>,
    /// The current run of rising timestamps: start, end, the length of the runs before it.
    pub(crate) run: Option<(i64, i64, i64)>,
    /// Where the last packet ends, when its duration is known.
    last_end: Option<i64>,
    /// Runs begun after the first.
    runs: usize,
    /// Where the packets do not follow on (see [`Step`]).
    pub(crate) steps: Vec<Step>,
}

/// A place where a track's packets do not follow on from the ones before by more than the
/// audio timeline's tolerance: an overlap, a gap, or a new run (a jump back of a second or
/// more). The audio step repairs each one (audio/timeline.rs); the probe names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    /// The run the packet is in (0: the first).
    pub(crate) run: usize,
    /// The packet's pts.
    pub(crate) at: i64,
    /// Where the packets before it end (of the run before, for the first packet of a run).
    pub(crate) prev_end: i64,
    /// Whether the packet begins a new run.
    pub(crate) starts_run: bool,
}

/// Reads every packet of `ictx` once: indexes the video stream `video` (refusing more than
/// `max_frames` packets), gives subtitle packets to `subtitles`, and marks the `audio` tracks
/// trimmed or discontinuous as their packets say.
pub(crate) fn scan_packets(
    ictx: &mut ff::format::context::Input,
    path: &Path,
    video: &VideoInfo,
    audio: &mut [AudioInfo],
    subtitles: &mut Collector,
    max_frames: usize,
) -> Result<(VideoScan, Vec<AudioSpan>), MediaError> {
    let video_index = video.index;
    let nal = NalCodec::from_name(&video.codec).map(|codec| {
        let extradata = ictx
            .stream(video_index)
            .map(|s| ffi::stream_extradata(&s))
            .unwrap_or_default();
        (codec, Framing::from_extradata(codec, &extradata))
    });
    let mut scan = VideoScan {
        packets: Vec::new(),
        references: Vec::new(),
        pts_missing: false,
        pts_differ: false,
        untimed: 0,
        filled: Vec::new(),
    };
    let mut spans = vec![AudioSpan::default(); audio.len()];
    while let Some(packet) = read_packet(ictx, path)? {
        let idx = packet.stream();
        let discard = ffi::packet_is_discard(&packet);
        if idx == video_index {
            scan.take(&packet, discard, nal, max_frames, path)?;
        } else if subtitles.holds(idx) {
            subtitles.take(&packet);
        } else if let Some(pos) = audio.iter().position(|a| a.index == idx) {
            spans[pos].take(&mut audio[pos], &packet, discard);
        }
    }
    if scan.filled.len() == scan.packets.len() {
        // Not one timestamp: a raw elementary stream, which the probe refuses by name.
        scan.untimed = scan.packets.len() as u64;
        scan.packets.clear();
        scan.references.clear();
        scan.filled.clear();
    }
    fill_untimed(&mut scan.packets, &scan.filled);
    Ok((scan, spans))
}

/// Gives each packet at `untimed` (ascending indices, not all of them) times from its timed
/// neighbours: decode times evenly spaced between the timed packets around a run of untimed
/// ones (after the last timed packet on at the step before it, before the first one back at
/// the step after it), and a pts equal to the dts,
/// which the probe then places by the decoder's display order where the codec reorders
/// pictures (`reorder::place_untimed`).
fn fill_untimed(packets: &mut [PacketEntry], untimed: &[usize]) {
    let mut k = 0;
    while k < untimed.len() {
        // A run of consecutive untimed packets: untimed[k..end].
        let mut end = k + 1;
        while end < untimed.len() && untimed[end] == untimed[end - 1] + 1 {
            end += 1;
        }
        let (first, last) = (untimed[k], untimed[end - 1]);
        let Some(before) = first.checked_sub(1).map(|i| packets[i].dts) else {
            // A leading run: back from the first timed packet at its step.
            let (Some(a), b) = (packets.get(last + 1), packets.get(last + 2)) else {
                k = end;
                continue;
            };
            let step = b.map_or(1, |b| (b.dts - a.dts).max(1));
            let first_timed = a.dts;
            for (back, p) in packets[first..=last].iter_mut().rev().enumerate() {
                let dts = first_timed - step * (back as i64 + 1);
                p.dts = dts;
                p.pts = dts;
            }
            k = end;
            continue;
        };
        let gap = (last - first + 2) as i64;
        let step = match packets.get(last + 1) {
            Some(after) => ((after.dts - before) / gap).max(1),
            None => first
                .checked_sub(2)
                .map_or(1, |i| (before - packets[i].dts).max(1)),
        };
        for (n, i) in (first..=last).enumerate() {
            let dts = before + step * (n as i64 + 1);
            packets[i].dts = dts;
            packets[i].pts = dts;
        }
        k = end;
    }
}

impl VideoScan {
    /// Indexes one video packet (a packet with no timestamp is only counted).
    fn take(
        &mut self,
        packet: &ff::Packet,
        discard: bool,
        nal: Option<(NalCodec, Framing)>,
        max_frames: usize,
        path: &Path,
    ) -> Result<(), MediaError> {
        // Untimed: filled in from its neighbours once the scan is done.
        let (pts, dts) = packet_times(packet).unwrap_or_else(|| {
            self.filled.push(self.packets.len());
            (0, 0)
        });
        // A dts without a pts (AVI); an untimed packet has neither and is placed apart.
        self.pts_missing |= packet.pts().is_none() && packet.dts().is_some();
        self.pts_differ |= packet.pts() != packet.dts();
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
            self.references
                .push(bitstream::is_reference(codec, framing, data));
        }
        if self.packets.len() >= max_frames {
            return Err(MediaError::Unsupported {
                path: path.display().to_string(),
                reason: format!("more than {max_frames} video frames, over the limit"),
            });
        }
        self.packets.push(PacketEntry {
            pts,
            dts,
            key,
            discard,
            recovery,
        });
        Ok(())
    }
}

impl AudioSpan {
    /// Follows one packet of the track `info` describes.
    fn take(&mut self, info: &mut AudioInfo, packet: &ff::Packet, discard: bool) {
        let Some(pts) = packet.pts().or(packet.dts()) else {
            return;
        };
        // Samples the decoder drops from here on (priming, edit-list trim): the first
        // sound heard is that much later. The count may span several packets.
        let skip = skip_samples(packet);
        if skip > 0 {
            let tb = info.time_base;
            let rate = i64::from(info.sample_rate.max(1));
            let until = pts + skip * i64::from(tb.den) / (rate * i64::from(tb.num.max(1)));
            self.skip_until = self.skip_until.max(Some(until));
        }
        if discard {
            info.trimmed = true;
            return;
        }
        let end = pts + packet.duration().max(0);
        // A packet that starts before the previous one: recordings joined, timestamps
        // that overlap or start over. A stream copy would write them backwards.
        if self.last.is_some_and(|last| pts < last) {
            info.discontinuous = true;
        }
        self.last = Some(pts);
        let span = self.span.get_or_insert((pts, end));
        // A jump back of a second or more starts a run of its own: the runs play one
        // after the other (see `rejoin_runs`), so their lengths add up.
        let jump = info.time_base.ticks(JUMP_SECONDS);
        let tolerance = info.time_base.ticks(TOLERANCE_SECONDS).max(1);
        let run = self.run.get_or_insert((pts, end, 0));
        if pts < run.1 - jump {
            self.runs += 1;
            self.steps.push(Step {
                run: self.runs,
                at: pts,
                prev_end: run.1,
                starts_run: true,
            });
            *run = (pts, end, run.2 + run.1 - run.0);
        } else if let Some(prev_end) = self.last_end.filter(|e| (pts - e).abs() > tolerance) {
            // An overlap or a gap: the audio step lays the packet at its own time, so a
            // stream copy (which would not) is off.
            info.discontinuous = true;
            self.steps.push(Step {
                run: self.runs,
                at: pts,
                prev_end,
                starts_run: false,
            });
        }
        self.last_end = (packet.duration() > 0).then_some(end);
        run.1 = run.1.max(end);
        if run.2 == 0 {
            span.0 = span.0.min(pts);
        }
        span.1 = span.1.max(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(dts: i64) -> PacketEntry {
        PacketEntry {
            pts: dts,
            dts,
            key: false,
            discard: false,
            recovery: None,
        }
    }

    #[test]
    fn untimed_packets_get_evenly_spaced_times_from_their_neighbours() {
        // 3600-tick steps (25 fps at 90 kHz); packets 2 and 5-6 came without times.
        let mut p: Vec<PacketEntry> = [0, 3600, 0, 10800, 14400, 0, 0, 25200]
            .into_iter()
            .map(packet)
            .collect();
        fill_untimed(&mut p, &[2, 5, 6]);
        let dts: Vec<i64> = p.iter().map(|e| e.dts).collect();
        assert_eq!(dts, [0, 3600, 7200, 10800, 14400, 18000, 21600, 25200]);
        assert!(p.iter().all(|e| e.pts == e.dts));
        // Untimed at the end: on at the step before; at the start: back at the step after.
        let mut tail: Vec<PacketEntry> = [0, 3600, 0].into_iter().map(packet).collect();
        fill_untimed(&mut tail, &[2]);
        assert_eq!(tail[2].dts, 7200);
        let mut head: Vec<PacketEntry> = [0, 0, 7200, 10800].into_iter().map(packet).collect();
        fill_untimed(&mut head, &[0, 1]);
        assert_eq!([head[0].dts, head[1].dts], [0, 3600]);
    }
}
