//! Encode one segment: check the request, then run the software path (sw.rs) or the GPU path
//! (hw.rs).
//!
//! Why one entry: callers (the media child) ask for a segment and need not know which path
//! runs it; both paths take the same request, select the same frames (range.rs), encode a
//! software rendition the same way (rendition.rs), finish every rendition's file the same
//! way (output.rs) and answer the same result.
//!
//! A rendition with a target quality searches its rate factor by rounds of such encodes
//! (target.rs).
//!
//! Beside the segment encode: the still images made from its decoded frames (stills.rs,
//! tone-mapped to SDR as the renditions are, tonemap.rs), the sprite sheets composed from
//! them (sprite.rs), and FFmpeg-side encoder settings (settings.rs).

pub(crate) mod hw;
mod output;
pub(crate) mod range;
mod rendition;
mod settings;
pub(crate) mod sprite;
pub(crate) mod stills;
mod sw;
mod target;
mod tonemap;

use crate::MediaError;
use range::check_request;
use tessera_model::encode::{EncodeRequest, EncodeResult};

/// Encodes the frames of `[start_pts, end_pts)` from the chunk; `progress` gets the running
/// count of frames encoded. On an NVIDIA card when the request names one
/// ([`EncodeRequest::hardware`]), else with the software encoders.
pub fn encode_segment(
    req: &EncodeRequest,
    progress: &mut dyn FnMut(u64),
) -> Result<EncodeResult, MediaError> {
    crate::init();
    check_request(req)?;
    if req.outputs.iter().any(|o| o.spec.target.is_some()) {
        return target::encode_targeted(req, progress, &encode_once);
    }
    encode_once(req, progress)
}

/// One encode of every rendition of `req` from one decode.
fn encode_once(
    req: &EncodeRequest,
    progress: &mut dyn FnMut(u64),
) -> Result<EncodeResult, MediaError> {
    match &req.hardware {
        Some(hw) => hw::encode_hw(req, hw, progress),
        None => sw::encode_sw(req, progress),
    }
}
