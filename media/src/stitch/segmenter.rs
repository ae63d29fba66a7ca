//! Cutting one stream of a stitched rendition into the media segments of a streaming package
//! (fMP4 with an init segment, or MPEG-TS), by stream copy.
//!
//! Why stream copy through FFmpeg's HLS muxer: the renditions are already encoded with an IDR
//! at every media segment start (the same frames in every rung), so packaging only rewraps
//! packets; the muxer cuts at the first keyframe at or after each multiple of the segment
//! length, which is exactly the forced IDR. The manifests are written elsewhere (the package
//! crate) from the files this writes, so every figure in them is measured, not assumed.

use std::path::Path;

use ffmpeg_next as ff;

use crate::demux::{open_input, read_packet};
use crate::{ffi, MediaError};
use tessera_model::segmented::SegmentRequest;
use tessera_model::segmented::SegmentedTrack;
use tessera_model::segmented::StreamPick;

/// Cuts the chosen stream of `req.input` into media segments under `req.root/req.dir`.
/// On error the track's folder is removed.
pub fn segment_track(req: &SegmentRequest) -> Result<SegmentedTrack, MediaError> {
    crate::init();
    let dir = req.root.join(&req.dir);
    std::fs::create_dir_all(&dir).map_err(|e| MediaError::write(&dir, e))?;
    let result = write(req, &dir);
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

/// Seconds to add to every timestamp of `input` so that its video's first decode time is not
/// negative (a stream with B-frames starts decoding before its first frame is shown).
///
/// Why: each track is cut by its own muxer, and a muxer shifts a negative start on its own
/// (`avoid_negative_ts`); the video alone would move and the package's audio would run early
/// by the reorder delay. One shift from the video, applied to every track, keeps them in sync.
fn leading_shift(input: &Path) -> Result<f64, MediaError> {
    let mut ictx = open_input(input)?;
    let Some((index, tb)) = ictx
        .streams()
        .best(ff::media::Type::Video)
        .map(|s| (s.index(), s.time_base()))
    else {
        return Ok(0.0);
    };
    while let Some(packet) = read_packet(&mut ictx, input)? {
        if packet.stream() != index {
            continue;
        }
        let Some(first) = packet.dts().or(packet.pts()) else {
            return Ok(0.0);
        };
        return Ok((-(first as f64) * f64::from(tb)).max(0.0));
    }
    Ok(0.0)
}

/// Cuts the chosen stream into `dir` through FFmpeg's HLS muxer and describes what it wrote.
fn write(req: &SegmentRequest, dir: &Path) -> Result<SegmentedTrack, MediaError> {
    let input = req.input.as_path();
    let mut ictx = open_input(input)?;
    let wanted = match req.stream {
        StreamPick::Video => ff::media::Type::Video,
        StreamPick::Audio(_) => ff::media::Type::Audio,
    };
    let nth = match req.stream {
        StreamPick::Audio(n) => n,
        StreamPick::Video => 0,
    };
    let stream = ictx
        .streams()
        .filter(|s| s.parameters().medium() == wanted)
        .nth(nth)
        .ok_or_else(|| {
            MediaError::invalid(input, format!("no {:?} stream to package", req.stream))
        })?;
    let index = stream.index();
    let in_tb = stream.time_base();
    let codec_id = stream.parameters().id();
    let config = ffi::stream_extradata(&stream);
    let language = stream
        .metadata()
        .get("language")
        .unwrap_or("und")
        .to_string();
    let (size, frame_rate, audio) = stream_facts(&stream, wanted, input)?;

    let playlist = dir.join("muxer.m3u8");
    let (mut octx, out_tb) = open_muxer(req, dir, &playlist, &stream, wanted)?;
    // Every track of the package moves by the same amount, so they stay in sync.
    let shift = {
        let seconds = leading_shift(input)?;
        (seconds * f64::from(in_tb.denominator()) / f64::from(in_tb.numerator().max(1))).round()
            as i64
    };
    let mut first_seconds: Option<f64> = None;
    while let Some(mut packet) = read_packet(&mut ictx, input)? {
        if packet.stream() != index {
            continue;
        }
        packet.set_pts(packet.pts().map(|p| p + shift));
        packet.set_dts(packet.dts().map(|d| d + shift));
        if first_seconds.is_none() {
            if let Some(p) = packet.pts() {
                first_seconds = Some(p as f64 * f64::from(in_tb));
            }
        }
        packet.rescale_ts(in_tb, out_tb);
        packet.set_stream(0);
        packet.set_position(-1);
        packet
            .write_interleaved(&mut octx)
            .map_err(|e| MediaError::write(dir, format!("packet: {e}")))?;
    }
    octx.write_trailer()
        .map_err(|e| MediaError::write(dir, format!("trailer: {e}")))?;
    drop(octx);

    let segments = written_segments(req, dir, &playlist)?;
    let init = (!req.ts).then(|| format!("{}/init.mp4", req.dir));
    Ok(SegmentedTrack {
        init,
        segments,
        codec: codec_id_name(codec_id),
        config,
        size,
        frame_rate,
        audio,
        language,
        first_seconds: first_seconds.unwrap_or(0.0),
    })
}

/// A stream's (width, height), (frame rate numerator, denominator), (channels, sample rate).
type StreamFacts = ((u32, u32), (u32, u32), (u32, u32));

/// What a manifest says of the stream: a video's size and frame rate, or an audio track's
/// channels and sample rate (the other pairs zero, and the frame rate 0/1).
fn stream_facts(
    stream: &ff::format::stream::Stream,
    wanted: ff::media::Type,
    input: &Path,
) -> Result<StreamFacts, MediaError> {
    // SAFETY-free reads through ffmpeg-next's decoder view of the parameters.
    let ctx = ff::codec::Context::from_parameters(stream.parameters())
        .map_err(|e| MediaError::invalid(input, e))?;
    Ok(match wanted {
        ff::media::Type::Video => {
            let v = ctx
                .decoder()
                .video()
                .map_err(|e| MediaError::invalid(input, e))?;
            let r = stream.avg_frame_rate();
            (
                (v.width(), v.height()),
                (r.numerator().max(0) as u32, r.denominator().max(1) as u32),
                (0, 0),
            )
        }
        _ => {
            let a = ctx
                .decoder()
                .audio()
                .map_err(|e| MediaError::invalid(input, e))?;
            ((0, 0), (0, 1), (u32::from(a.channels()), a.rate()))
        }
    })
}

/// FFmpeg's HLS muxer writing `playlist` and its segments into `dir`, with the one stream
/// copied from `stream`, header written; gives it with its stream's time base.
fn open_muxer(
    req: &SegmentRequest,
    dir: &Path,
    playlist: &Path,
    stream: &ff::format::stream::Stream,
    wanted: ff::media::Type,
) -> Result<(ff::format::context::Output, ff::Rational), MediaError> {
    let ext = if req.ts { "ts" } else { "m4s" };
    let mut opts = ff::Dictionary::new();
    opts.set("hls_time", &format!("{}", req.segment_seconds));
    opts.set("hls_playlist_type", "vod");
    opts.set("hls_list_size", "0");
    opts.set("start_number", "0");
    opts.set("hls_segment_type", if req.ts { "mpegts" } else { "fmp4" });
    opts.set(
        "hls_segment_filename",
        &dir.join(format!("seg-%05d.{ext}")).display().to_string(),
    );
    if !req.ts {
        opts.set("hls_fmp4_init_filename", "init.mp4");
    }
    let mut octx = ff::format::output_as(playlist, "hls").map_err(|e| MediaError::write(dir, e))?;
    {
        let mut ost = octx
            .add_stream(ff::encoder::find(ff::codec::Id::None))
            .map_err(|e| MediaError::write(dir, e))?;
        ost.set_parameters(stream.parameters());
        ost.set_time_base(stream.time_base());
        ffi::adapt_codec_tag(&mut ost, true);
        if stream.parameters().id() == ff::codec::Id::HEVC && !req.ts {
            ffi::set_codec_tag(&mut ost, *b"hvc1");
        }
        if wanted == ff::media::Type::Video {
            ost.set_avg_frame_rate(stream.avg_frame_rate());
        }
        ost.set_metadata(stream.metadata().to_owned());
    }
    octx.write_header_with(opts)
        .map_err(|e| MediaError::write(dir, format!("header: {e}")))?;
    let out_tb = octx
        .stream(0)
        .map(|s| s.time_base())
        .ok_or_else(|| MediaError::write(dir, "no output stream"))?;
    Ok((octx, out_tb))
}

/// The media segments the muxer listed in its own `playlist` (then removed), as (URI under
/// the package root, seconds); each must exist.
fn written_segments(
    req: &SegmentRequest,
    dir: &Path,
    playlist: &Path,
) -> Result<Vec<(String, f64)>, MediaError> {
    let text = std::fs::read_to_string(playlist).map_err(|e| MediaError::write(playlist, e))?;
    let _ = std::fs::remove_file(playlist);
    let segments = muxer_segments(&text)
        .into_iter()
        .map(|(name, secs)| (format!("{}/{name}", req.dir), secs))
        .collect::<Vec<_>>();
    if segments.is_empty() {
        return Err(MediaError::write(dir, "the muxer wrote no media segment"));
    }
    for (uri, _) in &segments {
        let path = req.root.join(uri);
        if !path.is_file() {
            return Err(MediaError::write(
                &path,
                "listed by the muxer but not written",
            ));
        }
    }
    Ok(segments)
}

fn codec_id_name(id: ff::codec::Id) -> String {
    match id {
        ff::codec::Id::H264 => "h264".into(),
        ff::codec::Id::HEVC => "hevc".into(),
        ff::codec::Id::AV1 => "av1".into(),
        ff::codec::Id::AAC => "aac".into(),
        other => format!("{other:?}").to_ascii_lowercase(),
    }
}

/// The (file name, EXTINF seconds) pairs of the muxer's own playlist.
fn muxer_segments(text: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let mut pending: Option<f64> = None;
    for line in text.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("#EXTINF:") {
            pending = v.split(',').next().and_then(|d| d.trim().parse().ok());
        } else if !line.is_empty() && !line.starts_with('#') {
            if let Some(d) = pending.take() {
                let name = line.rsplit('/').next().unwrap_or(line);
                out.push((name.to_string(), d));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_muxer_playlist_is_read_by_file_name() {
        let text = "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:6\n#EXT-X-MAP:URI=\"init.mp4\"\n\
                    #EXTINF:6.000000,\n/tmp/x/v0/seg-00000.m4s\n#EXTINF:2.480000,\nseg-00001.m4s\n#EXT-X-ENDLIST\n";
        assert_eq!(
            muxer_segments(text),
            [
                ("seg-00000.m4s".to_string(), 6.0),
                ("seg-00001.m4s".to_string(), 2.48)
            ]
        );
    }
}
