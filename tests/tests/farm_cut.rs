//! Workers cut their own chunks (issue 31, "a thin dispatcher"): the dispatcher stores a
//! job's source once and publishes every segment on `tessera.cut.cpu`; each worker fetches
//! the source once per job and cuts its segments' chunks itself. The outputs must be the
//! split path's, frame for frame, for the input classes the split handles specially, and a
//! job must survive its dispatcher's kill whether the restarted one still cuts on workers or
//! was told to split.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_model::wire::QUEUE_CUT_CPU;
use tessera_tests::chaos::frames::{differing_frames, frame_hashes};
use tessera_tests::farm::Farm;
use tessera_tests::fixture::{fixture, Fixture};
use tessera_tests::probe::frame_count;

/// Classes of input whose split is not a plain cut at keyframes: open GOPs (pre-roll),
/// HEVC, sparse keyframes, offset TS timestamps, variable frame rate, an edit list, the index
/// at the end, rotation, two audio languages, VP9 in WebM.
const CLASSES: [Fixture; 10] = [
    Fixture::OpenGopH264,
    Fixture::HevcOpenGop,
    Fixture::SparseKeyframes,
    Fixture::MpegTsOffset,
    Fixture::VariableFrameRate,
    Fixture::EditList,
    Fixture::MoovAtEnd,
    Fixture::Rotated90,
    Fixture::TwoAudioLanguages,
    Fixture::Vp9OpusWebm,
];

const JOB_TIMEOUT: Duration = Duration::from_secs(300);

/// The queue the dispatcher logged for job `id`'s segments.
fn segments_went_to(farm: &Farm, id: &str) -> Option<String> {
    farm.log("dispatcher.log")
        .lines()
        .filter(|l| l.contains("segments go to") && l.contains(id))
        .filter_map(|l| l.split("queue=").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .next_back()
}

/// How many times each worker fetched job `id`'s source.
fn source_fetches(farm: &Farm, id: &str, workers: usize) -> Vec<usize> {
    (0..workers)
        .map(|i| farm.worker_log_count(i, &["source fetched for cutting", id]))
        .collect()
}

/// Waits until `workers` workers consume the cut queue: the dispatcher sends cut tasks only
/// while some worker does, and a job submitted before they connect is split.
fn wait_for_cutters(farm: &Farm, workers: usize) {
    let waited =
        (farm.vhost).wait_for_consumers(QUEUE_CUT_CPU, workers as u64, Duration::from_secs(60));
    assert!(waited.is_ok(), "the workers never consumed {QUEUE_CUT_CPU}");
}

fn output_of(farm: &Farm, key: &str) -> PathBuf {
    let path = farm.dir.path().join(key.replace('/', "_"));
    farm.download("output", key, &path);
    path
}

/// Submits every class to `prefix/` in 1 s segments and waits until all are done.
fn run_all(farm: &Farm, prefix: &str) -> Vec<(Fixture, String)> {
    let jobs: Vec<(Fixture, String)> = CLASSES
        .iter()
        .map(|&kind| {
            let id = farm.submit(
                &format!("s3://input/cut/{kind:?}"),
                &format!("s3://output/{prefix}/{kind:?}.mp4"),
                json!({"preset": "ultrafast"}),
                json!({"segment_seconds": 1}),
            );
            (kind, id)
        })
        .collect();
    for (kind, id) in &jobs {
        let j = farm.wait_job(id, JOB_TIMEOUT);
        assert_eq!(j["state"], "done", "{kind:?}: {j}");
        assert!(j["segments_total"].as_u64() > Some(1), "{kind:?}: {j}");
    }
    jobs
}

#[test]
fn segments_cut_on_workers_match_the_dispatchers_split_frame_for_frame() {
    let workers = 2;
    let mut farm = Farm::start("cut", workers);
    wait_for_cutters(&farm, workers);
    for kind in CLASSES {
        farm.upload(&fixture(kind), "input", &format!("cut/{kind:?}"));
    }
    let cut = run_all(&farm, "cut");
    for (kind, id) in &cut {
        assert_eq!(
            segments_went_to(&farm, id).as_deref(),
            Some("tessera.cut.cpu"),
            "{kind:?}"
        );
        // One fetch of the source per worker that took a segment, never one per segment.
        let fetches = source_fetches(&farm, id, workers);
        assert!(
            fetches.iter().all(|&n| n <= 1) && fetches.iter().sum::<usize>() >= 1,
            "{kind:?}: source fetches per worker {fetches:?}"
        );
    }
    // The same inputs split by the dispatcher, restarted with cutting off.
    farm.set_dispatcher_env("TESSERA_CUT_ON_WORKERS", "false");
    farm.start_dispatcher();
    let split = run_all(&farm, "split");
    for ((kind, cut_id), (_, split_id)) in cut.iter().zip(&split) {
        assert_eq!(
            segments_went_to(&farm, split_id).as_deref(),
            Some("tessera.encode.cpu"),
            "{kind:?}"
        );
        let cut_out = output_of(&farm, &format!("cut/{kind:?}.mp4"));
        assert_eq!(
            frame_count(&cut_out),
            frame_count(&fixture(*kind)),
            "{kind:?}"
        );
        let a = frame_hashes(&output_of(&farm, &format!("split/{kind:?}.mp4")));
        let b = frame_hashes(&cut_out);
        assert!(!a.is_empty(), "{kind:?}");
        assert_eq!(
            differing_frames(&a, &b),
            0,
            "{kind:?} ({cut_id}): the cut output differs from the split one"
        );
    }
}

/// Kills the dispatcher once job `id` has a segment done (its cut tasks are published),
/// restarts it with `TESSERA_CUT_ON_WORKERS=cut_on`, and checks the job ends done with the
/// source's frames, delivered once.
fn survives_kill(tag: &str, cut_on: &str) {
    let mut farm = Farm::start(tag, 1);
    wait_for_cutters(&farm, 1);
    let src = fixture(Fixture::Hd720Long);
    farm.upload(&src, "input", "k/long.mp4");
    let id = farm.submit(
        "s3://input/k/long.mp4",
        "s3://output/k/long.mp4",
        json!({"preset": "veryfast"}),
        json!({"segment_seconds": 1}),
    );
    farm.wait_segments_done(&id, 1, Duration::from_secs(120));
    assert_eq!(
        segments_went_to(&farm, &id).as_deref(),
        Some("tessera.cut.cpu")
    );
    farm.kill_dispatcher();
    farm.set_dispatcher_env("TESSERA_CUT_ON_WORKERS", cut_on);
    let restarted = Instant::now();
    farm.start_dispatcher();
    let j = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(j["state"], "done", "{j}\n{}", farm.log("dispatcher.log"));
    assert_eq!(
        frame_count(&output_of(&farm, "k/long.mp4")),
        frame_count(&src)
    );
    let delivered = farm
        .log("dispatcher.log")
        .lines()
        .filter(|l| l.contains("output delivered") && l.contains("k/long.mp4"))
        .count();
    assert_eq!(delivered, 1, "delivered {delivered} times");
    eprintln!("{tag}: done {:.1?} after the restart", restarted.elapsed());
    assert!(
        farm.list("work", &format!("jobs/{id}/")).is_empty(),
        "work area not cleaned"
    );
}

/// The restarted dispatcher still cuts on workers: it resumes the recorded cut plan.
#[test]
fn a_cut_job_survives_its_dispatchers_kill() {
    survives_kill("cutkill", "true");
}

/// The restarted dispatcher was told to split: the cut plan cannot be resumed as it was
/// (its tasks need the cut queue's workers), so the job starts again on a split plan of its
/// own keys, and the cut tasks still queued are of another plan and change nothing.
#[test]
fn a_cut_job_survives_a_restart_that_turns_cutting_off() {
    survives_kill("cutoff", "false");
}
