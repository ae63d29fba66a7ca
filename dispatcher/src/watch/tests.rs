//! The watches' flags, file tables, profiles and tenants.

use super::*;

fn buckets() -> Vec<String> {
    vec!["input".into(), "output".into()]
}

fn open() -> TenantScopes {
    TenantScopes::parse(&[], &buckets(), "input").unwrap()
}

#[test]
fn a_watch_belongs_to_a_tenant_whose_scopes_it_keeps() {
    let w = Watch::parse_flag("input/in/=output/out/").unwrap();
    assert_eq!(w.tenant, "watch");
    let acme = Watch::parse_flag("acme:input/uploads/acme/=output/acme/done/").unwrap();
    assert_eq!(
        (
            acme.tenant.as_str(),
            acme.bucket.as_str(),
            acme.prefix.as_str()
        ),
        ("acme", "input", "uploads/acme/")
    );
    assert!(resolve(&[acme.to_string()], None, &buckets(), &open()).is_ok());
    // A watch of acme writing outside acme's scopes is refused at start-up.
    let err = resolve(
        &["acme:input/in/=output/o/".into()],
        None,
        &buckets(),
        &open(),
    )
    .unwrap_err();
    assert!(err.contains("outside what tenant 'acme'"), "{err}");
    let err = resolve(
        &["a b:input/in/=output/o/".into()],
        None,
        &buckets(),
        &open(),
    )
    .unwrap_err();
    assert!(err.contains("tenant name"), "{err}");
}

#[test]
fn flags_destinations_and_checks() {
    let w = Watch::parse_flag("input/incoming/=output/processed/").unwrap();
    assert_eq!(
        (w.bucket.as_str(), w.prefix.as_str()),
        ("input", "incoming/")
    );
    assert_eq!(
        w.destination("incoming/clip.mov", Container::Mp4),
        "s3://output/processed/clip.mp4"
    );
    assert_eq!(
        w.destination("incoming/a/b.c/my clip", Container::Mkv),
        "s3://output/processed/a/b.c/my clip.mkv"
    );
    let whole = Watch::parse_flag("input=output").unwrap();
    assert_eq!(whole.prefix, "");
    assert_eq!(
        whole.destination("x/.hidden", Container::Mp4),
        "s3://output/x/.hidden.mp4"
    );
    assert!(w.covers("input", "incoming/x.mp4"));
    assert!(!w.covers("input", "other/x.mp4") && !w.covers("output", "incoming/x.mp4"));
    assert!(resolve(
        &["input/incoming/=output/processed/".into()],
        None,
        &buckets(),
        &open()
    )
    .is_ok());
    let none = open();
    let err = |flag: &str| resolve(&[flag.into()], None, &buckets(), &none).unwrap_err();
    assert!(err("input/incoming/").contains("expected [tenant:]bucket/prefix="));
    assert!(err("private/in/=output/o/").contains("'private' is not one"));
    assert!(err("input/in/=input/in/out/").contains("transcoded again"));
    assert!(err("input/=input/out/").contains("transcoded again"));
    assert!(err("input/a//b=output/").contains("invalid object key"));
    // A different prefix of the same bucket is fine.
    assert!(resolve(&["input/in/=input/out/".into()], None, &buckets(), &none).is_ok());
}

#[test]
fn file_tables_and_profiles() {
    let text = r#"
        [[watch]]
        bucket = "input"
        prefix = "hd/"
        output_bucket = "output"
        output_prefix = "hd"
        codec = "hevc"
        crf = 24
        height = 720
        container = "mkv"
        [[watch]]
        bucket = "input"
        output_bucket = "output"
    "#;
    #[derive(Deserialize)]
    struct T {
        watch: Vec<WatchFile>,
    }
    let t: T = toml::from_str(text).unwrap();
    let ws = resolve(&[], Some(t.watch), &buckets(), &open()).unwrap();
    assert_eq!(ws[0].codec, VideoCodec::Hevc);
    assert_eq!(ws[0].output("hd/a.mp4").destination, "s3://output/hd/a.mkv");
    assert_eq!(
        (ws[1].codec, ws[1].container),
        (VideoCodec::H264, Container::Mp4)
    );
    let bad: T = toml::from_str(
        "[[watch]]\nbucket = \"input\"\noutput_bucket = \"output\"\npreset = \"warp\"",
    )
    .unwrap();
    assert!(resolve(&[], Some(bad.watch), &buckets(), &open()).is_err());
    assert!(toml::from_str::<T>("[[watch]]\nbucket = \"input\"\nbukket = 1").is_err());
    let pkg: T = toml::from_str(
        "[[watch]]\nbucket = \"input\"\nprefix = \"in/\"\noutput_bucket = \"output\"\n\
         output_prefix = \"hls\"\n[watch.package]\nformat = \"hls\"\nsegment_seconds = 4\n",
    )
    .unwrap();
    let ws = resolve(&[], Some(pkg.watch), &buckets(), &open()).unwrap();
    let out = ws[0].output("in/shows/ep1.mov");
    assert_eq!(out.destination, "s3://output/hls/shows/ep1/");
    assert_eq!(out.package.map(|p| p.segment_seconds), Some(4.0));
    let mixed: T = toml::from_str(
        "[[watch]]\nbucket = \"input\"\noutput_bucket = \"output\"\ncrf = 20\n\
         [watch.package]\nformat = \"dash\"\n",
    )
    .unwrap();
    let err = resolve(&[], Some(mixed.watch), &buckets(), &open()).unwrap_err();
    assert!(err.contains("crf does not apply to a package"), "{err}");
    assert_eq!(events_queue(Some(" ".into())).unwrap(), None);
    assert!(events_queue(Some("amq.x".into())).is_err());
}
