//! A package output's limits (issue 29): `/openapi.json` describes `package` (HLS, DASH or
//! CMAF) with every limit the server keeps, read here from the served document: each number
//! of the spec, a rung, the audio setting, the thumbnails, the poster and the sprite at its
//! bounds and one step past, each list's counts, each enum's values, the prefix's bytes, and
//! the rules the document states as branches (ts for HLS only, crf or bitrate, a profile
//! per codec, what thumbnails need). A request built from the document's examples is
//! accepted.

use serde_json::{json, Value};

use super::{body_schema, counts, farm, job, job_check, numbers, Expect, Put};

/// The package output of the first branch (hardware "cpu"/"any"): the second kind of output.
fn package_output(doc: &Value) -> &Value {
    let request = body_schema(doc, "/v1/jobs", "post");
    let output = &request["anyOf"][0]["properties"]["outputs"]["items"]["anyOf"][1];
    assert_eq!(
        output["required"],
        json!(["package", "destination"]),
        "{output}"
    );
    output
}

/// A job whose only output is package `spec` (its destination a prefix of the test farm).
fn packaged(spec: Value) -> Value {
    job(|j| j["outputs"] = json!([{"package": spec, "destination": "s3://output/contract/pkg/"}]))
}

/// A package of one rung `r`.
fn ladder_of(r: Value) -> Value {
    spec(|s| s["ladder"] = json!([r]))
}

/// A package with thumbnails `t`.
fn thumbs(t: Value) -> Value {
    spec(|s| s["thumbnails"] = t)
}

/// A package the test farm accepts, with `edit` applied.
fn spec(edit: impl FnOnce(&mut Value)) -> Value {
    let mut s = json!({"format": "hls", "ladder": [{"height": 360, "crf": 23}]});
    edit(&mut s);
    s
}

/// The values of an enum property: the first branch's (the default's) where the object
/// narrows it there, else the property's own, or those of its alternatives.
fn listed(object: &Value, name: &str) -> Vec<Value> {
    let p = &object["properties"][name];
    let first = object["allOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["anyOf"].as_array().and_then(|a| a.first()))
        .find_map(|b| b["properties"][name]["enum"].as_array());
    let own = p["enum"].as_array().cloned().unwrap_or_else(|| {
        let alternatives = p["anyOf"].as_array().into_iter().flatten();
        alternatives
            .filter_map(|a| a["enum"].as_array())
            .flatten()
            .cloned()
            .collect()
    });
    first.cloned().unwrap_or(own)
}

/// Each listed value of each enum property of `object` accepted, a word not listed refused.
fn enums(object: &Value, put: Put, expect: &mut Expect) {
    for name in object["properties"].as_object().expect("properties").keys() {
        let values = listed(object, name);
        if values.is_empty() {
            continue;
        }
        for v in values {
            expect(format!("{name} = {v}"), put(name, v.clone()), true);
        }
        let other = json!("not-listed");
        expect(format!("{name} = {other}"), put(name, other.clone()), false);
    }
}

/// Each number and enum of the spec, a rung (crf or bitrate, not both), the audio setting,
/// the thumbnails (with an interval and a height), the poster and the sprite; each list's
/// counts: rungs, audio settings, thumbnail heights.
fn fields(package: &Value, expect: &mut Expect) {
    let ladder = &package["properties"]["ladder"]["anyOf"][1];
    let audio = &package["properties"]["audio"];
    let thumbnails = &package["properties"]["thumbnails"];
    let heights = &thumbnails["properties"]["heights"];
    let in_spec = |name: &str, v: Value| packaged(spec(|s| s[name] = v));
    let in_rung = |name: &str, v: Value| {
        let mut r = match name {
            "bitrate" => json!({"height": 360}),
            _ => json!({"height": 360, "crf": 23}),
        };
        r[name] = v;
        packaged(ladder_of(r))
    };
    let in_audio = |name: &str, v: Value| packaged(spec(|s| s["audio"] = json!([{name: v}])));
    let in_thumbnails = |name: &str, v: Value| {
        let mut t = json!({"interval": 10, "heights": [90]});
        t[name] = v;
        packaged(thumbs(t))
    };
    let in_poster = |name: &str, v: Value| packaged(thumbs(json!({"poster": {name: v}})));
    let in_sprite =
        |name: &str, v: Value| packaged(thumbs(json!({"interval": 10, "sprite": {name: v}})));
    let places: [(&Value, Put); 6] = [
        (package, &in_spec),
        (&ladder["items"], &in_rung),
        (&audio["items"], &in_audio),
        (thumbnails, &in_thumbnails),
        (&thumbnails["properties"]["poster"], &in_poster),
        (&thumbnails["properties"]["sprite"], &in_sprite),
    ];
    for (object, put) in places {
        numbers(object, put, expect);
        enums(object, put, expect);
    }
    // A thumbnail height is a number in a list: its bounds are the items'.
    let one_height = |v: Value| packaged(thumbs(json!({"interval": 10, "heights": [v]})));
    let items = json!({"properties": {"height": heights["items"]}});
    numbers(&items, &|_, v| one_height(v), expect);
    let rung = json!({"height": 360, "crf": 23});
    let rungs = |n: usize| packaged(spec(|s| s["ladder"] = json!(vec![rung.clone(); n])));
    counts(ladder, "rungs", &rungs, expect);
    let audios = |n: usize| packaged(spec(|s| s["audio"] = json!(vec![json!({}); n])));
    counts(audio, "audio settings", &audios, expect);
    let sizes = |n: usize| {
        packaged(thumbs(
            json!({"interval": 10, "heights": vec![90; n], "sprite": {}}),
        ))
    };
    counts(heights, "thumbnail heights", &sizes, expect);
}

/// The prefix: the most bytes, in ASCII and in 4-byte characters, and one byte more; the
/// bucket alone; a destination that is not a folder or whose parts a key may not have.
fn prefixes(destination: &Value, expect: &mut Expect) {
    let most = destination["x-max-prefix-bytes"]
        .as_u64()
        .expect("x-max-prefix-bytes") as usize;
    let at = |prefix: String| {
        let out = json!({"package": spec(|_| {}), "destination": format!("s3://output/{prefix}")});
        job(|j| j["outputs"] = json!([out]))
    };
    let wide = "🎬".repeat((most - 1) / 4);
    for (what, prefix, accept) in [
        (
            "a prefix at the limit",
            format!("{}/", "k".repeat(most - 1)),
            true,
        ),
        (
            "a prefix past the limit",
            format!("{}/", "k".repeat(most)),
            false,
        ),
        ("a prefix of 4-byte characters", format!("{wide}/"), true),
        ("one byte more", format!("k{wide}/"), false),
        ("the bucket itself", String::new(), true),
        ("not a folder", "contract/pkg".into(), false),
        ("an empty part", "contract//pkg/".into(), false),
        ("a '..' part", "contract/../pkg/".into(), false),
    ] {
        expect(what.into(), at(prefix), accept);
    }
}

/// The rules the schema states as branches (ts for HLS only, crf or bitrate or a target, a
/// target never with a bitrate, a profile and
/// a crf ceiling per codec, what thumbnails need, no unknown field), and those its
/// descriptions say (maxrate not below bitrate, one package, 8 encodes per segment, apart
/// from the watched prefixes).
fn rules(expect: &mut Expect) {
    let ts = |format: &str| {
        spec(|s| {
            s.as_object_mut().unwrap().extend([
                ("format".to_string(), json!(format)),
                ("segment_type".to_string(), json!("ts")),
            ])
        })
    };
    for (what, s, accept) in [
        ("ts for hls", ts("hls"), true),
        ("ts for dash", ts("dash"), false),
        ("ts for cmaf", ts("cmaf"), false),
        (
            "the auto ladder",
            spec(|s| s["ladder"] = json!("auto")),
            true,
        ),
        (
            "crf and bitrate",
            ladder_of(json!({"height": 360, "crf": 23, "bitrate": 900000})),
            false,
        ),
        (
            "neither crf nor bitrate",
            ladder_of(json!({"height": 360})),
            false,
        ),
        (
            "maxrate below bitrate",
            ladder_of(json!({"height": 360, "bitrate": 900000, "maxrate": 800000})),
            false,
        ),
        (
            "main10 for h264",
            ladder_of(json!({"height": 360, "crf": 23, "profile": "main10"})),
            false,
        ),
        (
            "main10 for hevc",
            ladder_of(json!({"height": 360, "crf": 23, "codec": "hevc", "profile": "main10"})),
            true,
        ),
        (
            "crf 63 for av1",
            ladder_of(json!({"height": 360, "crf": 63, "codec": "av1"})),
            true,
        ),
        (
            "crf 52 for hevc",
            ladder_of(json!({"height": 360, "crf": 52, "codec": "hevc"})),
            false,
        ),
        (
            "a rung with only a target",
            ladder_of(json!({"height": 360, "target": {"vmaf": 90}})),
            true,
        ),
        (
            "a rung's target with a bitrate",
            ladder_of(json!({"height": 360, "bitrate": 900000, "target": {"vmaf": 90}})),
            false,
        ),
        (
            "a bare rung under the package's target",
            spec(|s| {
                s["target"] = json!({"vmaf": 90});
                s["ladder"] = json!([{"height": 360}]);
            }),
            true,
        ),
        (
            "a package target's max_crf past 51",
            spec(|s| s["target"] = json!({"vmaf": 90, "max_crf": 52})),
            false,
        ),
        (
            "a rung's unknown field",
            ladder_of(json!({"height": 360, "crf": 23, "gop": 2})),
            false,
        ),
        ("an interval alone", thumbs(json!({"interval": 10})), false),
        (
            "heights without an interval",
            thumbs(json!({"heights": [90], "poster": {}})),
            false,
        ),
        (
            "a sprite without an interval",
            thumbs(json!({"sprite": {}, "poster": {}})),
            false,
        ),
        ("no thumbnail asked", thumbs(json!({})), false),
        ("a poster alone", thumbs(json!({"poster": {}})), true),
        (
            "an unknown package field",
            spec(|s| s["segment_secs"] = json!(4)),
            false,
        ),
    ] {
        expect(what.into(), packaged(s), accept);
    }
    let d = "s3://output/contract/pkg/";
    let pkg =
        |prefix: &str| json!({"package": spec(|_| {}), "destination": format!("{d}{prefix}/")});
    let file = json!({"destination": "s3://output/contract/file.mp4"});
    let of = |n: usize| spec(|s| s["ladder"] = json!(vec![json!({"height": 360, "crf": 23}); n]));
    for (what, outputs, accept) in [
        ("two packages", json!([pkg("a"), pkg("b")]), false),
        (
            "a file and 7 rungs",
            json!([file, {"package": of(7), "destination": d}]),
            true,
        ),
        (
            "a file and 8 rungs",
            json!([file, {"package": of(8), "destination": d}]),
            false,
        ),
        (
            "a file setting on a package",
            json!([{"package": of(1), "destination": d, "crf": 20}]),
            false,
        ),
        // The test farm watches input/incoming/: no output inside it, nor a folder holding it.
        (
            "a package holding the watched prefix",
            json!([{"package": of(1), "destination": "s3://input/"}]),
            false,
        ),
        (
            "a package in the watched prefix",
            json!([{"package": of(1), "destination": "s3://input/incoming/p/"}]),
            false,
        ),
    ] {
        expect(what.into(), job(|j| j["outputs"] = outputs), accept);
    }
}

#[test]
fn a_package_keeps_the_limits_the_schema_states() {
    let farm = farm();
    let (_, doc) = farm.http("GET", "/openapi.json", None, None);
    let output = package_output(&doc);
    let package = &output["properties"]["package"];
    let destination = &output["properties"]["destination"];
    let mut wrong = Vec::new();
    let mut check = job_check(&farm, &mut wrong);
    let expect: &mut Expect = &mut check;
    fields(package, expect);
    prefixes(destination, expect);
    rules(expect);
    // A request built from the document's examples.
    let example = package["example"].clone();
    assert!(example.is_object(), "package has no example: {package}");
    let from_examples = json!({"package": example, "destination": destination["example"]});
    expect(
        "the examples".into(),
        job(|j| j["outputs"] = json!([from_examples])),
        true,
    );
    let thumbnails = &package["properties"]["thumbnails"];
    let parts = spec(|s| {
        s["ladder"] = json!([package["properties"]["ladder"]["anyOf"][1]["items"]["example"]]);
        s["thumbnails"] = thumbnails["example"].clone();
    });
    expect(
        "the rung's and thumbnails' examples".into(),
        packaged(parts),
        true,
    );
    drop(check);
    assert!(
        wrong.is_empty(),
        "the server and the schema disagree on packages:\n{}",
        wrong.join("\n")
    );
}
