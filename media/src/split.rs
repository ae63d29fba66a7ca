//! Split: stream-copy each segment's packets (with their decode pre-roll) into a chunk file.
//!
//! Why: workers then fetch only the bytes of their segment, and no re-encode happens before
//! the real encode, so splitting costs one read of the input.

use std::path::Path;

use ff::media::Type;
use ffmpeg_next as ff;

use crate::demux::{open_input, packet_times, read_packet};
use crate::{ffi, nut, MediaError};
use tessera_model::probe::SegmentPlan;
use tessera_model::probe::{chunk_file_name, ChunkInfo};
use tessera_model::timestamps::DerivedPts;
use tessera_model::timestamps::DtsRule;

/// Writes one NUT chunk per segment into `dir` (see [`tessera_model::probe::chunk_file_name`]), timestamps + `bias`,
/// with dts derived from the pts by the probe's `dts_rule` (never the demuxer's). `on_chunk`
/// is told each segment index as soon as its chunk is complete, so encoding can start while
/// the rest of the input is still being split. Errors name `input` and the stage, not a chunk.
pub fn split(
    input: &Path,
    segments: &[SegmentPlan],
    bias: i64,
    dts_rule: DtsRule,
    derived_pts: Option<&DerivedPts>,
    dir: &Path,
    on_chunk: &mut dyn FnMut(u32),
) -> Result<Vec<ChunkInfo>, MediaError> {
    split_chunks(input, segments, bias, dts_rule, derived_pts, dir, on_chunk)
        .map_err(|e| e.for_input(input, "split"))
}

fn split_chunks(
    input: &Path,
    segments: &[SegmentPlan],
    bias: i64,
    dts_rule: DtsRule,
    derived_pts: Option<&DerivedPts>,
    dir: &Path,
    on_chunk: &mut dyn FnMut(u32),
) -> Result<Vec<ChunkInfo>, MediaError> {
    crate::init();
    let mut ictx = open_input(input)?;
    let stream = ictx
        .streams()
        .best(Type::Video)
        .ok_or_else(|| MediaError::NoVideo {
            path: input.display().to_string(),
            found: "no video stream at split time".into(),
        })?;
    let vindex = stream.index();
    let in_tb = stream.time_base();
    let params = stream.parameters();

    let mut chunks: Vec<ChunkInfo> = segments
        .iter()
        .map(|s| ChunkInfo {
            index: s.index,
            path: dir.join(chunk_file_name(s.index)),
            packets: 0,
            bytes: 0,
        })
        .collect();
    // Open writers for segments whose packet range covers the current packet.
    let mut open: Vec<(usize, ff::format::context::Output, ff::Rational)> = Vec::new();
    let mut next_segment = 0usize;
    let mut packet_index = 0usize;
    let mut deriver = dts_rule.deriver();

    while let Some(mut packet) = read_packet(&mut ictx, input)? {
        if packet.stream() != vindex {
            continue;
        }
        let i = packet_index;
        packet_index += 1;
        while next_segment < segments.len() && segments[next_segment].first_packet == i {
            let (octx, out_tb) = create_chunk(&chunks[next_segment].path, &params, in_tb)?;
            open.push((next_segment, octx, out_tb));
            next_segment += 1;
        }
        // An untimed packet has a derived pts (the probe fills its times, scan.rs).
        let (stored, _) = packet_times(&packet).unwrap_or_default();
        // The probe's derived pts where the container stores none (see `reorder`).
        let pts = derived_pts
            .and_then(|d| d.pts.get(i).copied())
            .unwrap_or(stored);
        let dts = deriver.next(pts);
        packet.set_pts(Some(pts + bias));
        packet.set_dts(Some(dts + bias));
        packet.set_stream(0);
        packet.set_position(-1);
        for (seg, octx, out_tb) in open.iter_mut() {
            let mut p = packet.clone();
            p.rescale_ts(in_tb, *out_tb);
            nut::write(octx, &p, &chunks[*seg].path)?;
            chunks[*seg].packets += 1;
        }
        // Close writers whose last packet this was.
        let mut k = 0;
        while k < open.len() {
            let seg = open[k].0;
            if segments[seg].last_packet <= i {
                let (_, octx, _) = open.remove(k);
                finish_chunk(octx, &mut chunks[seg], on_chunk)?;
            } else {
                k += 1;
            }
        }
        // Every chunk asked for is written: the rest of the input is not read (a worker
        // cutting one early segment stops there; the bytes written are the same).
        if next_segment == segments.len() && open.is_empty() {
            break;
        }
    }
    for (seg, octx, _) in open.drain(..) {
        finish_chunk(octx, &mut chunks[seg], on_chunk)?;
    }
    if next_segment < segments.len() {
        return Err(MediaError::decode(
            input,
            format!(
                "input changed or ended early: {} of {} segments could be cut",
                next_segment,
                segments.len()
            ),
        ));
    }
    Ok(chunks)
}

/// Creates the chunk at `path` with one stream of the input's video `params` in `in_tb`,
/// header written; gives it with the time base NUT chose.
fn create_chunk(
    path: &Path,
    params: &ff::codec::Parameters,
    in_tb: ff::Rational,
) -> Result<(ff::format::context::Output, ff::Rational), MediaError> {
    let mut octx = nut::create(path)?;
    {
        let mut ost = octx
            .add_stream(ff::encoder::find(ff::codec::Id::None))
            .map_err(|e| MediaError::write(path, e))?;
        ost.set_parameters(params.clone());
        ost.set_time_base(in_tb);
    }
    ffi::set_nut_codec_tag(&mut octx, 0, params.id());
    let tbs = nut::write_header(&mut octx, path)?;
    Ok((octx, tbs[0]))
}

/// Closes a complete chunk, notes its size and tells `on_chunk`.
fn finish_chunk(
    mut octx: ff::format::context::Output,
    chunk: &mut ChunkInfo,
    on_chunk: &mut dyn FnMut(u32),
) -> Result<(), MediaError> {
    nut::finish(&mut octx, &chunk.path)?;
    chunk.bytes = nut::file_size(&chunk.path);
    on_chunk(chunk.index);
    Ok(())
}
