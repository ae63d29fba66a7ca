//! The `target` object of the job schema: an output's, a package's and a package rung's
//! target quality (`tessera_model::encode::ApiTarget`).
//!
//! Why apart: the file output's schema (request.rs) and the package's (package.rs) both
//! state it, and neither imports the other for it.

use serde_json::{json, Value};
use tessera_model::encode::VideoCodec;

/// A `target`: the VMAF each segment's search aims at and the bounds of its CRF (`top_crf`,
/// the highest any of its codecs takes).
pub(super) fn target_schema(top_crf: f32) -> Value {
    let defaults = |pick: fn((f64, f64)) -> f64| {
        let of = |c| pick(tessera_model::settings::target_bounds(c));
        format!(
            "[default {} h264, {} hevc, {} av1]",
            of(VideoCodec::H264),
            of(VideoCodec::Hevc),
            of(VideoCodec::Av1)
        )
    };
    json!({"type": "object", "required": ["vmaf"], "additionalProperties": false,
        "description": "target quality: each segment searches its own CRF for this mean VMAF \
            (a crf given too is the first probe; no bitrate). A bound given alone moves the \
            other default aside; min_crf must not be above max_crf.",
        "properties": {
            "vmaf": {"type": "number", "minimum": 1, "maximum": 100},
            "min_crf": {"type": "number", "minimum": 0, "maximum": top_crf,
                "description": format!("the most bits a segment may take {}", defaults(|b| b.0))},
            "max_crf": {"type": "number", "minimum": 0, "maximum": top_crf,
                "description": format!("the fewest bits a segment may take {}", defaults(|b| b.1))}}})
}

/// A codec branch's bounds of `target`'s CRFs.
pub(super) fn target_crf_maximum(max: f32) -> Value {
    json!({"properties": {"min_crf": {"maximum": max}, "max_crf": {"maximum": max}}})
}
