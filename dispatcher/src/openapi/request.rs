//! The request bodies of `/openapi.json` with every limit the server enforces: ranges,
//! lengths, enums and the patterns of keys, URIs and presets, built from this farm's
//! settings (its buckets, its NVENC encoders, its webhook policy).
//!
//! Why per farm: a client generated from the document must never send what this server
//! refuses (issue 29, item 7), and which buckets, codecs on a card and callback hosts are
//! allowed is the farm's choice. What the document cannot state (a tenant's own prefixes, a
//! destination given twice, a key of more than 256 characters with non-ASCII ones in it) is
//! said in the descriptions; the first is answered 403, the others 422.

use serde_json::{json, Value};
use tessera_model::capabilities::HwCapabilities;
use tessera_model::encode::VideoCodec;
use tessera_model::settings::{max_crf, MAX_BITRATE, MIN_BITRATE, X26X_PRESETS};

pub use super::patterns::MAX_KEY_BYTES;
use super::patterns::{bucket_alternation, literal, CTRL};
use super::target::{target_crf_maximum, target_schema};
use crate::jobspec::MAX_OUTPUTS;
use crate::uploads::MAX_FILENAME_CHARS;

/// What of the farm's settings the document states (built from the service's state by
/// `api::contract`).
#[derive(Debug, Clone, Default)]
pub struct Contract {
    /// Buckets jobs and uploads may use (valid S3 names only: no other can be used).
    pub buckets: Vec<String>,
    /// The bucket a filename-only upload goes to, when one is set and allowed.
    pub upload_bucket: Option<String>,
    /// What the farm's FFmpeg offers for NVENC.
    pub gpu: HwCapabilities,
    /// Whether the dispatcher has a webhook secret (else `callback_url` is refused).
    pub webhooks: bool,
    /// The webhook allow-list's hosts (empty: any public name).
    pub webhook_hosts: Vec<String>,
    /// The largest upload (`size` of `POST /v1/uploads`).
    pub upload_max_bytes: u64,
    /// The watched prefixes, where no job may write (its output would start another job).
    pub watched: Vec<crate::scopes::Prefix>,
}

impl Contract {
    /// The codecs a job with hardware "gpu" may ask for (none: "gpu" is refused).
    fn nvenc_codecs(&self) -> Vec<VideoCodec> {
        let all = [VideoCodec::H264, VideoCodec::Hevc, VideoCodec::Av1];
        all.into_iter()
            .filter(|&c| self.gpu.gpu_path() && self.gpu.has_encoder(c))
            .collect()
    }
}

/// The longest `s3://bucket/key`, in characters.
pub const MAX_URI_CHARS: usize = 5 + 63 + 1 + MAX_KEY_BYTES;

/// A key's length bound as a look-ahead: up to `bytes` ASCII characters, or up to a
/// quarter as many of any (a character is at most 4 bytes of UTF-8).
fn fits(bytes: usize) -> String {
    format!(
        r"(?=[\x20-\x7e]{{1,{bytes}}}$|[^{CTRL}]{{1,{}}}$)",
        bytes / 4
    )
}

/// An object key: '/'-separated parts, none empty, "." or "..", no backslash or control.
fn key() -> String {
    let any = format!(r"[^/\\{CTRL}]");
    let first = format!(r"[^./\\{CTRL}]");
    let part = format!(r"(?:{first}{any}*|\.{first}{any}*|\.\.{any}+)");
    format!("{part}(?:/{part})*")
}

/// A look-ahead refusing a destination inside a watched prefix (`s3://bucket/prefix...`).
fn outside_watched(watched: &[crate::scopes::Prefix]) -> String {
    let inside: Vec<String> = watched
        .iter()
        .map(|w| format!("s3://{}/{}", literal(&w.bucket), literal(&w.prefix)))
        .collect();
    if inside.is_empty() {
        String::new()
    } else {
        format!("(?!{})", inside.join("|"))
    }
}

/// A destination file: an object of the farm's buckets outside every watched prefix.
fn destination_uri(buckets: &[String], watched: &[crate::scopes::Prefix]) -> Value {
    let mut uri = object_uri(buckets, "s3://out/videos/a.mp4");
    if let Some(p) = uri["pattern"].as_str() {
        uri["pattern"] = json!(format!("^{}{}", outside_watched(watched), &p[1..]));
    }
    uri["description"] = json!(format!(
        "{}; not inside a watched prefix (its output would start another job)",
        uri["description"].as_str().unwrap_or_default()
    ));
    uri
}

/// `s3://bucket/key` of an object in one of the farm's buckets.
pub fn object_uri(buckets: &[String], example: &str) -> Value {
    let pattern = format!(
        "^s3://{}/{}{}$",
        bucket_alternation(buckets),
        fits(MAX_KEY_BYTES),
        key()
    );
    json!({"type": "string", "pattern": pattern, "maxLength": MAX_URI_CHARS, "example": example, "x-max-key-bytes": MAX_KEY_BYTES,
        "description": "s3://bucket/key: a bucket this farm may use; a key of at most 1024 bytes \
            (1024 ASCII characters or 256 of any), '/'-separated parts, none empty, '.' or '..', \
            no backslash or control character"})
}

/// An object key alone (the `key` of an upload).
fn object_key() -> Value {
    let pattern = format!("^{}{}$", fits(MAX_KEY_BYTES), key());
    json!({"type": "string", "pattern": pattern, "maxLength": MAX_KEY_BYTES,
        "example": "uploads/default/a.mov"})
}

/// The x264 preset names as one alternation.
fn x26x_names() -> String {
    X26X_PRESETS.join("|")
}

/// SVT-AV1's presets as written: 0 to 13 (what Rust's `u8` parse takes: a '+', leading 0s).
const SVT_NUMBER: &str = r"\+?0*(?:1[0-3]|[0-9])";

/// The presets a codec accepts on the software path (`resolve_preset`).
fn cpu_preset(codec: VideoCodec) -> Value {
    match codec {
        VideoCodec::Av1 => json!({"type": "string", "maxLength": 16,
            "pattern": format!("^(?:{SVT_NUMBER}|{})$", x26x_names())}),
        _ => json!({"type": "string", "enum": X26X_PRESETS}),
    }
}

/// The presets a codec accepts on NVENC (`nvenc_preset`): p1-p7 or an x264 name (AV1: or 0-13).
fn gpu_preset(codec: VideoCodec) -> Value {
    let numbers = if codec == VideoCodec::Av1 {
        format!("|{SVT_NUMBER}")
    } else {
        String::new()
    };
    json!({"type": "string", "maxLength": 16,
        "pattern": format!("^(?:p[1-7]|{}{numbers})$", x26x_names())})
}

fn codec_name(codec: VideoCodec) -> &'static str {
    match codec {
        VideoCodec::H264 => "h264",
        VideoCodec::Hevc => "hevc",
        VideoCodec::Av1 => "av1",
    }
}

/// One output of a job whose encoders may be `codecs`, their presets from `preset`.
fn output_schema(
    buckets: &[String],
    watched: &[crate::scopes::Prefix],
    codecs: &[VideoCodec],
    preset: fn(VideoCodec) -> Value,
) -> Value {
    let names: Vec<&str> = codecs.iter().map(|&c| codec_name(c)).collect();
    let top_crf = codecs.iter().map(|&c| max_crf(c)).fold(0.0_f32, f32::max);
    // A branch per rule set: H.264 and HEVC share theirs; an absent codec is H.264.
    let mut branches = Vec::new();
    let x26x: Vec<VideoCodec> = codecs
        .iter()
        .copied()
        .filter(|&c| c != VideoCodec::Av1)
        .collect();
    if let Some(&first) = x26x.first() {
        let mut branch = json!({"properties": {
            "codec": {"enum": x26x.iter().map(|&c| codec_name(c)).collect::<Vec<_>>()},
            "crf": {"maximum": max_crf(first)}, "preset": preset(first),
            "target": target_crf_maximum(max_crf(first))}});
        if !x26x.contains(&VideoCodec::H264) {
            branch["required"] = json!(["codec"]);
        }
        branches.push(branch);
    }
    if codecs.contains(&VideoCodec::Av1) {
        branches.push(
            json!({"required": ["codec"], "properties": {"codec": {"enum": ["av1"]},
            "crf": {"maximum": max_crf(VideoCodec::Av1)}, "preset": preset(VideoCodec::Av1),
            "target": target_crf_maximum(max_crf(VideoCodec::Av1))}}),
        );
    }
    let extension = r"[^/]\.(?:[mM][pP]4|[mM]4[vV]|[mM][oO][vV]|[mM][kK][vV])$";
    json!({"type": "object", "required": ["destination"], "additionalProperties": false,
        "properties": {
            "codec": {"type": "string", "enum": names, "default": "h264"},
            "crf": {"type": "number", "minimum": 0, "maximum": top_crf, "description": "0-51 for h264/hevc, 0-63 for av1"},
            "bitrate": {"type": "integer", "minimum": MIN_BITRATE, "maximum": MAX_BITRATE, "description": "bits per second; give crf or bitrate, not both"},
            "target": target_schema(top_crf),
            "max_bitrate": {"type": "integer", "minimum": MIN_BITRATE, "maximum": MAX_BITRATE, "description": "a peak-rate (VBV) cap in bits per second, with a crf or a target; not below bitrate"},
            "preset": {"type": "string", "maxLength": 16, "description": "x264/x265 names (ultrafast..placebo), SVT-AV1 0-13; with hardware gpu NVENC p1-p7 (or an x264 name)"},
            "height": {"type": "integer", "minimum": 2, "maximum": 16384},
            "hdr": {"type": "string", "enum": ["auto", "keep", "tonemap"]},
            "container": {"type": "string", "enum": ["mp4", "mkv"], "description": "default: from the destination's extension (.mp4, .m4v, .mov or .mkv)"},
            "destination": destination_uri(buckets, watched)},
        "not": {"required": ["crf", "bitrate"]},
        "allOf": [
            {"not": {"required": ["target", "bitrate"]}},
            {"anyOf": [{"required": ["container"]}, {"properties": {"destination": {"pattern": extension}}}]},
            {"anyOf": branches}]})
}

/// A `callback_url` this farm calls, in the grammar `webhook_guard` keeps: http(s), a DNS
/// name (not localhost; with an allow-list, one of its hosts), a port 1-65535, an RFC 3986
/// path and query. Address literals are left out (the server takes public ones).
fn callback_url(hosts: &[String]) -> Value {
    let label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    let local = |h: &str| h == "localhost" || h.ends_with(".localhost");
    let host = if hosts.is_empty() {
        let localhost = "[lL][oO][cC][aA][lL][hH][oO][sS][tT]";
        format!(r"(?:{label}\.)+(?!{localhost}(?:[:/?]|$))[A-Za-z]{{2,63}}")
    } else {
        let named: Vec<String> = hosts
            .iter()
            .filter(|h| !local(h.trim_start_matches("*.")))
            .map(|h| match h.strip_prefix("*.") {
                Some(suffix) => format!(r"(?:{label}\.)+{}", suffix.replace('.', r"\.")),
                None => h.replace('.', r"\."),
            })
            .collect();
        format!(
            "(?:{})",
            if named.is_empty() {
                "(?!)".into()
            } else {
                named.join("|")
            }
        )
    };
    let port = "(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?";
    let pchar = "[A-Za-z0-9._~!$&'()*+,;=:@/-]|%[0-9A-Fa-f]{2}";
    let qchar = "[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2}";
    let pattern = format!(r"^https?://{host}{port}(?:/(?:{pchar})*(?:\?(?:{qchar})*)?)?$");
    json!({"type": "string", "pattern": pattern, "maxLength": 2048,
        "description": "where the job's final view is POSTed (HMAC-signed): a public host name, \
            or one the farm's webhook allow-list names; no user info or fragment"})
}

/// The body of `POST /v1/jobs`.
pub fn job_request_schema(c: &Contract) -> Value {
    let cpu = [VideoCodec::H264, VideoCodec::Hevc, VideoCodec::Av1];
    // An output is a file, or on the CPU path a streaming package.
    let files = json!({"items": {"anyOf": [output_schema(&c.buckets, &c.watched, &cpu, cpu_preset),
        super::package::package_output(&c.buckets, &c.watched)]}});
    let mut branches = vec![json!({"properties": {"hardware": {"enum": ["cpu", "any"]},
        "outputs": files}})];
    let mut hardware = vec!["cpu", "any"];
    let nvenc = c.nvenc_codecs();
    if !nvenc.is_empty() {
        hardware.insert(0, "gpu");
        branches.push(
            json!({"required": ["hardware"], "properties": {"hardware": {"enum": ["gpu"]},
            "outputs": {"items": {"anyOf": [output_schema(&c.buckets, &c.watched, &nvenc, gpu_preset)]}}}}),
        );
    }
    let mut properties = json!({
        "input": object_uri(&c.buckets, "s3://in/uploads/a.mov"),
        "outputs": {"type": "array", "items": {"type": "object"}, "minItems": 1, "maxItems": MAX_OUTPUTS,
            "description": "each segment is decoded once and encoded once per output (a package once per rung, \
            at most 8 encodes in all); destinations must differ; at most one package"},
        "segment_seconds": {"type": "number", "minimum": 0.5, "maximum": 600},
        "priority": {"type": "integer", "minimum": 0, "maximum": 9, "default": 5, "description": "higher-priority jobs' segments are queued first"},
        "hardware": {"type": "string", "enum": hardware, "default": "any",
            "description": "gpu: NVENC workers only (offered when this farm's FFmpeg has NVENC); cpu: software encoders only; any: the GPU queue while GPU workers consume it, else the CPU queue"},
        "psnr": {"type": "boolean"},
        "stereo_downmix": {"type": "boolean", "default": false,
            "description": "mix every audio track of more than two channels down to stereo; without it 5.1 stays 5.1"}});
    if c.webhooks {
        properties["callback_url"] = callback_url(&c.webhook_hosts);
    }
    json!({"type": "object", "required": ["input", "outputs"], "additionalProperties": false,
        "description": "Inputs and destinations must also be within the tenant's own prefixes \
            (else 403). The whole body is at most 64 KiB (else 413).",
        "properties": properties, "anyOf": branches})
}

/// The body of `POST /v1/uploads`.
pub fn upload_request_schema(c: &Contract) -> Value {
    let size = json!({"type": "integer", "minimum": 0, "maximum": c.upload_max_bytes,
        "description": "the upload's length in bytes, signed into the URL (the PUT must send \
            exactly this many); required of a tenant, optional for an admin token"});
    let mut forms = vec![
        json!({"type": "object", "required": ["bucket", "key"], "additionalProperties": false,
        "properties": {"bucket": {"type": "string", "enum": c.buckets, "example": "in"}, "key": object_key(), "size": size}}),
    ];
    if c.upload_bucket.is_some() {
        forms.push(json!({"type": "object", "required": ["filename"], "additionalProperties": false,
            "properties": {"filename": {"type": "string", "maxLength": MAX_FILENAME_CHARS, "example": "a.mov",
                "description": "reduced to its base name's [A-Za-z0-9._-] (others become '_'); empty or all dots: 'upload'"},
                "size": size}}));
    }
    json!({"description": "either bucket and key (a tenant's key starts uploads/{tenant}/, else 403), \
        or filename (then the object is uploads/{tenant}/{uuid}/{sanitised filename} in the \
        upload bucket; offered when the farm has one)", "oneOf": forms})
}
