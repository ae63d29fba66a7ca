//! The software path of a segment encode: decode its chunk, keep exactly the frames of its
//! range, encode them for every rendition from one decode (libx264, libx265, libsvtav1; each
//! rendition is a `SwRendition`, rendition.rs).
//!
//! Why one decode for all renditions: decoding is a large share of the work; a ladder of three
//! renditions from one decode costs one decode, not three.

use std::time::Instant;

use ffmpeg_next as ff;

use super::range::{chunk_stream, decode_all, RangeGate};
use super::rendition::SwRendition;
use super::stills::StillMaker;
use crate::demux::{open_input, open_video_decoder};
use crate::MediaError;
use tessera_model::encode::{EncodeRequest, EncodeResult, RenditionResult};

/// Encodes the frames of `[start_pts, end_pts)` from the chunk with the software encoders;
/// `progress` gets the running count of frames encoded. The request is already checked.
pub(crate) fn encode_sw(
    req: &EncodeRequest,
    progress: &mut dyn FnMut(u64),
) -> Result<EncodeResult, MediaError> {
    let started = Instant::now();
    let chunk = req.chunk.as_path();
    let mut ictx = open_input(chunk)?;
    let stream = chunk_stream(&ictx, chunk)?;
    let chunk_tb = stream.time_base();
    let mut decoder = open_video_decoder(&stream, chunk, req.threads)?;
    let size = req
        .source
        .source_size
        .unwrap_or((decoder.width(), decoder.height()));
    let mut encoder = SwEncoder::open(req, size, decoder.format())?;
    let mut gate = RangeGate::new(req, chunk_tb);
    let lead_in = gate.lead_in();
    let mut on_frame = |frame: &mut ff::frame::Video| -> Result<(), MediaError> {
        let Some(pts) = gate.admit_frame(frame) else {
            return Ok(());
        };
        frame.set_kind(ff::picture::Type::None);
        encoder.frame(frame, pts)?;
        progress(gate.in_range);
        Ok(())
    };
    let rejected = decode_all(
        &mut ictx,
        &mut decoder,
        chunk,
        &mut on_frame,
        None,
        Some(lead_in),
    )?;
    let (decoded, in_range) = (gate.decoded, gate.in_range);
    if decoded == 0 {
        return Err(MediaError::decode(chunk, "no frame could be decoded"));
    }
    Ok(EncodeResult {
        decoded_frames: decoded,
        frames_in_range: in_range,
        renditions: encoder.finish()?,
        media_seconds: started.elapsed().as_secs_f64(),
        decode_errors: rejected + gate.damaged,
        gpu_decode: None,
    })
}

/// Every rendition and still of one request, fed the segment's frames one by one: from a
/// decode of the chunk ([`encode_sw`]) or from frames decoded once and kept (the rounds of
/// a target-quality search).
pub(crate) struct SwEncoder<'a> {
    req: &'a EncodeRequest,
    renditions: Vec<SwRendition>,
    stills: StillMaker,
    stills_made: usize,
}

impl<'a> SwEncoder<'a> {
    /// Opens the renditions of `req` for frames of `size` in `format`.
    pub(crate) fn open(
        req: &'a EncodeRequest,
        size: (u32, u32),
        format: ff::format::Pixel,
    ) -> Result<Self, MediaError> {
        let renditions = (req.outputs.iter())
            .map(|o| SwRendition::open(req, o, size, format))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SwEncoder {
            req,
            renditions,
            stills: StillMaker::new(&req.source.color),
            stills_made: 0,
        })
    }

    /// Encodes the admitted frame `frame` of output pts `pts` into every rendition (and the
    /// stills shot at it).
    pub(crate) fn frame(&mut self, frame: &ff::frame::Video, pts: i64) -> Result<(), MediaError> {
        let req = self.req;
        // A streaming package's media segment starts here: every rendition makes it an IDR.
        let key = (req.source.keyframes)
            .binary_search(&(pts - req.source.bias))
            .is_ok();
        for shot in req.stills.iter().filter(|s| s.pts == pts - req.source.bias) {
            self.stills.make(frame, shot)?;
            self.stills_made += 1;
        }
        for r in self.renditions.iter_mut() {
            r.encode(frame, pts, key)?;
        }
        Ok(())
    }

    /// Flushes every rendition; fails when a still's frame never came.
    pub(crate) fn finish(self) -> Result<Vec<RenditionResult>, MediaError> {
        let req = self.req;
        if self.stills_made != req.stills.len() {
            return Err(MediaError::decode(
                &req.chunk,
                format!(
                    "{} of {} still frames were not in the decoded range",
                    req.stills.len() - self.stills_made,
                    req.stills.len()
                ),
            ));
        }
        (self.renditions.into_iter())
            .map(|r| r.finish(req))
            .collect()
    }
}
