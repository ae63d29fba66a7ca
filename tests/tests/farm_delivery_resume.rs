//! Delivery is a one-way door, across a dispatcher crash: the dispatcher talks to Garage
//! through a door ([`S3Faults`]) that holds the copy of a two-output job's second output, and
//! is killed (SIGKILL) while the job is `delivering` with its first output already copied.
//!
//! - Restarted, it resumes the job still `delivering`: a `DELETE` is refused (409) before and
//!   during the resumed delivery, and once the door lets the copy through the job ends `done`
//!   with both outputs. The first output is not copied a second time: it carries the job's
//!   delivery mark, also when the kill fell after the copy landed and before its answer
//!   came back (so before the run could record it).
//! - When the resumed run fails instead (its input was deleted, or replaced by other bytes,
//!   while the dispatcher was down), what the killed run delivered is taken back: nothing is
//!   left at the destinations, and a replaced input is named as such.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tessera_tests::farm::{with_s3_store, Farm, TOKEN};
use tessera_tests::s3_faults::S3Faults;
use tessera_tests::{fixture, Fixture};

const JOB_TIMEOUT: Duration = Duration::from_secs(240);

/// Submits a job of two file outputs, `{prefix}a.mp4` and `{prefix}b.mp4`, on `input`.
fn submit_two(farm: &Farm, input: &str, prefix: &str) -> String {
    let body = json!({"input": input, "segment_seconds": 2, "outputs": [
        {"destination": format!("s3://output/{prefix}a.mp4"), "preset": "veryfast"},
        {"destination": format!("s3://output/{prefix}b.mp4"), "preset": "veryfast", "height": 144}
    ]});
    let (code, job) = farm.http("POST", "/v1/jobs", Some(TOKEN), Some(&body.to_string()));
    assert_eq!(code, 202, "{job}");
    job["id"].as_str().expect("job id").to_string()
}

/// Waits until the door holds `n` copies, then returns the job's view.
fn wait_stalled(farm: &Farm, door: &S3Faults, id: &str, n: usize) -> Value {
    let started = Instant::now();
    while door.stalled().len() < n {
        assert!(
            started.elapsed() < JOB_TIMEOUT,
            "job {id}: {} copies held after {JOB_TIMEOUT:?}, not {n}: {}\n{}",
            door.stalled().len(),
            farm.job(id),
            tessera_tests::run::tail(&farm.log("dispatcher.log"), 3000)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    farm.job(id)
}

/// Kills the dispatcher while job `id` (outputs under `prefix`) is delivering its second
/// output, held at the door, and restarts it.
fn kill_inside_delivery(farm: &mut Farm, door: &S3Faults, id: &str, prefix: &str) {
    let job = wait_stalled(farm, door, id, 1);
    assert_eq!(job["state"], "delivering", "{job}");
    let first = format!("{prefix}a.mp4");
    assert_eq!(farm.list("output", prefix), vec![first], "before the kill");
    farm.kill_dispatcher();
}

/// Asserts the output `name` of job `id` was copied to the destination once (the door saw
/// one copy), carries the job's delivery mark, and that the resumed run said it found it.
fn assert_copied_once(farm: &Farm, door: &S3Faults, id: &str, name: &str) {
    let path = format!("/output/{name}");
    let copies = door.copies().iter().filter(|c| **c == path).count();
    let log = farm.log("dispatcher.log");
    assert_eq!(
        copies,
        1,
        "{path} copied {copies} times across the restart\n{}",
        tessera_tests::run::tail(&log, 3000)
    );
    let key = name.to_string();
    let mark = with_s3_store(farm.garage.s3_config(), "output", |s| async move {
        s.delivery_mark(&key).await.expect("head the output")
    });
    assert!(
        mark.as_deref()
            .is_some_and(|m| m.starts_with(&format!("{id} "))),
        "{path} is marked {mark:?}, not by job {id}"
    );
    let found = log
        .lines()
        .filter(|l| l.contains("output already at its destination") && l.contains(&path))
        .count();
    assert_eq!(found, 1, "the resumed run did not say it found {path}");
}

#[test]
fn a_dispatcher_killed_while_delivering_resumes_the_delivery_and_refuses_cancels() {
    let mut farm = Farm::start("delivery-resume", 2);
    farm.upload(&fixture(Fixture::ClosedGopH264), "input", "clip.mp4");
    farm.upload(&fixture(Fixture::ClosedGopH264), "input", "gone.mp4");
    farm.upload(&fixture(Fixture::ClosedGopH264), "input", "swapped.mp4");
    let door = S3Faults::start(&farm.garage.endpoint);
    farm.set_dispatcher_env("TESSERA_S3_ENDPOINT", &door.endpoint);
    farm.start_dispatcher();
    let cancel =
        |farm: &Farm, id: &str| farm.http("DELETE", &format!("/v1/jobs/{id}"), Some(TOKEN), None);

    // Killed inside delivery and restarted: still delivering, a cancel is refused.
    door.stall_copies("/output/resumed-b");
    let id = submit_two(&farm, "s3://input/clip.mp4", "resumed-");
    kill_inside_delivery(&mut farm, &door, &id, "resumed-");
    farm.start_dispatcher();
    let (code, answer) = cancel(&farm, &id);
    assert_eq!(
        code,
        409,
        "a cancel after the point of no return was accepted: {answer}; job {}; at the \
         destinations: {:?}",
        farm.job(&id),
        farm.list("output", "resumed-")
    );
    // The resumed run reaches the held copy again: still delivering, still refused.
    let job = wait_stalled(&farm, &door, &id, 2);
    assert_eq!(job["state"], "delivering", "{job}");
    assert_eq!(cancel(&farm, &id).0, 409);
    door.heal();
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    assert_eq!(
        farm.list("output", "resumed-"),
        vec!["resumed-a.mp4".to_string(), "resumed-b.mp4".to_string()]
    );
    // The output the killed run copied is not copied again, and says which job put it there.
    assert_copied_once(&farm, &door, &id, "resumed-a.mp4");

    // Killed after a copy landed but before its answer came back, so before the run could
    // record it: the resumed run still finds it there and does not copy it again.
    door.mute_copies("/output/muted-a");
    let id = submit_two(&farm, "s3://input/clip.mp4", "muted-");
    let started = Instant::now();
    while !door.copies().contains(&"/output/muted-a.mp4".to_string())
        || farm.list("output", "muted-").is_empty()
    {
        assert!(
            started.elapsed() < JOB_TIMEOUT,
            "no copy landed: {}",
            farm.job(&id)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    farm.kill_dispatcher();
    door.heal();
    farm.start_dispatcher();
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    assert_copied_once(&farm, &door, &id, "muted-a.mp4");

    // Killed inside delivery, then the input deleted: the resumed run fails, and the output
    // the killed run delivered is taken back.
    door.stall_copies("/output/gone-b");
    let id = submit_two(&farm, "s3://input/gone.mp4", "gone-");
    kill_inside_delivery(&mut farm, &door, &id, "gone-");
    door.heal();
    with_s3_store(farm.garage.s3_config(), "input", |s| async move {
        s.delete("gone.mp4").await.expect("delete the input")
    });
    farm.start_dispatcher();
    assert_eq!(cancel(&farm, &id).0, 409);
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "failed", "{job}");
    let left = farm.list("output", "gone-");
    assert!(
        left.is_empty(),
        "the failed job left what the killed run delivered: {left:?}; {job}"
    );

    // Killed inside delivery, then the input replaced by other bytes of the same length of
    // time: the resumed run must not encode or deliver them beside the first run's output.
    door.stall_copies("/output/swapped-b");
    let id = submit_two(&farm, "s3://input/swapped.mp4", "swapped-");
    kill_inside_delivery(&mut farm, &door, &id, "swapped-");
    door.heal();
    farm.upload(&fixture(Fixture::OpenGopH264), "input", "swapped.mp4");
    farm.start_dispatcher();
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "input_unreadable", "{job}");
    let message = job["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("replaced"), "{job}");
    let left = farm.list("output", "swapped-");
    assert!(left.is_empty(), "the failed job left {left:?}; {job}");
}
