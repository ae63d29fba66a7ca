//! The VMAF of a segment's encodes against the segment's own source frames: the chunk decoded
//! once, the same frames the encode kept (the range gate), each encode's file decoded beside
//! it and scored frame by frame (verify/vmaf.rs, as the reports score whole outputs).
//!
//! Why one decode of the source for all: a round of the search scores every rendition still
//! searching, and the source decode is a large share of a probe's cost.

use std::path::{Path, PathBuf};

use ffmpeg_next as ff;

use crate::demux::{open_input, open_video_decoder};
use crate::encode::range::{chunk_stream, decode_all, RangeGate};
use crate::verify::frames::FrameReader;
use crate::verify::vmaf::VmafRun;
use crate::MediaError;
use tessera_model::encode::EncodeRequest;

/// A probe is scored on every 3rd frame (libvmaf's own subsampling: its motion feature still
/// sees every frame). Why: the VMAF features are a third of a probe's cost at a medium
/// preset, and a segment's mean moves little (the report's `target_vmaf_error` keeps the
/// gap from the stitched output's every-frame score).
const SUBSAMPLE: u32 = 3;

/// The mean VMAF of each of `encodes` (files of this segment) against the segment's source
/// frames, in order.
pub(super) fn score_encodes(
    req: &EncodeRequest,
    encodes: &[PathBuf],
) -> Result<Vec<f64>, MediaError> {
    let chunk = req.chunk.as_path();
    let mut ictx = open_input(chunk)?;
    let stream = chunk_stream(&ictx, chunk)?;
    let chunk_tb = stream.time_base();
    let mut decoder = open_video_decoder(&stream, chunk, req.threads)?;
    let (sw, sh) = (req.source.source_size).unwrap_or((decoder.width(), decoder.height()));
    let mut runs = Vec::with_capacity(encodes.len());
    for path in encodes {
        let reader = FrameReader::open(path, 1)?;
        let run = VmafRun::new(sw, sh, (req.threads as u32, SUBSAMPLE), path)?;
        runs.push((reader, run));
    }
    let mut gate = RangeGate::new(req, chunk_tb);
    let lead_in = gate.lead_in();
    let mut on_frame = |frame: &mut ff::frame::Video| -> Result<(), MediaError> {
        if gate.admit_frame(frame).is_none() {
            return Ok(());
        }
        for (reader, run) in runs.iter_mut() {
            let Some(encoded) = reader.next()? else {
                return Err(short(reader.path(), gate.in_range));
            };
            run.push((&encoded, reader.path()), (frame, chunk))?;
        }
        Ok(())
    };
    decode_all(
        &mut ictx,
        &mut decoder,
        chunk,
        &mut on_frame,
        None,
        Some(lead_in),
    )?;
    let frames = gate.in_range;
    let mut means = Vec::with_capacity(runs.len());
    for (mut reader, run) in runs {
        if reader.next()?.is_some() {
            return Err(MediaError::decode(
                reader.path(),
                format!("the encode has more frames than the segment's {frames}"),
            ));
        }
        let path = reader.path().to_path_buf();
        means.push(run.finish(&[], &path)?.pooled.mean);
    }
    Ok(means)
}

fn short(path: &Path, at: u64) -> MediaError {
    MediaError::decode(
        path,
        format!("the encode ends before the segment's frame {at}"),
    )
}
