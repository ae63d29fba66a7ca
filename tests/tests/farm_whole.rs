//! The whole-input path (issue 31): while segments wait on the CPU queue, a short input goes
//! to one worker as one task (cut, encode, audio, stitch and QC gate on that worker; no chunk,
//! segment or audio object, no stitch task). Its output must be the split path's output of
//! the same one-segment plan, frame for frame and packet for packet of audio; an idle farm
//! still splits a short input for latency.
//!
//! The inputs are classes the split path handles specially: AAC copied, MPEG-2 with MP2 in
//! TS with offset timestamps (audio re-encoded, timestamps moved), variable frame rate, an
//! edit list, two audio languages, VP9 with Opus in WebM.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_tests::chaos::frames::{differing_frames, frame_hashes};
use tessera_tests::farm::{test_dispatcher_args, Farm, TOKEN};
use tessera_tests::fixture::{fixture, Fixture};
use tessera_tests::probe::frame_count;
use tessera_tests::s3_faults::S3Faults;

const SHORT: [Fixture; 6] = [
    Fixture::ClosedGopH264,
    Fixture::MpegTsOffset,
    Fixture::VariableFrameRate,
    Fixture::EditList,
    Fixture::TwoAudioLanguages,
    Fixture::Vp9OpusWebm,
];

/// The test farm's flags with the whole-input path on (the product's default limit) and
/// one segment per worker for short inputs, so that a split job of `segment_seconds: 100`
/// plans the one segment a whole-input task does.
fn whole_on() -> Vec<String> {
    let mut args = test_dispatcher_args();
    let at = args
        .iter()
        .position(|a| a == "--whole-input-max-seconds")
        .expect("the test farm pins the whole-input limit");
    args[at + 1] = "60".into();
    args.extend(["--parallelism".into(), "1".into()]);
    args
}

/// Ids of the jobs the dispatcher sent whole, from its log.
fn sent_whole(farm: &Farm) -> Vec<String> {
    farm.log("dispatcher.log")
        .lines()
        .filter(|l| l.contains("whole-input task published"))
        .filter_map(|l| l.split("job=").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

fn job_state(farm: &Farm, id: &str) -> serde_json::Value {
    farm.http("GET", &format!("/v1/jobs/{id}"), Some(TOKEN), None)
        .1
}

/// Submits the 12 s 720p fixture as `{prefix}/long.mp4` in half-second segments of a slow
/// preset and waits until its first segment is done: the farm's one worker is then busy and
/// the rest of its segments wait on the queue. Returns the job's id.
fn make_busy(farm: &Farm, prefix: &str) -> String {
    farm.upload(
        &fixture(Fixture::Hd720Long),
        "input",
        &format!("{prefix}/long.mp4"),
    );
    let long = farm.submit(
        &format!("s3://input/{prefix}/long.mp4"),
        &format!("s3://output/{prefix}/long.mp4"),
        json!({"preset": "medium"}),
        json!({"segment_seconds": 0.5}),
    );
    let by = Instant::now() + Duration::from_secs(120);
    while job_state(farm, &long)["segments_done"]
        .as_u64()
        .unwrap_or(0)
        < 1
    {
        assert!(Instant::now() < by, "the long job never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    long
}

fn output_of(farm: &Farm, key: &str) -> PathBuf {
    let path = farm.dir.path().join(key.replace('/', "_"));
    farm.download("output", key, &path);
    path
}

#[test]
fn a_short_input_goes_whole_while_segments_wait_and_matches_the_split_path() {
    let farm = Farm::start_with_args("whole", 1, whole_on(), &[]);
    let preset = json!({"preset": "ultrafast"});
    for kind in SHORT {
        farm.upload(&fixture(kind), "input", &format!("whole/{kind:?}"));
    }
    // Idle: a short input splits (one segment a second), and the reference of each class is
    // the split path's one-segment plan, one job at a time so that the farm stays idle.
    let idle = farm.submit(
        "s3://input/whole/ClosedGopH264",
        "s3://output/whole/idle.mp4",
        preset.clone(),
        json!({"segment_seconds": 1}),
    );
    let j = farm.wait_job(&idle, Duration::from_secs(300));
    assert_eq!(j["state"], "done", "{j}");
    assert!(j["segments_total"].as_u64() > Some(1), "{j}");
    for kind in SHORT {
        let id = farm.submit(
            &format!("s3://input/whole/{kind:?}"),
            &format!("s3://output/whole/reference-{kind:?}.mp4"),
            preset.clone(),
            json!({"segment_seconds": 100}),
        );
        let j = farm.wait_job(&id, Duration::from_secs(300));
        assert_eq!(j["state"], "done", "{kind:?}: {j}");
        assert_eq!(j["segments_total"], 1, "{kind:?}: {j}");
    }
    assert!(
        sent_whole(&farm).is_empty(),
        "an idle farm sent inputs whole"
    );

    // Busy: a long job's half-second segments wait for the one worker's slot.
    let long_src = fixture(Fixture::Hd720Long);
    let long = make_busy(&farm, "whole");
    let busy: Vec<(Fixture, String)> = SHORT
        .iter()
        .map(|&kind| {
            let id = farm.submit(
                &format!("s3://input/whole/{kind:?}"),
                &format!("s3://output/whole/busy-{kind:?}.mp4"),
                preset.clone(),
                json!({"segment_seconds": 1}),
            );
            (kind, id)
        })
        .collect();
    for (kind, id) in &busy {
        let j = farm.wait_job(id, Duration::from_secs(300));
        assert_eq!(j["state"], "done", "{kind:?}: {j}");
        assert_eq!(j["segments_total"], 1, "{kind:?} was split: {j}");
    }
    let whole = sent_whole(&farm);
    for (kind, id) in &busy {
        assert!(
            whole.contains(id),
            "{kind:?} ({id}) was not sent whole: {whole:?}"
        );
    }
    // What the worker did with them: cut, encoded, stitched, checked, in one task each.
    let worker = farm.log("worker-0.log");
    assert_eq!(
        worker.matches("input transcoded whole").count(),
        busy.len(),
        "{worker}"
    );
    for (kind, _) in &busy {
        let out = output_of(&farm, &format!("whole/busy-{kind:?}.mp4"));
        let reference = output_of(&farm, &format!("whole/reference-{kind:?}.mp4"));
        assert_eq!(frame_count(&out), frame_count(&fixture(*kind)), "{kind:?}");
        let (a, b) = (frame_hashes(&reference), frame_hashes(&out));
        assert!(!a.is_empty());
        assert_eq!(
            differing_frames(&a, &b),
            0,
            "{kind:?}: the whole-input output differs from the split path's"
        );
    }
    let l = farm.wait_job(&long, Duration::from_secs(600));
    assert_eq!(l["state"], "done", "{l}");
    assert_eq!(
        frame_count(&output_of(&farm, "whole/long.mp4")),
        frame_count(&long_src)
    );
}

/// A dispatcher killed while a whole-input task runs: the restarted one resumes the job on
/// the plan it recorded (whole again, though the farm may be idle by then), and the output
/// is the source's frames, delivered once.
#[test]
fn a_whole_input_job_survives_its_dispatchers_kill_and_stays_whole() {
    let mut farm = Farm::start_with_args("wholekill", 1, whole_on(), &[]);
    let short_src = fixture(Fixture::TwoAudioLanguages);
    farm.upload(&short_src, "input", "wk/short.mp4");
    let long = make_busy(&farm, "wk");
    let short = farm.submit(
        "s3://input/wk/short.mp4",
        "s3://output/wk/short.mp4",
        json!({"preset": "ultrafast"}),
        json!({"segment_seconds": 1}),
    );
    let by = Instant::now() + Duration::from_secs(120);
    while !sent_whole(&farm).contains(&short) {
        assert!(Instant::now() < by, "the short job was never sent whole");
        std::thread::sleep(Duration::from_millis(20));
    }
    farm.kill_dispatcher();
    farm.start_dispatcher();
    let j = farm.wait_job(&short, Duration::from_secs(300));
    assert_eq!(j["state"], "done", "{j}");
    assert_eq!(j["segments_total"], 1, "{j}");
    // Sent whole by both runs: the resumed one kept the recorded plan.
    let sent = sent_whole(&farm);
    assert_eq!(
        sent.iter().filter(|id| **id == short).count(),
        2,
        "{sent:?}"
    );
    let out = output_of(&farm, "wk/short.mp4");
    assert_eq!(frame_count(&out), frame_count(&short_src));
    let log = farm.log("dispatcher.log");
    let delivered = log
        .lines()
        .filter(|l| l.contains("output delivered") && l.contains("wk/short.mp4"))
        .count();
    assert_eq!(delivered, 1, "delivered {delivered} times");
    let l = farm.wait_job(&long, Duration::from_secs(600));
    assert_eq!(l["state"], "done", "{l}");
}

/// Review N6 on the whole-input path: the delivery's HEAD of the output the whole-input task
/// stored after its QC gate is held while the test writes other bytes over it; released, the
/// delivery is refused (the job fails naming the work object) and nothing is delivered.
/// Before, the replacement was delivered (the split path's case: `farm_delivery`).
#[test]
fn a_whole_input_output_replaced_after_its_qc_is_never_delivered() {
    let mut farm = Farm::start_with_args("wholeqc", 1, whole_on(), &[]);
    let door = S3Faults::start(&farm.garage.endpoint);
    farm.set_dispatcher_env("TESSERA_S3_ENDPOINT", &door.endpoint);
    farm.start_dispatcher();
    farm.upload(&fixture(Fixture::ClosedGopH264), "input", "wq/short.mp4");
    let long = make_busy(&farm, "wq");
    door.hold_heads("/output/00.");
    let short = farm.submit(
        "s3://input/wq/short.mp4",
        "s3://output/wq/short.mp4",
        json!({"preset": "ultrafast"}),
        json!({"segment_seconds": 1}),
    );
    let by = Instant::now() + Duration::from_secs(120);
    let held = loop {
        let held = door.heads_held();
        if let Some(path) = held.iter().find(|p| p.contains(&short)) {
            break path.trim_start_matches("/work/").to_string();
        }
        assert!(Instant::now() < by, "no delivery HEAD held: {held:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(sent_whole(&farm).contains(&short), "not sent whole");
    farm.upload(&fixture(Fixture::Hd720Long), "work", &held);
    door.release_heads();
    let j = farm.wait_job(&short, Duration::from_secs(300));
    assert_eq!(j["state"], "failed", "the replacement was delivered: {j}");
    let message = j["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&held) && message.contains("not the object that was checked"),
        "{message}"
    );
    assert!(farm.list("output", "wq/short").is_empty());
    let l = farm.wait_job(&long, Duration::from_secs(600));
    assert_eq!(l["state"], "done", "{l}");
}
