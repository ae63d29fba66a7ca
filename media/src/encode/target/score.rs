//! The VMAF of a segment's encodes against the segment's own source frames: the frames the
//! search kept (frames.rs), or the chunk decoded again through the same range gate; each
//! encode's file decoded beside them and scored frame by frame (verify/vmaf.rs, as the
//! reports score whole outputs).
//!
//! Why one decode of the source for all: a round of the search scores every rendition still
//! searching, and the source decode is a large share of a probe's cost.

use std::path::{Path, PathBuf};

use ffmpeg_next as ff;

use super::frames::{each_frame, SourceFrames};
use crate::verify::frames::FrameReader;
use crate::verify::vmaf::VmafRun;
use crate::MediaError;
use tessera_model::encode::EncodeRequest;

/// A probe is scored on every 3rd frame (libvmaf's own subsampling: its motion feature still
/// sees every frame). Why: the VMAF features cost about half a medium x264 encode at every
/// frame, and a segment's mean moves little (the report's `target_vmaf_error` keeps the gap
/// from the stitched output's every-frame score).
pub(super) const SUBSAMPLE: u32 = 3;

/// The mean VMAF of each of `encodes` (files of this segment) against the segment's source
/// frames, in order: the `kept` frames when there are, else the chunk decoded again. Scored
/// at the source's size, every `subsample`th frame.
pub(super) fn score_encodes(
    req: &EncodeRequest,
    encodes: &[PathBuf],
    kept: Option<&SourceFrames>,
    subsample: u32,
) -> Result<Vec<f64>, MediaError> {
    let mut runs: Option<Vec<(FrameReader, VmafRun)>> = None;
    let mut count = 0;
    each_frame(req, kept, &mut |frame| {
        let runs = match &mut runs {
            Some(runs) => runs,
            None => {
                let size = (req.source.source_size).unwrap_or((frame.width(), frame.height()));
                runs.insert(open_runs(req, encodes, size, subsample)?)
            }
        };
        push(runs, frame, &req.chunk, count)?;
        count += 1;
        Ok(())
    })?;
    match runs {
        Some(runs) => finish(runs, count),
        None if encodes.is_empty() => Ok(Vec::new()),
        None => Err(MediaError::decode(
            &req.chunk,
            "no frame of the segment's range to score the encodes against",
        )),
    }
}

fn open_runs(
    req: &EncodeRequest,
    encodes: &[PathBuf],
    (w, h): (u32, u32),
    subsample: u32,
) -> Result<Vec<(FrameReader, VmafRun)>, MediaError> {
    (encodes.iter())
        .map(|path| {
            let reader = FrameReader::open(path, 1)?;
            let run = VmafRun::new(w, h, (req.threads as u32, subsample), path)?;
            Ok((reader, run))
        })
        .collect()
}

/// Scores source frame `at` (`frame`, of `chunk`) against each encode's next frame.
fn push(
    runs: &mut [(FrameReader, VmafRun)],
    frame: &ff::frame::Video,
    chunk: &Path,
    at: u64,
) -> Result<(), MediaError> {
    for (reader, run) in runs.iter_mut() {
        let Some(encoded) = reader.next()? else {
            return Err(short(reader.path(), at));
        };
        run.push((&encoded, reader.path()), (frame, chunk))?;
    }
    Ok(())
}

/// Each encode's mean, once it is checked to hold no frame past the segment's `frames`.
fn finish(runs: Vec<(FrameReader, VmafRun)>, frames: u64) -> Result<Vec<f64>, MediaError> {
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
