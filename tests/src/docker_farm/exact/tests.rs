//! The compose fault test's checks on known good and bad samples.

use super::*;

#[test]
fn same_frames_passes_on_the_source_times_within_a_millisecond() {
    let src = [0.0, 0.04, 0.08, 0.12];
    assert_eq!(same_frames(&src, &[0.0, 0.0405, 0.08, 0.1195]), Ok(()));
}

#[test]
fn same_frames_fails_on_a_frame_lost_moved_or_twice() {
    let src = [0.0, 0.04, 0.08, 0.12];
    let lost = same_frames(&src, &[0.0, 0.04, 0.08]).unwrap_err();
    assert!(lost.contains("3 frames, the source has 4"), "{lost}");
    let moved = same_frames(&src, &[0.0, 0.04, 0.082, 0.12]).unwrap_err();
    assert!(moved.contains("frame 3 at 0.082"), "{moved}");
    let twice = same_frames(&[0.0, 0.04, 0.0405], &[0.0, 0.04, 0.04]).unwrap_err();
    assert!(twice.contains("twice"), "{twice}");
    assert!(same_frames(&[0.0], &[f64::NAN]).is_err());
}

#[test]
fn audio_duration_within_50_ms() {
    assert_eq!(same_audio_duration(14.0, 14.04), Ok(()));
    assert!(same_audio_duration(14.0, 14.06).is_err());
    assert!(same_audio_duration(14.0, f64::NAN).is_err());
}

#[test]
fn all_done_needs_every_job_done_and_no_more() {
    let done = |n: usize| vec!["done".to_string(); n];
    assert_eq!(all_done(&done(5), 5), Ok(()));
    assert!(all_done(&done(6), 5).is_err());
    let mut one_failed = done(4);
    one_failed.push("failed".into());
    assert!(all_done(&one_failed, 5).is_err());
}

#[test]
fn exit_codes_must_be_n_zeros() {
    let codes = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(all_exited_zero(&codes(&["0", "0", "0"]), 3), Ok(()));
    assert!(all_exited_zero(&codes(&["0", "137", "0"]), 3).is_err());
    assert!(all_exited_zero(&codes(&["0", "0"]), 3).is_err());
}

#[test]
fn job_states_from_an_array_or_an_object() {
    use crate::docker_farm::submit::states_of;
    let list = serde_json::json!([{"state": "done"}, {"state": "failed"}]);
    assert_eq!(states_of(&list), ["done", "failed"]);
    let wrapped = serde_json::json!({"jobs": [{"state": "running"}, {"state": "done"}]});
    assert_eq!(states_of(&wrapped), ["done", "running"]);
}
