//! A streaming package through the distributed farm: submitted to the HTTP API with a file
//! output beside it, encoded by two worker processes over RabbitMQ and Garage, delivered under
//! an S3 prefix, then read back from the bucket and played through its manifests by FFmpeg,
//! checked by the validator, and (where installed) played by GStreamer.

use std::time::Duration;

use serde_json::json;
use tessera_package::validate::{validate_hls, validate_mpd};
use tessera_tests::farm::{Farm, TOKEN};
use tessera_tests::fixture::{fixture, Fixture};
use tessera_tests::streaming::{
    assert_package_plays, assert_same_times, gstreamer_has, gstreamer_video_times,
    relative_frame_times,
};

const JOB_TIMEOUT: Duration = Duration::from_secs(300);

fn post(farm: &Farm, body: serde_json::Value) -> (u16, serde_json::Value) {
    farm.http("POST", "/v1/jobs", Some(TOKEN), Some(&body.to_string()))
}

#[test]
fn a_cmaf_package_and_a_file_from_one_job_play_frame_exact_from_the_bucket() {
    let farm = Farm::start("package", 2);
    let src = fixture(Fixture::StreamingSource);
    farm.upload(&src, "input", "uploads/show.mp4");

    // Refusals name the field and the reason before anything runs.
    for (output, code, says) in [
        (
            json!({"package": {"format": "cmaf"}, "destination": "s3://output/show"}),
            422,
            "prefix ending in '/'",
        ),
        (
            json!({"package": {"format": "hls"}, "crf": 20, "destination": "s3://output/p/"}),
            422,
            "crf does not apply",
        ),
        (
            json!({"package": {"format": "dash", "segment_type": "ts"}, "destination": "s3://output/p/"}),
            422,
            "segment_type",
        ),
        (
            json!({"package": {"format": "hls"}, "destination": "s3://private/p/"}),
            403,
            "private",
        ),
    ] {
        let (got, err) = post(
            &farm,
            json!({"input": "s3://input/uploads/show.mp4", "outputs": [output]}),
        );
        assert_eq!(got, code, "{output}: {err}");
        let message = err["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(says),
            "{output}: message {message:?} lacks {says:?}"
        );
    }

    let (code, job) = post(
        &farm,
        json!({
            "input": "s3://input/uploads/show.mp4",
            "segment_seconds": 4,
            "outputs": [
                {"destination": "s3://output/show.mp4", "preset": "veryfast"},
                {"package": {"format": "cmaf", "segment_seconds": 2, "thumbnails": {
                    "poster": {"time": 1, "height": 180}, "interval": 4, "heights": [90],
                    "sprite": {"height": 36, "columns": 2, "rows": 2}}},
                 "destination": "s3://output/show/"}
            ]
        }),
    );
    assert_eq!(code, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_string();
    let done = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(
        done["state"],
        "done",
        "{done}\n{}",
        farm.log("dispatcher.log")
    );
    farm.assert_frame_exact(&src, "show.mp4");

    // The package, fetched from the bucket as a CDN would.
    let keys = farm.list("output", "show/");
    assert!(keys.iter().any(|k| k == "show/master.m3u8"), "{keys:?}");
    assert!(keys.iter().any(|k| k == "show/manifest.mpd"), "{keys:?}");
    let local = tempfile::tempdir().unwrap();
    for key in &keys {
        let rel = key.strip_prefix("show/").unwrap();
        let path = local.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        farm.download("output", key, &path);
    }
    let root = local.path();
    let read = |rel: &str| std::fs::read(root.join(rel)).ok();
    let problems = validate_hls("master.m3u8", &read, None);
    assert!(problems.is_empty(), "HLS validator: {problems:#?}");
    let problems = validate_mpd("manifest.mpd", &read);
    assert!(problems.is_empty(), "MPD validator: {problems:#?}");
    let rungs = [(640, 360), (416, 234)];
    for manifest in ["master.m3u8", "manifest.mpd"] {
        assert_package_plays(&root.join(manifest), &src, &rungs, &["eng", "fra"], 30.0);
    }
    if gstreamer_has("hlsdemux") {
        let times = gstreamer_video_times(&root.join("master.m3u8")).unwrap();
        let first = times.first().copied().unwrap_or(0.0);
        let times: Vec<f64> = times.iter().map(|t| t - first).collect();
        assert_same_times("GStreamer", &times, &relative_frame_times(&src), 0.002);
    }
    // The images, taken by the segment workers and stored through the work area: a poster
    // at 1 s, thumbnails at 0, 4, 8 and 12 s (each from another farm segment), one sheet.
    let images: Vec<(&str, u64, u64)> = vec![
        ("poster.jpg", 320, 180),
        ("thumbnails/90p/00000.jpg", 160, 90),
        ("thumbnails/90p/00003.jpg", 160, 90),
        ("thumbnails/sprite-0000.jpg", 128, 72),
    ];
    for (rel, w, h) in images {
        let info = tessera_tests::stills::image_info(&root.join(rel));
        assert_eq!(info, ("mjpeg".to_string(), w, h), "{rel}");
    }
    let frames = 325;
    tessera_tests::stills::assert_shows_frame(
        &root.join("thumbnails/90p/00003.jpg"),
        None,
        (&src, frames),
        300,
        28.0,
    );
    assert!(!keys.iter().any(|k| k.contains(".tiles")), "{keys:?}");
    let vtt = std::fs::read_to_string(root.join("thumbnails/thumbnails.vtt")).unwrap();
    assert_eq!(vtt.matches(" --> ").count(), 4, "{vtt}");
    // The job view lists the file and the package, not the rungs.
    assert_eq!(
        done["outputs"],
        json!(["s3://output/show.mp4", "s3://output/show/"]),
        "{done}"
    );
    assert_eq!(done["frames"].as_u64(), Some(325), "{done}");

    // The same spec as an upload's sidecar: the watch (input/incoming/ -> output/processed/)
    // packages the upload under its own prefix, with an explicit one-rung ladder in TS.
    let dir = tempfile::tempdir().unwrap();
    let sidecar = dir.path().join("clip.mp4.json");
    let spec = json!({"package": {"format": "hls", "segment_type": "ts", "segment_seconds": 2,
        "ladder": [{"height": 234, "crf": 26, "maxrate": 400000, "profile": "main"}]}});
    std::fs::write(&sidecar, spec.to_string()).unwrap();
    farm.upload(&sidecar, "input", "incoming/clip.mp4.json");
    farm.upload(&src, "input", "incoming/clip.mp4");
    let started = std::time::Instant::now();
    let id = loop {
        if let Some(job) = farm.jobs_for("input", "incoming/clip.mp4").first() {
            break job["id"].as_str().unwrap().to_string();
        }
        assert!(started.elapsed() < JOB_TIMEOUT, "no job for the upload");
        std::thread::sleep(Duration::from_millis(200));
    };
    let done = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(
        done["state"],
        "done",
        "{done}\n{}",
        farm.log("dispatcher.log")
    );
    assert_eq!(
        done["outputs"],
        json!(["s3://output/processed/clip/"]),
        "{done}"
    );
    let keys = farm.list("output", "processed/clip/");
    let local = tempfile::tempdir().unwrap();
    for key in &keys {
        let path = local
            .path()
            .join(key.strip_prefix("processed/clip/").unwrap());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        farm.download("output", key, &path);
    }
    let root = local.path();
    let read = |rel: &str| std::fs::read(root.join(rel)).ok();
    let master = std::fs::read_to_string(root.join("master.m3u8")).unwrap();
    assert!(
        master.contains("CODECS=\"avc1.4d"),
        "Main profile in the codec string: {master}"
    );
    let problems = validate_hls("master.m3u8", &read, None);
    assert!(problems.is_empty(), "HLS validator: {problems:#?}");
    assert_package_plays(
        &root.join("master.m3u8"),
        &src,
        &[(416, 234)],
        &["eng", "fra"],
        28.0,
    );
}
