//! The OpenAPI document served at `/openapi.json`.

use serde_json::{json, Value};

/// The API description (OpenAPI 3.0).
pub fn document() -> Value {
    let error = json!({"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["code", "message"], "properties": {
        "code": {"type": "string", "description": "stable error code (see docs/api.md)"},
        "message": {"type": "string"}}}}});
    let s3_uri = |example: &str| json!({"type": "string", "pattern": "^s3://", "maxLength": 1100, "example": example});
    let output = json!({"type": "object", "required": ["destination"], "additionalProperties": false, "properties": {
        "codec": {"type": "string", "enum": ["h264", "hevc", "av1"]},
        "crf": {"type": "number", "minimum": 0, "maximum": 63, "description": "0-51 for h264/hevc, 0-63 for av1"},
        "bitrate": {"type": "integer", "minimum": 10000, "description": "bits per second; give crf or bitrate, not both"},
        "preset": {"type": "string", "description": "x264/x265 names (ultrafast..placebo), SVT-AV1 0-13; with hardware gpu also NVENC p1-p7"},
        "height": {"type": "integer", "minimum": 2, "maximum": 16384},
        "hdr": {"type": "string", "enum": ["auto", "keep", "tonemap"]},
        "container": {"type": "string", "enum": ["mp4", "mkv"], "description": "default: from the destination's extension"},
        "destination": s3_uri("s3://out/videos/a.mp4")}});
    let job_in = json!({"type": "object", "required": ["input", "outputs"], "additionalProperties": false, "properties": {
        "input": s3_uri("s3://in/uploads/a.mov"),
        "outputs": {"type": "array", "items": output, "minItems": 1, "maxItems": 8,
            "description": "each segment is decoded once and encoded once per output; destinations must differ"},
        "segment_seconds": {"type": "number", "minimum": 0.5, "maximum": 600},
        "priority": {"type": "integer", "minimum": 0, "maximum": 9, "default": 5, "description": "higher-priority jobs' segments are queued first"},
        "hardware": {"type": "string", "enum": ["gpu", "cpu", "any"], "default": "any",
            "description": "gpu: NVENC workers only; cpu: software encoders only; any: the GPU queue while GPU workers consume it, else the CPU queue"},
        "callback_url": {"type": "string", "pattern": "^https?://", "maxLength": 2048,
            "description": "a public address, or one the farm's webhook_allow names"},
        "psnr": {"type": "boolean"},
        "stereo_downmix": {"type": "boolean", "default": false,
            "description": "mix every audio track of more than two channels down to stereo; without it 5.1 stays 5.1"}}});
    let states = json!([
        "queued",
        "splitting",
        "encoding",
        "stitching",
        "delivering",
        "done",
        "failed",
        "cancelled"
    ]);
    let job = json!({"type": "object", "required": ["id", "state"], "properties": {
        "id": {"type": "string"},
        "state": {"type": "string", "enum": states},
        "segments_total": {"type": "integer"}, "segments_done": {"type": "integer"}, "percent": {"type": "number"},
        "outputs": {"type": "array", "items": {"type": "string"}}, "encode_fps": {"type": "number"},
        "priority": {"type": "integer"}, "hardware": {"type": "string"},
        "psnr": {"type": "number"}, "timings": {"type": "object"}, "error": error}});
    let upload_in = json!({"type": "object", "additionalProperties": false, "description": "either bucket and key, or filename (then the object is uploads/{tenant}/{uuid}/{sanitised filename} in the upload bucket)", "properties": {
        "bucket": {"type": "string", "example": "in"}, "key": {"type": "string", "example": "uploads/default/a.mov"},
        "filename": {"type": "string", "example": "a.mov"}}});
    let upload = json!({"type": "object", "properties": {
        "url": {"type": "string", "description": "presigned PUT URL; send the file's bytes as the body"},
        "input": {"type": "string", "example": "s3://in/uploads/default/0f3c/a.mov"},
        "expires_in": {"type": "integer", "description": "seconds the URL stays valid", "example": 900}}});
    let pool = json!({"type": "object", "required": ["backlog_segment_seconds", "backlog_segments", "worker_throughput", "desired_workers"], "properties": {
        "backlog_segment_seconds": {"type": "number", "description": "seconds of video in segments not done: waiting in the gate, queued or encoding"},
        "backlog_segments": {"type": "integer"},
        "worker_throughput": {"type": "number", "description": "media seconds one worker encodes per second (measured, else configured)"},
        "desired_workers": {"type": "integer", "description": "workers that drain the backlog in target_drain_seconds; at most one per segment"}}});
    let scaling = json!({"type": "object", "required": ["target_drain_seconds", "pools"], "properties": {
        "target_drain_seconds": {"type": "number"},
        "pools": {"type": "object", "required": ["cpu", "gpu"], "properties": {"cpu": pool, "gpu": pool}}}});
    let resp = |desc: &str, schema: &Value| json!({"description": desc, "content": {"application/json": {"schema": schema}}});
    let text = |desc: &str| json!({"description": desc, "content": {"text/plain": {"schema": {"type": "string"}}}});
    let errors = json!({
        "400": resp("unreadable body, header or query", &error),
        "401": resp("missing or wrong token", &error),
        "403": resp("bucket not allowed", &error),
        "404": resp("no such job", &error),
        "408": resp("the request took longer than the server's request timeout", &error),
        "413": resp("body over 64 KiB", &error),
        "422": resp("invalid job", &error),
        "503": resp("the job database or the store is unavailable: try again", &error)});
    let job_links = json!({
        "GetJob": {"operationId": "getJob", "parameters": {"id": "$response.body#/id"}},
        "CancelJob": {"operationId": "cancelJob", "parameters": {"id": "$response.body#/id"}}});
    let mut accepted = resp("accepted", &job);
    accepted["links"] = job_links;
    json!({
        "openapi": "3.0.3",
        "info": {"title": "tessera dispatcher", "version": env!("CARGO_PKG_VERSION")},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": {
            "/v1/jobs": {
                "post": {"operationId": "submitJob", "summary": "Submit a job", "parameters": [{"name": "Idempotency-Key", "in": "header", "schema": {"type": "string", "minLength": 1, "maxLength": 200}}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": job_in}}},
                    "responses": merge(json!({"202": accepted, "429": resp("the tenant's unfinished jobs are at its quota", &error)}), &errors)},
                "get": {"operationId": "listJobs", "summary": "List jobs", "parameters": [
                    {"name": "state", "in": "query", "schema": {"type": "string", "enum": states}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 4294967295_u64, "description": "at most 500 are returned"}},
                    {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 4294967295_u64}}],
                    "responses": merge(json!({"200": resp("jobs", &json!({"type": "object", "required": ["jobs"], "properties": {"jobs": {"type": "array", "items": job}, "limit": {"type": "integer"}}}))}), &errors)}
            },
            "/v1/jobs/{id}": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "get": {"operationId": "getJob", "summary": "A job's state", "responses": merge(json!({"200": resp("the job", &job)}), &errors)},
                "delete": {"operationId": "cancelJob", "summary": "Cancel a job", "responses": merge(json!({"202": resp("cancelled", &job),
                    "409": resp("the job has ended, or is delivering its outputs and can no longer be cancelled", &error)}), &errors)}
            },
            "/v1/uploads": {
                "post": {"operationId": "createUpload", "summary": "A presigned URL to upload an input to", "requestBody": {"required": true, "content": {"application/json": {"schema": upload_in}}},
                    "responses": merge(errors.clone(), &json!({"201": resp("upload URL", &upload), "422": resp("invalid key or body", &error)}))}
            },
            "/healthz": {"get": {"security": [], "summary": "Liveness", "responses": {"200": text("ok")}}},
            "/readyz": {"get": {"security": [], "summary": "Readiness", "responses": {"200": text("ready"), "503": resp("the job database cannot be used", &error)}}},
            "/metrics": {"get": {"security": [], "summary": "Prometheus metrics", "responses": {"200": text("the text exposition format 0.0.4")}}},
            "/scaling": {"get": {"security": [], "summary": "Workers each pool needs to drain its backlog in the target time (KEDA metrics-api: pools.cpu.desired_workers)",
                "responses": {"200": resp("backlog and desired workers per pool", &scaling)}}}
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
