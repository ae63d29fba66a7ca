//! The OpenAPI document served at `/openapi.json`.
//!
//! Layout: `document` putting the parts together first, then the shared schemas (the error,
//! a job, an upload, the scaling signal) and the response helpers, then the paths by area
//! (jobs, uploads, the operational endpoints). The request bodies, with their limits, are in
//! request.rs (a package output's in package.rs, the `target` object both state in target.rs).

mod package;
mod patterns;
mod request;
mod target;

use serde_json::{json, Value};

pub use request::Contract;
use request::{job_request_schema, upload_request_schema};

/// The API description (OpenAPI 3.0) of a farm: its request bodies state every limit the
/// server enforces, built from the farm's settings (`contract`).
pub fn document(contract: &Contract) -> Value {
    let mut paths = job_paths(contract);
    for more in [upload_paths(contract), operational_paths()] {
        paths = merge(paths, &more);
    }
    json!({
        "openapi": "3.0.3",
        "info": {"title": "tessera dispatcher", "version": env!("CARGO_PKG_VERSION")},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": paths
    })
}

/// The body of every error answer.
fn error_schema() -> Value {
    json!({"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["code", "message"], "properties": {
        "code": {"type": "string", "description": "stable error code (see docs/api.md)"},
        "message": {"type": "string"}}}}})
}

/// A job's states, in the order a job goes through them.
fn job_states() -> Value {
    json!([
        "queued",
        "splitting",
        "encoding",
        "stitching",
        "delivering",
        "done",
        "failed",
        "cancelled"
    ])
}

/// A job as the API shows it.
fn job_schema() -> Value {
    // What a job has not measured yet (or a stored request did not say) is null.
    let maybe = |t: &str| json!({"type": t, "nullable": true});
    json!({"type": "object", "required": ["id", "state"], "properties": {
        "id": {"type": "string"},
        "state": {"type": "string", "enum": job_states()},
        "segments_total": {"type": "integer"}, "segments_done": {"type": "integer"}, "percent": {"type": "number"},
        "input": {"type": "object", "nullable": true, "properties": {"bucket": {"type": "string"}, "key": {"type": "string"}}},
        "outputs": {"type": "array", "items": {"type": "string"}}, "encode_fps": maybe("number"),
        "frames": maybe("integer"), "median_segment_overhead_s": maybe("number"),
        "priority": maybe("integer"), "hardware": maybe("string"), "psnr": maybe("number"),
        "vmaf": {"type": "number", "nullable": true, "description": "mean VMAF of the (first) output against the source (vmaf_v0.6.1, or its 4K model above 1440 lines), when the job asked for quality (`psnr`); the report has it pooled per segment too"},
        "targets": targets_schema(),
        "warnings": {"type": "array", "items": {"type": "string"}, "description": "what the job repaired or left out of the source (audio gaps filled, pictures that cannot be decoded, streams not carried); empty until the job is done"},
        "timings": {"type": "object", "properties": {"created_at": {"type": "integer"},
            "updated_at": {"type": "integer"}, "wall_s": maybe("number")}},
        "error": {"type": "object", "nullable": true, "required": ["code"], "properties": {
            "code": {"type": "string", "description": "stable error code (see docs/api.md)"},
            "message": maybe("string")}}}})
}

/// The view's `targets`: each searched output's account, segment by segment.
fn targets_schema() -> Value {
    let maybe = |t: &str| json!({"type": t, "nullable": true});
    json!({"type": "array", "description": "each output with a target quality, once done: per segment the rate factor (CRF, or NVENC cq) its search kept, the VMAF the search measured, and the probes it ran; vmaf_error is the largest gap between a segment's searched VMAF and its VMAF in the stitched output (when the job asked for quality)",
            "items": {"type": "object", "properties": {"destination": {"type": "string"},
                "vmaf_error": maybe("number"),
                "segments": {"type": "array", "items": {"type": "object", "nullable": true, "properties": {
                    "target": {"type": "number"}, "rate_factor": {"type": "number"}, "vmaf": {"type": "number"},
                    "probes": {"type": "array", "items": {"type": "object", "properties": {
                        "rate_factor": {"type": "number"}, "vmaf": {"type": "number"}}}}}}}}}})
}

/// The answer of `POST /v1/uploads`.
fn upload_schema() -> Value {
    json!({"type": "object", "properties": {
        "url": {"type": "string", "description": "presigned PUT URL; send the file's bytes as the body"},
        "input": {"type": "string", "example": "s3://in/uploads/default/0f3c/a.mov"},
        "expires_in": {"type": "integer", "description": "seconds the URL stays valid", "example": 900},
        "size": {"type": "integer", "description": "the length signed into the URL, when the request gave one"}}})
}

/// The answer of `GET /scaling`: the backlog and desired workers of each pool.
fn scaling_schema() -> Value {
    let pool = json!({"type": "object", "required": ["backlog_segment_seconds", "backlog_segments", "worker_throughput", "desired_workers"], "properties": {
        "backlog_segment_seconds": {"type": "number", "description": "seconds of video in segments not done: waiting in the gate, queued or encoding"},
        "backlog_segments": {"type": "integer"},
        "worker_throughput": {"type": "number", "description": "media seconds one worker encodes per second (measured, else configured)"},
        "desired_workers": {"type": "integer", "description": "workers that drain the backlog in target_drain_seconds; at most one per segment"}}});
    json!({"type": "object", "required": ["target_drain_seconds", "pools"], "properties": {
        "target_drain_seconds": {"type": "number"},
        "pools": {"type": "object", "required": ["cpu", "gpu"], "properties": {"cpu": pool, "gpu": pool}}}})
}

/// A JSON response.
fn resp(desc: &str, schema: &Value) -> Value {
    json!({"description": desc, "content": {"application/json": {"schema": schema}}})
}

/// A plain-text response.
fn text(desc: &str) -> Value {
    json!({"description": desc, "content": {"text/plain": {"schema": {"type": "string"}}}})
}

/// The error answers every API call may give.
fn error_responses() -> Value {
    let error = error_schema();
    json!({
        "400": resp("unreadable body, header or query", &error),
        "401": resp("missing or wrong token", &error),
        "403": resp("a bucket or an object the tenant may not use", &error),
        "404": resp("no such job", &error),
        "408": resp("the request took longer than the server's request timeout", &error),
        "413": resp("body over 64 KiB", &error),
        "422": resp("invalid job", &error),
        "503": resp("the job database or the store is unavailable: try again", &error)})
}

/// `/v1/jobs` and `/v1/jobs/{id}`: submit, list, show and cancel jobs.
fn job_paths(contract: &Contract) -> Value {
    let (error, errors, job, states) = (
        error_schema(),
        error_responses(),
        job_schema(),
        job_states(),
    );
    let mut accepted = resp("accepted", &job);
    accepted["links"] = json!({
        "GetJob": {"operationId": "getJob", "parameters": {"id": "$response.body#/id"}},
        "CancelJob": {"operationId": "cancelJob", "parameters": {"id": "$response.body#/id"}}});
    json!({
        "/v1/jobs": {
            "post": {"operationId": "submitJob", "summary": "Submit a job", "parameters": [{"name": "Idempotency-Key", "in": "header", "schema": {"type": "string", "pattern": "^[!-~]+$", "minLength": 1, "maxLength": 200},
                    "description": "1-200 visible ASCII characters: a retried request with the same key is answered with the job it made"}],
                "requestBody": {"required": true, "content": {"application/json": {"schema": job_request_schema(contract)}}},
                "responses": merge(json!({"202": accepted, "429": resp("the tenant's unfinished jobs are at its quota", &error),
                    "409": resp("the Idempotency-Key was used for a different request", &error)}), &errors)},
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
        }
    })
}

/// `/v1/uploads`: a presigned URL to upload an input to.
fn upload_paths(contract: &Contract) -> Value {
    let error = error_schema();
    json!({
        "/v1/uploads": {
            "post": {"operationId": "createUpload", "summary": "A presigned URL to upload an input to", "requestBody": {"required": true, "content": {"application/json": {"schema": upload_request_schema(contract)}}},
                "responses": merge(error_responses(), &json!({"201": resp("upload URL", &upload_schema()), "422": resp("invalid key or body", &error),
                    "403": resp("a bucket this farm may not use (bucket_not_allowed), or a key outside the tenant's uploads/{tenant}/ (object_not_allowed, naming the object and the tenant)", &error),
                    "429": resp("the tenant was given as many upload URLs in the last 15 minutes as the farm allows", &error)}))}
        }
    })
}

/// The unauthenticated operational endpoints: health, readiness, metrics, scaling.
fn operational_paths() -> Value {
    let error = error_schema();
    json!({
        "/healthz": {"get": {"security": [], "summary": "Liveness", "responses": {"200": text("ok")}}},
        "/readyz": {"get": {"security": [], "summary": "Readiness", "responses": {"200": text("ready"), "503": resp("the job database cannot be used", &error)}}},
        "/metrics": {"get": {"security": [], "summary": "Prometheus metrics", "responses": {"200": text("the text exposition format 0.0.4")}}},
        "/scaling": {"get": {"security": [], "summary": "Workers each pool needs to drain its backlog in the target time (KEDA metrics-api: pools.cpu.desired_workers)",
            "responses": {"200": resp("backlog and desired workers per pool", &scaling_schema())}}}
    })
}

/// `a` with `b`'s keys added (replacing `a`'s where both have one).
fn merge(mut a: Value, b: &Value) -> Value {
    if let (Some(a), Some(b)) = (a.as_object_mut(), b.as_object()) {
        for (k, v) in b {
            a.insert(k.clone(), v.clone());
        }
    }
    a
}
