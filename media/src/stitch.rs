//! Stitch: concatenate encoded segments by stream copy, add the audio, write the final file.
//!
//! Why stream copy: every segment already holds its frames with their source timestamps, so
//! the stitch only removes the bias, moves the start to zero and interleaves with the audio;
//! it costs one read and one write. The output is written under a temporary name and renamed,
//! so a failure never leaves a partial file at the destination.
//!
//! Beside it: the text subtitle tracks it writes (subtitles.rs), and the cutting of a stitched
//! rendition into a streaming package's media segments (segmenter.rs).

pub(crate) mod segmenter;
mod subtitles;

use std::path::{Path, PathBuf};

use ffmpeg_next as ff;

use crate::demux::{open_input, open_own_file, read_packet};
use crate::verify::verify_output;
use crate::{ffi, nut, MediaError};
use subtitles::Writer;
use tessera_model::encode::Container;
use tessera_model::stitch::StitchRequest;
use tessera_model::stitch::StitchResult;
use tessera_model::timestamps::{decode_timestamps_with, DtsRule};

/// The temporary name an output is written under before the rename.
pub fn temp_path(output: &Path) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    output.with_file_name(format!(".{name}.tessera-partial"))
}

/// Writes the final file. On error nothing is left at `req.output` (nor its temporary name).
pub fn stitch(req: &StitchRequest) -> Result<StitchResult, MediaError> {
    crate::init();
    if req.segments.is_empty() {
        return Err(MediaError::InvalidRequest("no segments to stitch".into()));
    }
    let tmp = temp_path(&req.output);
    let result = write_output(req, &tmp).and_then(|r| match &req.expect {
        Some(expect) => {
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            let check = verify_output(&tmp, expect, threads)?;
            Ok(StitchResult {
                check: Some(check),
                ..r
            })
        }
        None => Ok(r),
    });
    match result {
        Ok(r) => {
            std::fs::rename(&tmp, &req.output).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                MediaError::write(&req.output, e)
            })?;
            Ok(StitchResult {
                bytes: nut::file_size(&req.output),
                ..r
            })
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            // Name the output the user asked for, never the temporary file in staging.
            Err(match &req.expect {
                Some(expect) => e.for_input(Path::new(&expect.label), "stitch"),
                None => e,
            })
        }
    }
}

struct Source {
    ictx: ff::format::context::Input,
    path: PathBuf,
}

fn write_output(req: &StitchRequest, tmp: &Path) -> Result<StitchResult, MediaError> {
    let format = match req.container {
        Container::Mp4 => "mp4",
        Container::Mkv => "matroska",
    };
    let mut octx = ff::format::output_as(tmp, format).map_err(|e| MediaError::write(tmp, e))?;
    let vtb = ff::Rational::new(req.video_time_base.num, req.video_time_base.den);

    // Video stream from the first segment's parameters; every segment must agree on them.
    let first = open_input(&req.segments[0])?;
    let seg_tb = {
        let s = first
            .stream(0)
            .ok_or_else(|| MediaError::invalid(&req.segments[0], "no stream"))?;
        let known = ffi::muxer_has_tag(&octx, s.parameters().id());
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
        s.time_base()
    };
    drop(first);

    let mut audio_src = match &req.audio {
        Some(path) if !req.audio_tracks.is_empty() => Some(Source {
            ictx: open_input(path)?,
            path: path.clone(),
        }),
        _ => None,
    };
    let mut audio_in_tbs = Vec::new();
    if let Some(src) = &audio_src {
        for (i, track) in req.audio_tracks.iter().enumerate() {
            let s = src
                .ictx
                .stream(i)
                .ok_or_else(|| MediaError::invalid(&src.path, format!("no audio stream {i}")))?;
            let known = ffi::muxer_has_tag(&octx, s.parameters().id());
            let mut ost = octx
                .add_stream(ff::encoder::find(ff::codec::Id::None))
                .map_err(|e| MediaError::write(tmp, e))?;
            ost.set_parameters(s.parameters());
            ost.set_time_base(s.time_base());
            ffi::adapt_codec_tag(&mut ost, known);
            ffi::set_initial_padding(&mut ost, track.initial_padding);
            if let Some(lang) = &track.language {
                let mut md = ff::Dictionary::new();
                md.set("language", lang);
                ost.set_metadata(md);
            }
            audio_in_tbs.push(s.time_base());
        }
    }

    add_chapters_and_title(&mut octx, req, tmp)?;
    let mut subtitle_writers = req
        .subtitles
        .iter()
        .map(|t| Writer::add(&mut octx, t, req.container, tmp))
        .collect::<Result<Vec<_>, _>>()?;
    let mut opts = ff::Dictionary::new();
    if req.container == Container::Mp4 {
        opts.set("movflags", "+faststart");
    }
    octx.write_header_with(opts)
        .map_err(|e| MediaError::write(tmp, format!("header: {e}")))?;
    let out_tbs: Vec<ff::Rational> = octx.streams().map(|s| s.time_base()).collect();
    // Subtitle packets go in first; the interleaver orders them with the rest.
    for (w, track) in subtitle_writers.iter_mut().zip(&req.subtitles) {
        w.write_all(&mut octx, track, req.start_seconds, tmp)?;
    }

    let start_v = req.video_time_base.ticks(req.start_seconds);
    let mut result = StitchResult {
        frames: 0,
        audio_packets: 0,
        bytes: 0,
        adjusted_timestamps: 0,
        check: None,
    };
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
    let mut last_dts: Option<i64> = None;
    let mut pending_audio: Option<ff::Packet> = None;
    let mut audio_done = audio_src.is_none();

    // Every segment's header must agree with the first's (read the same way: header only).
    let mut extradata = None;
    for seg_path in &req.segments {
        let mut seg = open_own_file(seg_path)?;
        {
            let s = seg
                .stream(0)
                .ok_or_else(|| MediaError::invalid(seg_path, "no stream"))?;
            let this = ffi::stream_extradata(&s);
            if *extradata.get_or_insert_with(|| this.clone()) != this || s.time_base() != seg_tb {
                return Err(MediaError::InvalidRequest(format!(
                    "{}: encoded with different settings than the first segment",
                    seg_path.display()
                )));
            }
        }
        let mut packets = Vec::new();
        while let Some(mut packet) = read_packet(&mut seg, seg_path)? {
            packet.rescale_ts(seg_tb, vtb);
            packets.push(packet);
        }
        let pts_list: Vec<Option<i64>> = packets.iter().map(|p| p.pts()).collect();
        let dts_list = decode_timestamps_with(&pts_list, joint.depth, joint.step);
        for (mut packet, seg_dts) in packets.into_iter().zip(dts_list) {
            let pts = packet.pts().map(|p| p - req.video_bias - start_v);
            let mut dts = seg_dts.map(|d| d - req.video_bias - start_v);
            if let (Some(d), Some(prev)) = (dts, last_dts) {
                if d <= prev {
                    dts = Some(prev + 1);
                    result.adjusted_timestamps += 1;
                }
            }
            last_dts = dts.or(last_dts);
            packet.set_pts(pts);
            packet.set_dts(dts);
            packet.set_stream(0);
            packet.set_position(-1);
            // A frame lasts until the next (one step for the encoder's frames); without it
            // an MP4 edit list ends at the last pts and cuts the last shown frame.
            if packet.duration() <= 0 {
                packet.set_duration(joint.step);
            }
            let v_seconds = dts.map(|d| req.video_time_base.seconds(d)).unwrap_or(0.0);
            // Interleave: write the audio that comes before this video packet.
            while !audio_done {
                if pending_audio.is_none() {
                    pending_audio = next_audio(&mut audio_src, req, &audio_in_tbs)?;
                    if pending_audio.is_none() {
                        audio_done = true;
                        break;
                    }
                }
                let a = pending_audio
                    .as_ref()
                    .map(|p| audio_seconds(p, &audio_in_tbs));
                if a.is_some_and(|a| a <= v_seconds) {
                    if let Some(p) = pending_audio.take() {
                        write_audio(&mut octx, p, &audio_in_tbs, &out_tbs, tmp)?;
                        result.audio_packets += 1;
                    }
                } else {
                    break;
                }
            }
            packet.rescale_ts(vtb, out_tbs[0]);
            packet
                .write_interleaved(&mut octx)
                .map_err(|e| MediaError::write(tmp, format!("video packet: {e}")))?;
            result.frames += 1;
        }
    }
    if let Some(p) = pending_audio.take() {
        write_audio(&mut octx, p, &audio_in_tbs, &out_tbs, tmp)?;
        result.audio_packets += 1;
    }
    while let Some(p) = next_audio(&mut audio_src, req, &audio_in_tbs)? {
        write_audio(&mut octx, p, &audio_in_tbs, &out_tbs, tmp)?;
        result.audio_packets += 1;
    }
    octx.write_trailer()
        .map_err(|e| MediaError::write(tmp, format!("trailer: {e}")))?;
    Ok(result)
}

/// Writes the source's chapters (moved to the output's zero, in milliseconds; chapters that
/// end before zero are dropped, one that straddles it starts at zero) and its title.
fn add_chapters_and_title(
    octx: &mut ff::format::context::Output,
    req: &StitchRequest,
    tmp: &Path,
) -> Result<(), MediaError> {
    let ms = |s: f64| ((s - req.start_seconds) * 1000.0).round().max(0.0) as i64;
    let mut id = 0;
    for c in &req.chapters {
        let (start, end) = (ms(c.start_seconds), ms(c.end_seconds));
        if end <= start {
            continue;
        }
        id += 1;
        octx.add_chapter(
            id,
            ff::Rational::new(1, 1000),
            start,
            end,
            c.title.as_deref().unwrap_or(""),
        )
        .map_err(|e| MediaError::write(tmp, format!("chapter {id}: {e}")))?;
    }
    if let Some(title) = &req.title {
        let mut md = ff::Dictionary::new();
        md.set("title", title);
        octx.set_metadata(md);
    }
    Ok(())
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

/// Reads the next audio packet with bias and start removed (in its input time base), tagged
/// with its output stream index (audio track i is output stream i + 1).
fn next_audio(
    src: &mut Option<Source>,
    req: &StitchRequest,
    tbs: &[ff::Rational],
) -> Result<Option<ff::Packet>, MediaError> {
    let Some(src) = src.as_mut() else {
        return Ok(None);
    };
    while let Some(mut p) = read_packet(&mut src.ictx, &src.path)? {
        let i = p.stream();
        let Some(track) = req.audio_tracks.get(i) else {
            continue;
        };
        let tb = tbs[i];
        let start = (req.start_seconds * f64::from(tb.denominator()) / f64::from(tb.numerator()))
            .round() as i64;
        let shift = |v: Option<i64>| v.map(|x| x - track.bias - start);
        p.set_pts(shift(p.pts()));
        p.set_dts(shift(p.dts()));
        p.set_stream(i + 1);
        p.set_position(-1);
        return Ok(Some(p));
    }
    Ok(None)
}

fn audio_seconds(p: &ff::Packet, tbs: &[ff::Rational]) -> f64 {
    let tb = tbs[p.stream() - 1];
    p.dts().or(p.pts()).unwrap_or(0) as f64 * f64::from(tb.numerator())
        / f64::from(tb.denominator())
}

fn write_audio(
    octx: &mut ff::format::context::Output,
    mut p: ff::Packet,
    in_tbs: &[ff::Rational],
    out_tbs: &[ff::Rational],
    tmp: &Path,
) -> Result<(), MediaError> {
    let i = p.stream();
    p.rescale_ts(in_tbs[i - 1], out_tbs[i]);
    p.write_interleaved(octx)
        .map_err(|e| MediaError::write(tmp, format!("audio packet: {e}")))
}
