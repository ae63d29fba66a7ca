//! The OpenAPI document served at `/openapi.json`.

use serde_json::{json, Value};

/// The API description (OpenAPI 3.0).
pub fn document() -> Value {
    let error = json!({"type": "object", "properties": {"error": {"type": "object", "properties": {
        "code": {"type": "string"}, "message": {"type": "string"}}}}});
    let output = json!({"type": "object", "required": ["destination"], "properties": {
        "codec": {"type": "string", "enum": ["h264", "hevc", "av1"]},
        "crf": {"type": "number"}, "bitrate": {"type": "integer", "description": "bits per second"},
        "preset": {"type": "string", "description": "x264/x265 names (ultrafast..placebo), SVT-AV1 0-13; with hardware gpu also NVENC p1-p7"},
        "height": {"type": "integer"},
        "hdr": {"type": "string", "enum": ["auto", "keep", "tonemap"]},
        "container": {"type": "string", "enum": ["mp4", "mkv"]},
        "destination": {"type": "string", "example": "s3://out/videos/a.mp4"}}});
    let job_in = json!({"type": "object", "required": ["input", "outputs"], "properties": {
        "input": {"type": "string", "example": "s3://in/uploads/a.mov"},
        "outputs": {"type": "array", "items": output, "minItems": 1, "maxItems": 8,
            "description": "each segment is decoded once and encoded once per output; destinations must differ"},
        "segment_seconds": {"type": "number"},
        "priority": {"type": "integer", "minimum": 0, "maximum": 9, "default": 5, "description": "higher-priority jobs' segments are queued first"},
        "hardware": {"type": "string", "enum": ["gpu", "cpu", "any"], "default": "any",
            "description": "gpu: NVENC workers only; cpu: software encoders only; any: the GPU queue while GPU workers consume it, else the CPU queue"},
        "callback_url": {"type": "string"}, "psnr": {"type": "boolean"}}});
    let job = json!({"type": "object", "properties": {
        "id": {"type": "string"},
        "state": {"type": "string", "enum": ["queued", "splitting", "encoding", "stitching", "done", "failed", "cancelled"]},
        "segments_total": {"type": "integer"}, "segments_done": {"type": "integer"}, "percent": {"type": "number"},
        "outputs": {"type": "array", "items": {"type": "string"}}, "encode_fps": {"type": "number"},
        "priority": {"type": "integer"}, "hardware": {"type": "string"},
        "psnr": {"type": "number"}, "timings": {"type": "object"}, "error": error}});
    let upload_in = json!({"type": "object", "description": "either bucket and key, or filename (then the object is uploads/{uuid}/{sanitised filename} in the upload bucket)", "properties": {
        "bucket": {"type": "string", "example": "in"}, "key": {"type": "string", "example": "uploads/a.mov"},
        "filename": {"type": "string", "example": "a.mov"}}});
    let upload = json!({"type": "object", "properties": {
        "url": {"type": "string", "description": "presigned PUT URL; send the file's bytes as the body"},
        "input": {"type": "string", "example": "s3://in/uploads/0f3c/a.mov"},
        "expires_in": {"type": "integer", "description": "seconds the URL stays valid", "example": 900}}});
    let resp = |desc: &str, schema: &Value| json!({"description": desc, "content": {"application/json": {"schema": schema}}});
    let errors = json!({"401": resp("missing or wrong token", &error), "403": resp("bucket not allowed", &error),
        "404": resp("no such job", &error), "422": resp("invalid job", &error)});
    json!({
        "openapi": "3.0.3",
        "info": {"title": "tessera dispatcher", "version": env!("CARGO_PKG_VERSION")},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": {
            "/v1/jobs": {
                "post": {"summary": "Submit a job", "parameters": [{"name": "Idempotency-Key", "in": "header", "schema": {"type": "string"}}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": job_in}}},
                    "responses": merge(json!({"202": resp("accepted", &job), "429": resp("the tenant's unfinished jobs are at its quota", &error)}), &errors)},
                "get": {"summary": "List jobs", "parameters": [
                    {"name": "state", "in": "query", "schema": {"type": "string"}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                    {"name": "offset", "in": "query", "schema": {"type": "integer"}}],
                    "responses": merge(json!({"200": resp("jobs", &json!({"type": "object", "properties": {"jobs": {"type": "array", "items": job}}}))}), &errors)}
            },
            "/v1/jobs/{id}": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "get": {"summary": "A job's state", "responses": merge(json!({"200": resp("the job", &job)}), &errors)},
                "delete": {"summary": "Cancel a job", "responses": merge(json!({"202": resp("cancelled", &job)}), &errors)}
            },
            "/v1/uploads": {
                "post": {"summary": "A presigned URL to upload an input to", "requestBody": {"required": true, "content": {"application/json": {"schema": upload_in}}},
                    "responses": merge(errors.clone(), &json!({"201": resp("upload URL", &upload), "422": resp("invalid key or body", &error), "503": resp("store unavailable", &error)}))}
            },
            "/healthz": {"get": {"security": [], "summary": "Liveness", "responses": {"200": {"description": "ok"}}}},
            "/readyz": {"get": {"security": [], "summary": "Readiness", "responses": {"200": {"description": "ready"}}}},
            "/metrics": {"get": {"security": [], "summary": "Prometheus metrics", "responses": {"200": {"description": "text"}}}}
        }
    })
}

fn merge(mut a: Value, b: &Value) -> Value {
    if let (Some(a), Some(b)) = (a.as_object_mut(), b.as_object()) {
        for (k, v) in b {
            a.insert(k.clone(), v.clone());
        }
    }
    a
}
