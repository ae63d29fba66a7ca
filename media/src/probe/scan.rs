//! The probe's packet scan: one read of every packet, without decoding, that indexes the video
//! packets, collects the subtitle cues and follows each audio track's timestamps.
//!
//! Why apart from the probe: the scan is the one loop over the whole file; what the probe then
//! makes of its findings (timestamp repair, durations, limits) are steps of their own.

use std::path::Path;

use ffmpeg_next as ff;

use super::bitstream::{self, Access, Framing, NalCodec};
use super::subtitles::Collector;
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
    /// Video packets with neither pts nor dts (a raw elementary stream has no timing at all).
    pub(crate) untimed: u64,
}

/// What the scan found of one audio track's timestamps, in the track's time base.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AudioSpan {
    /// First shown pts and the end of the last shown packet.
    pub(crate) span: Option<(i64, i64)>,
    /// Where the samples the decoder skips (priming, edit-list trim) end.
    pub(crate) skip_until: Option<i64>,
    /// The pts of the last packet seen.
    last: Option<i64>,
    /// The current run of rising timestamps: start, end, the length of the runs before it.
    pub(crate) run: Option<(i64, i64, i64)>,
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
    Ok((scan, spans))
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
        let Some((pts, dts)) = packet_times(packet) else {
            self.untimed += 1;
            return Ok(());
        };
        self.pts_missing |= packet.pts().is_none();
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
        let jump = info.time_base.ticks(1.0);
        let run = self.run.get_or_insert((pts, end, 0));
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
