//! The `package` output of `POST /v1/jobs` (an HLS, DASH or CMAF ladder) in `/openapi.json`,
//! with every limit `PackageSpec::check` and `jobspec::validate_package` keep.
//!
//! Why its own schema: without it the output object (additionalProperties false) refused
//! every package, so a client generated from the document could not ask for one (issue 29).
//! What the document cannot state (a rung's maxrate below its bitrate, two packages in a
//! job, more than 8 encodes per segment with the other outputs) is said in the descriptions
//! and answered 422.

use serde_json::{json, Value};
use tessera_model::encode::VideoCodec;
use tessera_model::package::thumbnails::{MAX_HEIGHTS, MAX_POSTER_SECONDS};
use tessera_model::package::MAX_RUNGS;
use tessera_model::settings::{max_crf, MAX_BITRATE, MIN_BITRATE};

use super::patterns::{bucket_alternation, literal, CTRL, MAX_KEY_BYTES};
use super::target::{target_crf_maximum, target_schema};
use crate::scopes::Prefix;

/// The name every package writes under its prefix that is longest in the key check
/// (`PlannedPackage::parse_destination` checks the prefix with it appended).
const PROBE: &str = "master.m3u8";

/// A rung's codec branches: H.264 (also when absent), HEVC, AV1, each with its CRF ceiling
/// and its profiles (`check_rung`).
fn rung_codecs() -> Value {
    let branch = |codec: VideoCodec, name: &str, profiles: &[&str]| {
        json!({"properties": {"codec": {"enum": [name]}, "crf": {"maximum": max_crf(codec)},
            "profile": {"type": "string", "enum": profiles},
            "target": target_crf_maximum(max_crf(codec))}})
    };
    let mut h264 = branch(VideoCodec::H264, "h264", &["baseline", "main", "high"]);
    let mut hevc = branch(VideoCodec::Hevc, "hevc", &["main", "main10"]);
    let mut av1 = branch(VideoCodec::Av1, "av1", &["main"]);
    hevc["required"] = json!(["codec"]);
    av1["required"] = json!(["codec"]);
    // The default branch first: the contract test reads its bounds.
    h264["description"] = json!("h264, the default when codec is absent");
    json!([h264, hevc, av1])
}

/// One rung of an explicit ladder.
fn rung() -> Value {
    let rate = |what: &str| json!({"type": "integer", "minimum": MIN_BITRATE, "maximum": MAX_BITRATE, "description": what});
    json!({"type": "object", "required": ["height"], "additionalProperties": false,
        "properties": {
            "height": {"type": "integer", "minimum": 2, "maximum": 16384, "description": "the width keeps the source's aspect ratio"},
            "bitrate": rate("average bits per second; give bitrate or crf, not both"),
            "crf": {"type": "number", "minimum": 0, "maximum": max_crf(VideoCodec::Av1), "description": "constant quality, 0-51 for h264/hevc, 0-63 for av1; with maxrate, capped CRF"},
            "codec": {"type": "string", "enum": ["h264", "hevc", "av1"], "default": "h264"},
            "maxrate": rate("peak bits per second (VBV, buffer 2 x maxrate); not below bitrate"),
            "profile": {"type": "string", "enum": ["baseline", "main", "high", "main10"], "description": "h264: baseline, main, high; hevc: main, main10; av1: main"},
            "target": target_schema(max_crf(VideoCodec::Av1))},
        "description": "give bitrate, crf or target (or none of them under the package's target); a target searches the CRF at the rung's size, a crf given too is its first probe, no bitrate",
        "not": {"required": ["crf", "bitrate"]},
        "allOf": [{"not": {"required": ["target", "bitrate"]}}, {"anyOf": rung_codecs()}],
        "example": {"height": 720, "bitrate": 3000000, "maxrate": 3300000, "profile": "high"}})
}

/// The package's `target`: every rung without its own and without a bitrate searches it
/// (the auto ladder's rungs under their peak caps); its CRFs on the H.264 scale.
fn package_target() -> Value {
    let mut t = target_schema(max_crf(VideoCodec::H264));
    t["description"] = json!(
        "target quality of every rung that gives neither its own target \
        nor a bitrate (all rungs of the auto ladder, each under its peak cap); CRF bounds 0-51"
    );
    t
}

/// Posters, thumbnails every `interval` and sprite sheets (`ThumbnailSpec::check`).
fn thumbnails() -> Value {
    let height = json!({"type": "integer", "minimum": 16, "maximum": 4320});
    let heights_given =
        json!({"required": ["heights"], "properties": {"heights": {"minItems": 1}}});
    json!({"type": "object", "additionalProperties": false,
        "properties": {
            "format": {"type": "string", "enum": ["jpeg", "webp"], "default": "jpeg"},
            "quality": {"type": "integer", "minimum": 1, "maximum": 100, "default": 80},
            "poster": {"type": "object", "additionalProperties": false, "properties": {
                "time": {"type": "number", "minimum": 0, "maximum": MAX_POSTER_SECONDS, "default": 0,
                    "description": "seconds from the start; past the end: the last frame"},
                "height": {"type": "integer", "minimum": 16, "maximum": 4320, "description": "never above the source's; the source's when absent"}}},
            "interval": {"type": "number", "minimum": 0.5, "maximum": 3600, "description": "seconds between thumbnails (the first at 0); needs heights, a sprite or both"},
            "heights": {"type": "array", "maxItems": MAX_HEIGHTS, "items": height, "description": "heights of the images taken every interval; need an interval"},
            "sprite": {"type": "object", "additionalProperties": false, "description": "sheets of the interval's thumbnails with a WebVTT track; needs an interval", "properties": {
                "height": {"type": "integer", "minimum": 16, "maximum": 720, "default": 90},
                "columns": {"type": "integer", "minimum": 1, "maximum": 30, "default": 10},
                "rows": {"type": "integer", "minimum": 1, "maximum": 30, "default": 10}}}},
        "allOf": [
            // A poster, an interval, or both.
            {"anyOf": [{"required": ["poster"]}, {"required": ["interval"]}]},
            // An interval needs heights or a sprite.
            {"anyOf": [{"not": {"required": ["interval"]}}, {"required": ["sprite"]}, heights_given.clone()]},
            // Heights or a sprite need an interval.
            {"anyOf": [{"required": ["interval"]}, {"not": {"anyOf": [{"required": ["sprite"]}, heights_given]}}]}],
        "example": {"format": "jpeg", "quality": 80, "poster": {"time": 5, "height": 720},
            "interval": 10, "heights": [180], "sprite": {"height": 90, "columns": 10, "rows": 10}}})
}

/// `package` itself (`PackageSpec`).
fn spec() -> Value {
    json!({"type": "object", "required": ["format"], "additionalProperties": false,
        "properties": {
            "format": {"type": "string", "enum": ["hls", "dash", "cmaf"], "description": "cmaf: one set of fMP4 segments with an HLS master playlist and a DASH MPD"},
            "segment_type": {"type": "string", "enum": ["fmp4", "ts"], "default": "fmp4", "description": "ts for format hls only"},
            "segment_seconds": {"type": "number", "minimum": 1, "maximum": 60, "default": 6},
            "ladder": {"default": "auto", "description": "\"auto\" (up to 4 rungs from the source's size and rate) or the rungs, highest first",
                "anyOf": [{"type": "string", "enum": ["auto"]},
                    {"type": "array", "minItems": 1, "maxItems": MAX_RUNGS, "items": rung()}]},
            "audio": {"type": "array", "maxItems": 1, "description": "one setting for every kept language; AAC 128 kb/s when absent",
                "items": {"type": "object", "additionalProperties": false, "properties": {
                    "codec": {"type": "string", "enum": ["aac"], "default": "aac"},
                    "bitrate": {"type": "integer", "minimum": 32000, "maximum": 512000, "default": 128000}}}},
            "subtitles": {"type": "string", "enum": ["webvtt", "none"], "default": "webvtt",
                "description": "the source's text tracks as WebVTT renditions, or none (each left out named in a warning)"},
            "thumbnails": thumbnails(),
            "target": package_target()},
        // MPEG-TS segments are for HLS only.
        "not": {"required": ["format", "segment_type"], "properties": {
            "format": {"enum": ["dash", "cmaf"]}, "segment_type": {"enum": ["ts"]}}},
        "example": {"format": "hls", "segment_seconds": 6,
            "ladder": [{"height": 720, "bitrate": 3000000, "maxrate": 3300000, "profile": "high"}, {"height": 360, "crf": 24}],
            "audio": [{"codec": "aac", "bitrate": 128000}], "subtitles": "webvtt",
            "thumbnails": {"poster": {"time": 5, "height": 720}, "interval": 10, "heights": [180]}}})
}

/// A look-ahead refusing a folder that shares a key with a watched prefix: one inside it,
/// or one it lies in (the prefix itself and each folder above it, the bucket included).
fn apart_from_watched(watched: &[Prefix]) -> String {
    let mut refused = Vec::new();
    for w in watched {
        let bucket = format!("s3://{}/", literal(&w.bucket));
        refused.push(format!("{bucket}{}", literal(&w.prefix)));
        let ends = w.prefix.match_indices('/').map(|(i, _)| i + 1);
        let above: Vec<String> = std::iter::once(0)
            .chain(ends)
            .map(|end| literal(&w.prefix[..end]))
            .collect();
        refused.push(format!("{bucket}(?:{})$", above.join("|")));
    }
    if refused.is_empty() {
        String::new()
    } else {
        format!("(?!{})", refused.join("|"))
    }
}

/// `s3://bucket/prefix/`: a folder of one of the farm's buckets (the bucket alone is one),
/// whose files' keys keep `validate_key`'s rules (the prefix with "master.m3u8" after it at
/// most 1024 bytes), apart from every watched prefix.
fn prefix_uri(buckets: &[String], watched: &[Prefix]) -> Value {
    let most = MAX_KEY_BYTES - PROBE.len();
    let any = format!(r"[^/\\{CTRL}]");
    let first = format!(r"[^./\\{CTRL}]");
    let part = format!(r"(?:{first}{any}*|\.{first}{any}*|\.\.{any}+)");
    let fits = format!(r"(?=[\x20-\x7e]{{0,{most}}}$|[^{CTRL}]{{0,{}}}$)", most / 4);
    let pattern = format!(
        "^{}s3://{}/{fits}(?:{part}/)*$",
        apart_from_watched(watched),
        bucket_alternation(buckets)
    );
    let example = format!(
        "s3://{}/packages/ep1/",
        buckets.first().map_or("out", String::as_str)
    );
    json!({"type": "string", "pattern": pattern, "maxLength": 5 + 63 + 1 + most, "x-max-prefix-bytes": most,
        "example": example,
        "description": "s3://bucket/prefix/: a folder ending in '/' (the files go under it as master.m3u8, v0/...); \
            a prefix of at most 1013 bytes (1013 ASCII characters or 253 of any), parts as an object key's; \
            neither inside a watched prefix nor holding one (422)"})
}

/// An output that is a streaming package: only `package` and `destination` (the rungs carry
/// the encoder settings). Offered on the CPU path only (a package with hardware "gpu" is
/// refused).
pub fn package_output(buckets: &[String], watched: &[Prefix]) -> Value {
    json!({"type": "object", "required": ["package", "destination"], "additionalProperties": false,
        "description": "a streaming package (HLS, DASH or CMAF) instead of a file: at most one per job; \
            its rungs count with the job's file outputs toward 8 encodes per segment (\"auto\": 4); \
            not with hardware \"gpu\"",
        "properties": {"package": spec(), "destination": prefix_uri(buckets, watched)}})
}
