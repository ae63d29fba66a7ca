//! Stitch: concatenate encoded segments by stream copy, add the audio, write the final file.
//!
//! Why stream copy: every segment already holds its frames with their source timestamps, so
//! the stitch only removes the bias, moves the start to zero and interleaves with the audio;
//! it costs one read and one write. The output is written under a temporary name and renamed,
//! so a failure never leaves a partial file at the destination.
//!
//! The steps: the segments' video joined with one dts rule (video.rs), the audio intermediate
//! interleaved with it (audio.rs), the text subtitle tracks (subtitles.rs). Beside it: the
//! cutting of a stitched rendition into a streaming package's media segments (segmenter.rs).

mod audio;
pub(crate) mod segmenter;
mod subtitles;
mod video;

use std::path::Path;

use ffmpeg_next as ff;

use crate::verify::verify_output;
use crate::{nut, MediaError};
use audio::AudioFeed;
use subtitles::Writer;
use tessera_model::encode::Container;
use tessera_model::stitch::StitchRequest;
use tessera_model::stitch::{temp_path, StitchResult};
use video::{add_video_stream, VideoJoin};

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

/// Writes the output to `tmp`: the streams (video, audio, subtitles) with chapters and title,
/// the header, the subtitles, then the segments' video interleaved with the audio.
fn write_output(req: &StitchRequest, tmp: &Path) -> Result<StitchResult, MediaError> {
    let format = match req.container {
        Container::Mp4 => "mp4",
        Container::Mkv => "matroska",
    };
    let mut octx = ff::format::output_as(tmp, format).map_err(|e| MediaError::write(tmp, e))?;
    let vtb = ff::Rational::new(req.video_time_base.num, req.video_time_base.den);
    let seg_tb = add_video_stream(&mut octx, req, vtb, tmp)?;
    let mut audio = AudioFeed::open(req, &mut octx, tmp)?;
    add_chapters_and_title(&mut octx, req, tmp)?;
    let mut subtitle_writers = req
        .subtitles
        .iter()
        .map(|t| Writer::add(&mut octx, t, req.container, tmp))
        .collect::<Result<Vec<_>, _>>()?;
    let mut opts = ff::Dictionary::new();
    // The same segments give the same bytes: Matroska otherwise writes random segment and
    // track UIDs, so a stitch task delivered twice (at-least-once) stored an output with
    // another ETag over the one its QC gate had passed, and the pinned delivery refused it.
    opts.set("fflags", "+bitexact");
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

    let mut result = StitchResult {
        frames: 0,
        audio_packets: 0,
        bytes: 0,
        adjusted_timestamps: 0,
        check: None,
    };
    let mut video = VideoJoin::new(req, seg_tb, vtb)?;
    for seg_path in &req.segments {
        video.write_segment(
            &mut octx,
            seg_path,
            &mut audio,
            (&out_tbs, tmp),
            &mut result,
        )?;
    }
    result.audio_packets += audio.write_rest(&mut octx, &out_tbs, tmp)?;
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
