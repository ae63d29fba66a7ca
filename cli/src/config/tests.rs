//! The transcode configuration's layering and refusals.

use super::*;

fn args(extra: &[&str]) -> TranscodeArgs {
    let mut v = vec!["tessera", "transcode", "in.mp4", "-o", "out.mp4"];
    v.extend_from_slice(extra);
    match Cli::try_parse_from(v).unwrap().command {
        Command::Transcode(a) => *a,
        other => panic!("{other:?}"),
    }
}

#[test]
fn defaults_file_and_flags_layer() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.toml");
    std::fs::write(
        &file,
        "[transcode]\ncodec = \"hevc\"\nworkers = 3\npreset = \"fast\"\n[client]\nserver = \"http://farm:8080\"\n",
    )
    .unwrap();
    let c = TranscodeConfig::resolve(args(&[]), Some(&file)).unwrap();
    assert_eq!(c.rendition.codec, VideoCodec::Hevc);
    assert_eq!(c.rendition.rate, RateControl::Crf(28.0));
    assert_eq!(c.workers, 3);
    let c = TranscodeConfig::resolve(args(&["--workers", "2", "--bitrate", "2.5M"]), Some(&file))
        .unwrap();
    assert_eq!(c.workers, 2);
    assert_eq!(c.rendition.rate, RateControl::Bitrate(2_500_000));
    let c = TranscodeConfig::resolve(args(&[]), None).unwrap();
    assert_eq!(
        (c.rendition.codec, c.rendition.preset.as_str()),
        (VideoCodec::H264, "medium")
    );
}

#[test]
fn package_subtitles_layer_like_the_rest() {
    use tessera_model::package::SubtitleFormat;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.toml");
    std::fs::write(&file, "[transcode]\npackage_subtitles = \"none\"\n").unwrap();
    let pkg = dir.path().join("pkg").display().to_string();
    let subtitles = |extra: &[&str], file: Option<&Path>| {
        let c = TranscodeConfig::resolve(args(extra), file).unwrap();
        c.package.unwrap().0.subtitles
    };
    assert_eq!(subtitles(&["--hls", &pkg], None), SubtitleFormat::Webvtt);
    assert_eq!(
        subtitles(&["--hls", &pkg], Some(&file)),
        SubtitleFormat::None
    );
    assert_eq!(
        subtitles(
            &["--hls", &pkg, "--package-subtitles", "webvtt"],
            Some(&file)
        ),
        SubtitleFormat::Webvtt
    );
    std::fs::write(&file, "[transcode]\npackage_subtitles = \"srt\"\n").unwrap();
    assert!(TranscodeConfig::resolve(args(&["--hls", &pkg]), Some(&file)).is_err());
}

#[test]
fn bad_values_are_refused_with_reasons() {
    let e = TranscodeConfig::resolve(args(&["--preset", "warp"]), None).unwrap_err();
    assert!(e.to_string().contains("warp"));
    let mut a = args(&[]);
    a.output = Some("x.avi".into());
    let e = TranscodeConfig::resolve(a, None).unwrap_err();
    assert!(e.to_string().contains("x.avi"));
    assert!(parse_bitrate("fast").is_err());
    assert_eq!(parse_bitrate("800k").unwrap(), 800_000);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.toml");
    std::fs::write(&file, "[transcode]\ncodek = 1\n").unwrap();
    assert!(TranscodeConfig::resolve(args(&[]), Some(&file)).is_err());
}

#[test]
fn also_outputs_are_the_main_rendition_at_other_heights() {
    let main = RenditionSpec {
        name: "main".into(),
        codec: tessera_model::encode::VideoCodec::H264,
        rate: RateControl::Crf(23.0),
        preset: "fast".into(),
        height: None,
        hdr: Default::default(),
        maxrate: None,
        profile: None,
        target: None,
    };
    let (r, c, p) = extra_output("480=small.mkv", 0, &main).unwrap();
    assert_eq!(
        (r.name.as_str(), r.height, r.preset.as_str()),
        ("also1", Some(480), "fast")
    );
    assert_eq!((c, p), (Container::Mkv, PathBuf::from("small.mkv")));
    for bad in ["480", "x=a.mp4", "1=a.mp4", "480=a.avi"] {
        let e = extra_output(bad, 0, &main).unwrap_err().to_string();
        assert!(e.contains(bad), "{e}");
    }
}
