//! Scope matching at its boundaries, the defaults, and a plan's check.

use super::*;
use tessera_model::api::ApiJob;

fn buckets() -> Vec<String> {
    vec!["input".into(), "output".into()]
}

fn scopes(entries: &[&str]) -> TenantScopes {
    let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
    TenantScopes::parse(&entries, &buckets(), "input").unwrap()
}

#[test]
fn prefixes_match_whole_folders_and_literal_keys() {
    let acme = Prefix::parse("output/acme").unwrap();
    assert_eq!(acme.prefix, "acme/", "a scope is always a folder");
    assert_eq!(Prefix::parse("output/acme/").unwrap(), acme);
    assert_eq!(Prefix::parse("output/acme///").unwrap(), acme);
    assert!(acme.covers("output", "acme/a.mp4"));
    assert!(acme.covers("output", "acme/deep/er/a.mp4"));
    // Prefix boundaries: another tenant whose name starts with ours, the folder itself.
    assert!(!acme.covers("output", "acme2/a.mp4"));
    assert!(!acme.covers("output", "acme"));
    assert!(!acme.covers("output", "acme.mp4"));
    // Another bucket, keys S3Uri refuses, and literal percent-encoding.
    assert!(!acme.covers("input", "acme/a.mp4"));
    assert!(!acme.covers("output", "acme/../beta/a.mp4"));
    assert!(!acme.covers("output", "acme//a.mp4"));
    assert!(!acme.covers("output", ""));
    assert!(!acme.covers("output", "acme%2Fa.mp4"));
    assert!(!acme.covers("output", "acme%2F..%2Fbeta/a.mp4"));
    assert!(Prefix::parse("output/acme%2F")
        .unwrap()
        .covers("output", "acme%2F/a"));
    // The whole bucket.
    let whole = Prefix::parse("output").unwrap();
    assert_eq!(whole.prefix, "");
    assert!(whole.covers("output", "x.mp4") && !whole.covers("input", "x.mp4"));
    // Folders: covered when inside, overlapping when either holds the other.
    assert!(acme.covers_folder("output", "acme/pkg/"));
    assert!(!acme.covers_folder("output", "") && !acme.covers_folder("output", "acme2/"));
    assert!(acme.overlaps("output", "") && acme.overlaps("output", "acme/x/"));
    assert!(!acme.overlaps("output", "acme2/") && !acme.overlaps("input", "acme/"));
    for bad in [
        "output/../x",
        "output/a/../b",
        "output/a//b",
        "output/./a",
        "Bad_Bucket/x",
        "",
        "output//",
        "output/\u{0}",
    ] {
        assert!(Prefix::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn defaults_configured_scopes_and_admins() {
    let s = scopes(&["acme=rw:output/acme-prod/", "acme=r:input/library"]);
    // A configured tenant: its scopes, and its uploads to read.
    let acme = s.grant("acme", false);
    let names = |v: &[Prefix]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    assert_eq!(
        names(&acme.read),
        [
            "s3://output/acme-prod/",
            "s3://input/library/",
            "s3://input/uploads/acme/"
        ]
    );
    assert_eq!(names(&acme.write), ["s3://output/acme-prod/"]);
    // A tenant without configured scopes: its folder of every allowed bucket.
    let beta = s.grant("beta", false);
    assert_eq!(
        names(&beta.read),
        [
            "s3://input/beta/",
            "s3://output/beta/",
            "s3://input/uploads/beta/"
        ]
    );
    assert_eq!(
        names(&beta.write),
        ["s3://input/beta/", "s3://output/beta/"]
    );
    // An admin (the bare token's `default`): every allowed bucket whole, configured or not.
    let admin = s.grant("acme", true);
    assert_eq!(names(&admin.write), ["s3://input/", "s3://output/"]);
    assert!(s.is_configured("acme") && !s.is_configured("beta"));
    let err = |e: &str| TenantScopes::parse(&[e.to_string()], &buckets(), "input").unwrap_err();
    assert!(err("acme=rw:private/x/").contains("not one of the allowed buckets"));
    assert!(err("acme:rw:output/x/").contains("expected tenant="));
    assert!(err("acme=x:output/x/").contains("r, w or rw"));
    assert!(err("a b=rw:output/x/").contains("tenant name"));
    assert!(err("acme=rw:output/a/../b").contains("invalid object key"));
    assert!(TenantScopes::parse(&[" ".into()], &buckets(), "input").is_ok());
}

fn plan(input: &str, outputs: &[&str]) -> crate::job_plan::JobPlan {
    let outputs: Vec<serde_json::Value> = outputs
        .iter()
        .map(|d| match d.ends_with('/') {
            true => serde_json::json!({"destination": d, "package": {"format": "hls"}}),
            false => serde_json::json!({"destination": d}),
        })
        .collect();
    let job: ApiJob =
        serde_json::from_value(serde_json::json!({"input": input, "outputs": outputs})).unwrap();
    crate::jobspec::validate(&job, &buckets(), 10.0, &Default::default()).unwrap()
}

#[test]
fn a_plan_is_checked_object_by_object() {
    let s = scopes(&[]);
    let beta = s.grant("beta", false);
    let watched = vec![Prefix::parse("input/incoming/").unwrap()];
    let check = |input: &str, outputs: &[&str]| {
        check_plan(&plan(input, outputs), &beta, &watched).map_err(|(code, msg)| {
            assert!(msg.contains("'beta'") || msg.contains("watched"), "{msg}");
            (code.as_str().to_string(), msg)
        })
    };
    assert!(check(
        "s3://input/uploads/beta/1/a.mp4",
        &["s3://output/beta/a.mp4"]
    )
    .is_ok());
    assert!(check("s3://output/beta/a.mp4", &["s3://output/beta/pkg/"]).is_ok());
    // Every object of another tenant's, in every place of a job: refused, naming the object.
    let acme = [
        "s3://input/uploads/acme/1/a.mp4",
        "s3://input/acme/a.mp4",
        "s3://output/acme/a.mp4",
        "s3://output/acme2/a.mp4",
        "s3://output/a.mp4",
    ];
    for theirs in acme {
        let (code, msg) = check(theirs, &["s3://output/beta/a.mp4"]).unwrap_err();
        assert_eq!(code, "object_not_allowed");
        assert!(msg.contains(theirs) && msg.starts_with("input"), "{msg}");
        let (code, msg) =
            check("s3://input/beta/a.mp4", &["s3://output/beta/a.mp4", theirs]).unwrap_err();
        assert_eq!(code, "object_not_allowed");
        assert!(msg.contains(theirs) && msg.contains("outputs[1]"), "{msg}");
    }
    for folder in ["s3://output/acme/p/", "s3://output/", "s3://output/beta2/"] {
        let (code, msg) = check("s3://input/beta/a.mp4", &[folder]).unwrap_err();
        assert_eq!(code, "object_not_allowed", "{msg}");
    }
    // The tenant's uploads are read-only to its jobs.
    let (code, _) = check("s3://input/beta/a.mp4", &["s3://input/uploads/beta/x.mp4"]).unwrap_err();
    assert_eq!(code, "object_not_allowed");
    // Writing into a watched prefix: refused for an admin too.
    let admin = s.grant("default", true);
    let into = |outputs: &[&str]| {
        check_plan(&plan("s3://input/a.mp4", outputs), &admin, &watched).unwrap_err()
    };
    assert_eq!(
        into(&["s3://input/incoming/x.mp4"]).0.as_str(),
        "invalid_job"
    );
    assert_eq!(into(&["s3://input/"]).0.as_str(), "invalid_job");
    assert!(check_plan(
        &plan("s3://input/a.mp4", &["s3://input/done/x.mp4"]),
        &admin,
        &watched
    )
    .is_ok());
}
