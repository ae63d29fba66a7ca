//! The API contract (issue 29, item 7): what `/openapi.json` says of a request is what the
//! dispatcher enforces. Every limit is read from the served document, never written here:
//! each number's minimum and maximum, each list's item counts, each key's byte length and
//! each header's length is sent at the bound (accepted) and just past it (refused 400/422).
//! A limit the code adds without the schema, or a schema limit the code does not keep,
//! fails here; so does a numeric, string or list field the schema leaves unbounded.

mod package;
mod schemathesis;

use std::process::Command;

use serde_json::{json, Value};
use tessera_tests::farm::{Farm, TOKEN};

/// A farm whose quota does not get in the way of the many jobs the checks submit.
fn farm() -> Farm {
    Farm::start_with(
        "apicontract",
        0,
        &[("TESSERA_MAX_JOBS_PER_TENANT", "100000")],
    )
}

/// `method path` with `body` and extra headers: the status.
fn send(farm: &Farm, method: &str, path: &str, body: Option<&Value>, headers: &[String]) -> u16 {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "-m",
        "20",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-X",
        method,
    ])
    .args(["-H", &format!("authorization: Bearer {TOKEN}")])
    .args(["-H", "content-type: application/json"]);
    for h in headers {
        cmd.args(["-H", h]);
    }
    if let Some(b) = body {
        cmd.args(["--data-binary", &b.to_string()]);
    }
    let out = cmd
        .arg(format!("{}{path}", farm.api))
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// Whether a status is the server refusing the request as malformed or invalid.
fn refused(status: u16) -> bool {
    status == 400 || status == 422
}

/// The request body schema of `method path`.
fn body_schema<'a>(doc: &'a Value, path: &str, method: &str) -> &'a Value {
    &doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
}

/// Every place in `schema` where a number, a string or a list is left without a bound:
/// numbers need a minimum and a maximum, strings an enum, or a maxLength (and a pattern
/// when they are keys or URIs), lists a maxItems.
fn unbounded(schema: &Value, at: &str, found: &mut Vec<String>) {
    match schema["type"].as_str() {
        Some("integer" | "number")
            if schema["enum"].is_null()
                && (schema["minimum"].is_null() || schema["maximum"].is_null()) =>
        {
            found.push(format!("{at}: a number without minimum and maximum"));
        }
        Some("string") if schema["enum"].is_null() && schema["maxLength"].is_null() => {
            found.push(format!("{at}: a string without maxLength or enum"));
        }
        Some("array") if schema["maxItems"].is_null() => {
            found.push(format!("{at}: a list without maxItems"));
        }
        _ => {}
    }
    if let Some(props) = schema["properties"].as_object() {
        for (name, p) in props {
            unbounded(p, &format!("{at}.{name}"), found);
        }
    }
    if schema["items"].is_object() {
        unbounded(&schema["items"], &format!("{at}[]"), found);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for (i, s) in schema[key].as_array().into_iter().flatten().enumerate() {
            unbounded(s, &format!("{at}.{key}[{i}]"), found);
        }
    }
}

/// The bounds of property `name` of an object schema, tightened by the first branch of
/// each `allOf` entry's `anyOf` and by the first branch of its own `anyOf` (the documents
/// list the branch of the defaults first: hardware "cpu"/"any", codec H.264).
fn bounds(object: &Value, name: &str) -> (Option<f64>, Option<f64>) {
    let mut layers = vec![&object["properties"][name]];
    let firsts = object["allOf"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(std::iter::once(object))
        .filter_map(|s| s["anyOf"].as_array().and_then(|a| a.first()));
    layers.extend(firsts.map(|b| &b["properties"][name]));
    let lo = layers
        .iter()
        .filter_map(|s| s["minimum"].as_f64())
        .reduce(f64::max);
    let hi = layers
        .iter()
        .filter_map(|s| s["maximum"].as_f64())
        .reduce(f64::min);
    (lo, hi)
}

/// Values at and just past a bound: (inside, outside).
fn around(bound: f64, integer: bool, above: bool) -> (Value, Value) {
    let step = if integer {
        1.0
    } else {
        1e-9 * bound.abs().max(1.0)
    };
    let past = if above { bound + step } else { bound - step };
    if integer {
        (json!(bound as i64), json!(past as i64))
    } else {
        (json!(bound), json!(past))
    }
}

/// Sends a body and records whether the server answered as expected: (what, body, accept).
type Expect<'a> = dyn FnMut(String, Value, bool) + 'a;

/// Where a field's value goes: (field name, value) to the request body.
type Put<'a> = &'a dyn Fn(&str, Value) -> Value;

/// Submits a job and records in `wrong` where the answer is not the expected one: 202 when
/// it should be accepted, 400 or 422 when refused.
fn job_check<'a>(
    farm: &'a Farm,
    wrong: &'a mut Vec<String>,
) -> impl FnMut(String, Value, bool) + 'a {
    move |what, body, accept| {
        let status = send(farm, "POST", "/v1/jobs", Some(&body), &[]);
        let ok = if accept {
            status == 202
        } else {
            refused(status)
        };
        if !ok {
            wrong.push(format!("{what}: {status} for {body}"));
        }
    }
}

/// Each number of `object` (a schema) at its bounds (accepted) and one step past (refused),
/// placed into a request by `put`.
fn numbers(object: &Value, put: Put, expect: &mut Expect) {
    for (name, p) in object["properties"].as_object().expect("properties") {
        let integer = p["type"] == "integer";
        if !(integer || p["type"] == "number") {
            continue;
        }
        let (lo, hi) = bounds(object, name);
        for (bound, above) in [(lo, false), (hi, true)] {
            let bound = bound.expect("checked by unbounded");
            let (inside, outside) = around(bound, integer, above);
            for (value, accept) in [(inside, true), (outside, false)] {
                expect(
                    format!("{name} = {value}"),
                    put(name, value.clone()),
                    accept,
                );
            }
        }
    }
}

/// A list of `n` items made by `item`, with the schema's item counts: the least and the most
/// accepted, one fewer and one more refused.
fn counts(list: &Value, what: &str, make: &dyn Fn(usize) -> Value, expect: &mut Expect) {
    let most = list["maxItems"].as_u64().expect("maxItems") as usize;
    let least = list["minItems"].as_u64().unwrap_or(0) as usize;
    expect(format!("{least} {what}"), make(least), true);
    if least > 0 {
        expect(format!("{} {what}", least - 1), make(least - 1), false);
    }
    expect(format!("{most} {what}"), make(most), true);
    expect(format!("{} {what}", most + 1), make(most + 1), false);
}

/// A job that the test farm accepts; `edit` changes it.
fn job(edit: impl FnOnce(&mut Value)) -> Value {
    let mut j = json!({"input": "s3://input/contract/in.mp4",
        "outputs": [{"destination": "s3://output/contract/out.mp4"}]});
    edit(&mut j);
    j
}

#[test]
fn every_limit_of_the_schema_is_what_the_server_enforces() {
    let farm = farm();
    let (status, doc) = farm.http("GET", "/openapi.json", None, None);
    assert_eq!(status, 200);
    let mut found = Vec::new();
    for (path, method) in [("/v1/jobs", "post"), ("/v1/uploads", "post")] {
        unbounded(body_schema(&doc, path, method), path, &mut found);
    }
    assert!(
        found.is_empty(),
        "limits the schema does not state:\n{}",
        found.join("\n")
    );

    let mut wrong = Vec::new();
    let mut check = job_check(&farm, &mut wrong);
    let request = body_schema(&doc, "/v1/jobs", "post");
    let expect: &mut Expect = &mut check;
    // The job's numbers, and a file output's (the first branch: hardware "cpu"/"any"; an
    // output is a file or a package).
    let items = &request["anyOf"][0]["properties"]["outputs"]["items"];
    let output = &items["anyOf"][0];
    numbers(request, &|name, v| job(|j| j[name] = v), expect);
    numbers(
        output,
        &|name, v| job(|j| j["outputs"][0][name] = v),
        expect,
    );
    // A target's numbers, each alone beside its VMAF (the first branch's bounds: H.264).
    let codec_branch = (output["allOf"].as_array().into_iter().flatten())
        .find_map(|entry| entry["anyOf"][0]["properties"].get("target"))
        .expect("the codec branches bound the target's CRFs");
    let target = json!({"properties": output["properties"]["target"]["properties"],
        "anyOf": [codec_branch]});
    numbers(
        &target,
        &|name, v| {
            job(|j| {
                let t = &mut j["outputs"][0]["target"];
                *t = json!({"vmaf": 90});
                t[name] = v;
            })
        },
        expect,
    );
    // Lists: the outputs' counts.
    let list = |n: usize| {
        let outs: Vec<Value> = (0..n)
            .map(|i| json!({"destination": format!("s3://output/contract/out{i}.mp4")}))
            .collect();
        job(|j| j["outputs"] = json!(outs))
    };
    counts(&request["properties"]["outputs"], "outputs", &list, expect);
    // Keys: the most bytes, in ASCII and in 4-byte characters, and one byte more.
    let max_key = request["properties"]["input"]["x-max-key-bytes"]
        .as_u64()
        .expect("x-max-key-bytes") as usize;
    let keyed = |key: String| job(|j| j["input"] = json!(format!("s3://input/{key}")));
    expect(
        "a key at the limit".into(),
        keyed("k".repeat(max_key)),
        true,
    );
    expect(
        "a key past the limit".into(),
        keyed("k".repeat(max_key + 1)),
        false,
    );
    expect(
        "4-byte characters".into(),
        keyed("🎬".repeat(max_key / 4)),
        true,
    );
    expect(
        "one byte more".into(),
        keyed(format!("k{}", "🎬".repeat(max_key / 4))),
        false,
    );
    drop(check);
    assert!(
        wrong.is_empty(),
        "the server and the schema disagree:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn headers_queries_and_uploads_keep_their_stated_limits() {
    let farm = farm();
    let (_, doc) = farm.http("GET", "/openapi.json", None, None);
    let mut wrong = Vec::new();
    // The Idempotency-Key header's length.
    let params = &doc["paths"]["/v1/jobs"]["post"]["parameters"];
    let key = params
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "Idempotency-Key"))
        .expect("Idempotency-Key");
    let most = key["schema"]["maxLength"].as_u64().expect("maxLength") as usize;
    for (n, accept) in [(most, true), (most + 1, false)] {
        let header = format!("idempotency-key: {}", "i".repeat(n));
        let status = send(&farm, "POST", "/v1/jobs", Some(&job(|_| {})), &[header]);
        if (status == 202) != accept || (!accept && !refused(status)) {
            wrong.push(format!("Idempotency-Key of {n}: {status}"));
        }
    }
    // Only visible ASCII: a key with a space or a non-ASCII byte is refused, not dropped.
    for bad in ["two words", "clé"] {
        let header = format!("idempotency-key: {bad}");
        let status = send(&farm, "POST", "/v1/jobs", Some(&job(|_| {})), &[header]);
        if !refused(status) {
            wrong.push(format!("Idempotency-Key {bad:?}: {status}"));
        }
    }
    // The list's query numbers.
    let params = &doc["paths"]["/v1/jobs"]["get"]["parameters"];
    for p in params.as_array().expect("parameters") {
        let Some(hi) = p["schema"]["maximum"].as_u64() else {
            continue;
        };
        let name = p["name"].as_str().expect("name");
        for (value, accept) in [(hi, true), (hi + 1, false)] {
            let status = send(&farm, "GET", &format!("/v1/jobs?{name}={value}"), None, &[]);
            if (status == 200) != accept || (!accept && !refused(status)) {
                wrong.push(format!("{name}={value}: {status}"));
            }
        }
    }
    // An upload's key: the most bytes, and one more.
    let forms = &body_schema(&doc, "/v1/uploads", "post")["oneOf"];
    let key = &forms[0]["properties"]["key"];
    let max_key = key["maxLength"].as_u64().expect("maxLength") as usize;
    for (n, accept) in [(max_key, true), (max_key + 1, false)] {
        let body = json!({"bucket": "input", "key": "u".repeat(n)});
        let status = send(&farm, "POST", "/v1/uploads", Some(&body), &[]);
        if (status == 201) != accept || (!accept && !refused(status)) {
            wrong.push(format!("upload key of {n} bytes: {status}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "the server and the schema disagree:\n{}",
        wrong.join("\n")
    );
}

/// The created job links to the calls that take its id, so a generated client (and
/// schemathesis's stateful phase) reaches `GET` and `DELETE /v1/jobs/{id}` from it.
#[test]
fn the_created_job_links_to_its_state_and_its_cancel() {
    let farm = farm();
    let (_, doc) = farm.http("GET", "/openapi.json", None, None);
    let responses = &doc["paths"]["/v1/jobs"]["post"]["responses"];
    let links = &responses["202"]["links"];
    for (link, op, method) in [
        ("GetJob", "getJob", "get"),
        ("CancelJob", "cancelJob", "delete"),
    ] {
        assert_eq!(links[link]["operationId"], op, "{links}");
        assert_eq!(links[link]["parameters"]["id"], "$response.body#/id");
        assert_eq!(doc["paths"]["/v1/jobs/{id}"][method]["operationId"], op);
    }
    let (status, created) = farm.http(
        "POST",
        "/v1/jobs",
        Some(TOKEN),
        Some(&job(|_| {}).to_string()),
    );
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().expect("id");
    let (status, _) = farm.http("GET", &format!("/v1/jobs/{id}"), Some(TOKEN), None);
    assert_eq!(status, 200);
}
