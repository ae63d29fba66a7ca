//! Encode one segment: check the request, then run the software path (encode_sw.rs) or the
//! GPU path (encode_hw.rs).
//!
//! Why one entry: callers (the media child) ask for a segment and need not know which path
//! runs it; both paths take the same request, select the same frames (range.rs) and answer
//! the same result (types.rs).

use crate::range::check_request;
use crate::{encode_hw, encode_sw, MediaError};
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
    match &req.hardware {
        Some(hw) => encode_hw::encode_hw(req, hw, progress),
        None => encode_sw::encode_sw(req, progress),
    }
}
