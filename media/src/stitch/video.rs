//! The stitch's video: the output's video stream from the first segment's parameters, and the
//! segments' packets joined into it with one rule for their decode times.
//!
//! Why one rule: each segment was encoded on its own, with its own reorder depth; dts derived
//! per segment would not rise across the joins. The deepest reorder and the smallest frame
//! step over all segments give dts that do.

use std::path::{Path, PathBuf};

use ffmpeg_next as ff;

use super::audio::AudioFeed;
use crate::demux::{open_input, open_own_file, read_packet};
use crate::{ffi, MediaError};
use tessera_model::stitch::StitchRequest;
use tessera_model::stitch::StitchResult;
use tessera_model::timestamps::{decode_timestamps_with, DtsRule};

/// Adds the output's video stream (stream 0) to `octx`, written to `tmp`, from the first
/// segment's parameters in time base `vtb`; gives the segments' own time base.
pub(crate) fn add_video_stream(
    octx: &mut ff::format::context::Output,
    req: &StitchRequest,
    vtb: ff::Rational,
    tmp: &Path,
) -> Result<ff::Rational, MediaError> {
    // Video stream from the first segment's parameters; every segment must agree on them.
    let first = open_input(&req.segments[0])?;
    let s = first
        .stream(0)
        .ok_or_else(|| MediaError::invalid(&req.segments[0], "no stream"))?;
    let known = ffi::muxer_has_tag(octx, s.parameters().id());
    let mut ost = octx
        .add_stream(ff::encoder::find(ff::codec::Id::None))
        .map_err(|e| MediaError::write(tmp, e))?;
    ost.set_parameters(s.parameters());
    ost.set_time_base(vtb);
    if req.frame_rate.num > 0 {
        ost.set_avg_frame_rate(ff::Rational::new(req.frame_rate.num, req.frame_rate.den));
    }
    ffi::adapt_codec_tag(&mut ost, known);
    if let Some(m) = &req.display_matrix {
        ffi::add_display_matrix(&mut ost, m);
    }
    Ok(s.time_base())
}

/// The segments joined one after the other into the output's video stream.
pub(crate) struct VideoJoin<'r> {
    req: &'r StitchRequest,
    /// The segments' time base, and the output's video time base.
    seg_tb: ff::Rational,
    vtb: ff::Rational,
    /// The output's zero in the video time base.
    start_v: i64,
    /// The dts rule every segment's packets get.
    joint: DtsRule,
    last_dts: Option<i64>,
    /// The first segment's extradata, which every segment must repeat.
    extradata: Option<Vec<u8>>,
}

impl<'r> VideoJoin<'r> {
    /// Reads every segment's timestamps for the joint dts rule.
    pub(crate) fn new(
        req: &'r StitchRequest,
        seg_tb: ff::Rational,
        vtb: ff::Rational,
    ) -> Result<Self, MediaError> {
        let start_v = req.video_time_base.ticks(req.start_seconds);
        let mut joint = joint_reorder(&req.segments, seg_tb, vtb)?;
        if joint.step == i64::MAX {
            // One frame in every segment: a frame lasts one frame period.
            let fps = req.frame_rate;
            joint.step = if fps.num > 0 && fps.den > 0 {
                req.video_time_base
                    .ticks(f64::from(fps.den) / f64::from(fps.num))
                    .max(1)
            } else {
                1
            };
        }
        Ok(VideoJoin {
            req,
            seg_tb,
            vtb,
            start_v,
            joint,
            last_dts: None,
            extradata: None,
        })
    }

    /// Writes the packets of the segment at `seg_path` with their new timestamps, each after
    /// the audio that comes before it; counts frames, audio packets and adjusted timestamps
    /// in `result`.
    pub(crate) fn write_segment(
        &mut self,
        octx: &mut ff::format::context::Output,
        seg_path: &Path,
        audio: &mut AudioFeed,
        (out_tbs, tmp): (&[ff::Rational], &Path),
        result: &mut StitchResult,
    ) -> Result<(), MediaError> {
        let req = self.req;
        let packets = self.read_segment(seg_path)?;
        let pts_list: Vec<Option<i64>> = packets.iter().map(|p| p.pts()).collect();
        let dts_list = decode_timestamps_with(&pts_list, self.joint.depth, self.joint.step);
        for (mut packet, seg_dts) in packets.into_iter().zip(dts_list) {
            let pts = packet.pts().map(|p| p - req.video_bias - self.start_v);
            let mut dts = seg_dts.map(|d| d - req.video_bias - self.start_v);
            if let (Some(d), Some(prev)) = (dts, self.last_dts) {
                if d <= prev {
                    dts = Some(prev + 1);
                    result.adjusted_timestamps += 1;
                }
            }
            self.last_dts = dts.or(self.last_dts);
            packet.set_pts(pts);
            packet.set_dts(dts);
            packet.set_stream(0);
            packet.set_position(-1);
            // A frame lasts until the next (one step for the encoder's frames); without it
            // an MP4 edit list ends at the last pts and cuts the last shown frame.
            if packet.duration() <= 0 {
                packet.set_duration(self.joint.step);
            }
            let v_seconds = dts.map(|d| req.video_time_base.seconds(d)).unwrap_or(0.0);
            // Interleave: write the audio that comes before this video packet.
            result.audio_packets += audio.write_until(octx, v_seconds, out_tbs, tmp)?;
            packet.rescale_ts(self.vtb, out_tbs[0]);
            packet
                .write_interleaved(octx)
                .map_err(|e| MediaError::write(tmp, format!("video packet: {e}")))?;
            result.frames += 1;
        }
        Ok(())
    }

    /// The packets of one segment in the video time base, after checking that its header
    /// agrees with the first segment's (read the same way: header only).
    fn read_segment(&mut self, seg_path: &Path) -> Result<Vec<ff::Packet>, MediaError> {
        let mut seg = open_own_file(seg_path)?;
        {
            let s = seg
                .stream(0)
                .ok_or_else(|| MediaError::invalid(seg_path, "no stream"))?;
            let this = ffi::stream_extradata(&s);
            if *self.extradata.get_or_insert_with(|| this.clone()) != this
                || s.time_base() != self.seg_tb
            {
                return Err(MediaError::InvalidRequest(format!(
                    "{}: encoded with different settings than the first segment",
                    seg_path.display()
                )));
            }
        }
        let mut packets = Vec::new();
        while let Some(mut packet) = read_packet(&mut seg, seg_path)? {
            packet.rescale_ts(self.seg_tb, self.vtb);
            packets.push(packet);
        }
        Ok(packets)
    }
}

/// The deepest reorder and the smallest frame step over all segments (in the video time
/// base): every segment's dts are derived with them, so they rise across the joins (see
/// [`decode_timestamps_with`]). Reads only the segments' timestamps.
fn joint_reorder(
    segments: &[PathBuf],
    seg_tb: ff::Rational,
    vtb: ff::Rational,
) -> Result<DtsRule, MediaError> {
    let mut joint = DtsRule {
        depth: 0,
        step: i64::MAX,
        first_pts: 0,
    };
    for path in segments {
        let mut seg = open_own_file(path)?;
        let mut pts = Vec::new();
        while let Some(packet) = read_packet(&mut seg, path)? {
            if let Some(p) = packet.pts() {
                pts.push(ff::Rescale::rescale(&p, seg_tb, vtb));
            }
        }
        let rule = DtsRule::of(&pts);
        joint.depth = joint.depth.max(rule.depth);
        if pts.len() > 1 {
            joint.step = joint.step.min(rule.step);
        }
    }
    Ok(joint)
}
