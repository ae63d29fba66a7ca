//! VMAF of an output against its source: both at the source's frame size (the output scaled
//! up or down to it, bicubic; an anamorphic source keeps its stored grid, which its outputs
//! share the aspect ratio of), frames paired by index, scored by libvmaf (ffi/vmaf.rs) with
//! the standard model, or its 4K model for sources above 1440 lines, then pooled for the
//! whole output and for each segment.
//!
//! Why by index: tessera puts every source frame in its output exactly once, in order (the
//! QC gate proves it), so frame i of the output is frame i of the source; no alignment by
//! timestamps or search is needed, nor would one be trusted.

use std::ffi::CStr;
use std::path::Path;

use ffmpeg_next as ff;
use tessera_model::stitch::{VmafPooled, VmafReport};

use super::frames::Fit;
use crate::ffi::vmaf::{self, Scorer};
use crate::MediaError;

/// The model for a source of `width`x`height`: Netflix's 4K model above 1440 lines (or 2560
/// columns), the standard one (trained for 1080p viewing) otherwise.
pub(crate) fn model_for(width: u32, height: u32) -> &'static CStr {
    if height > 1440 || width > 2560 {
        c"vmaf_4k_v0.6.1"
    } else {
        c"vmaf_v0.6.1"
    }
}

/// One output's VMAF, frame pair by frame pair.
pub(crate) struct VmafRun {
    scorer: Scorer,
    model: &'static CStr,
    width: u32,
    height: u32,
    output: Fit,
    source: Fit,
}

impl VmafRun {
    /// A run at the source's frame size `width`x`height` (made even: 4:2:0), on `threads`,
    /// scoring every `subsample`th frame (1 for reports: every frame has its score).
    pub(crate) fn new(
        width: u32,
        height: u32,
        (threads, subsample): (u32, u32),
        output: &Path,
    ) -> Result<Self, MediaError> {
        let (width, height) = (width.max(2) & !1, height.max(2) & !1);
        let model = model_for(width, height);
        let scorer = Scorer::new(model, threads, subsample).map_err(|e| vmaf_error(output, e))?;
        Ok(VmafRun {
            scorer,
            model,
            width,
            height,
            output: Fit::to(width, height),
            source: Fit::to(width, height),
        })
    }

    /// Scores the next pair: `out` (from `out_path`) against `src` (from `src_path`).
    pub(crate) fn push(
        &mut self,
        (out, out_path): (&ff::frame::Video, &Path),
        (src, src_path): (&ff::frame::Video, &Path),
    ) -> Result<(), MediaError> {
        let distorted = self.output.fit(out, out_path)?;
        let reference = self.source.fit(src, src_path)?;
        (self.scorer.push(&reference, &distorted)).map_err(|e| vmaf_error(out_path, e))
    }

    /// The report: the whole output, and each segment of `segments` (frame counts, in order;
    /// the frames past their sum, if any, in none).
    pub(crate) fn finish(self, segments: &[u64], output: &Path) -> Result<VmafReport, MediaError> {
        let scores = self.scorer.finish().map_err(|e| vmaf_error(output, e))?;
        let pooled =
            VmafPooled::of(&scores).ok_or_else(|| vmaf_error(output, "no frames scored"))?;
        Ok(VmafReport {
            model: self.model.to_string_lossy().into_owned(),
            libvmaf: vmaf::version(),
            width: self.width,
            height: self.height,
            pooled,
            segments: per_segment(&scores, segments),
        })
    }
}

/// The scores pooled per segment: `segments` are frame counts in order; a segment the
/// scores do not reach is left out, one they reach in part is pooled over what they cover.
pub(crate) fn per_segment(scores: &[f64], segments: &[u64]) -> Vec<VmafPooled> {
    let mut start = 0usize;
    let mut pooled = Vec::with_capacity(segments.len());
    for &frames in segments {
        let end = start.saturating_add(frames as usize).min(scores.len());
        match VmafPooled::of(&scores[start.min(end)..end]) {
            Some(p) => pooled.push(p),
            None => break,
        }
        start = end;
    }
    pooled
}

fn vmaf_error(output: &Path, reason: impl std::fmt::Display) -> MediaError {
    MediaError::decode(output, format!("VMAF: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::{model_for, per_segment};

    #[test]
    fn segments_pool_their_own_frames() {
        let scores = [90.0, 92.0, 50.0, 60.0, 70.0, 99.0];
        let pooled = per_segment(&scores, &[2, 3, 1]);
        let means: Vec<f64> = pooled.iter().map(|p| p.mean).collect();
        assert_eq!(means, [91.0, 60.0, 99.0]);
        assert_eq!(pooled.iter().map(|p| p.frames).sum::<u64>(), 6);
        // Fewer scores than the segments hold: the last one covered in part, none after.
        let short = per_segment(&scores[..4], &[2, 3, 1]);
        assert_eq!((short.len(), short[1].frames, short[1].mean), (2, 2, 55.0));
        // One-frame segments, and none at all.
        assert_eq!(per_segment(&scores, &[1; 6]).len(), 6);
        assert!(per_segment(&scores, &[]).is_empty());
    }

    #[test]
    fn the_4k_model_is_for_sources_above_1440_lines() {
        assert_eq!(model_for(1920, 1080).to_str(), Ok("vmaf_v0.6.1"));
        assert_eq!(model_for(2560, 1440).to_str(), Ok("vmaf_v0.6.1"));
        assert_eq!(model_for(3840, 2160).to_str(), Ok("vmaf_4k_v0.6.1"));
        assert_eq!(model_for(1440, 2560).to_str(), Ok("vmaf_4k_v0.6.1"));
    }
}
