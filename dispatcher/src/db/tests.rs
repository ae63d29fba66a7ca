//! Unit tests of the job database: lifecycle, idempotency, tenants, retention, cancel
//! against delivery.

use super::*;

#[test]
fn lifecycle_idempotency_and_final_states() {
    let db = Db::open(Path::new(":memory:")).unwrap();
    let req = serde_json::json!({"input": "s3://in/a.mp4"});
    assert_eq!(
        db.insert("j1", "t", Some("k"), &req).unwrap(),
        ("j1".to_string(), true)
    );
    assert_eq!(
        db.insert("j2", "t", Some("k"), &req).unwrap(),
        ("j1".to_string(), false)
    );
    db.set_state("j1", JobState::Encoding).unwrap();
    db.set_segments("j1", 4, 1).unwrap();
    let j = db.get("j1").unwrap().unwrap();
    assert_eq!(
        (j.state, j.segments_total, j.segments_done),
        (JobState::Encoding, 4, 1)
    );
    assert_eq!(db.unfinished().unwrap().len(), 1);
    db.fail("j1", JobState::Failed, "input_invalid", "a.mp4: bad")
        .unwrap();
    db.set_state("j1", JobState::Encoding).unwrap(); // a final state is never left
    let j = db.get("j1").unwrap().unwrap();
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(j.error_code.as_deref(), Some("input_invalid"));
    assert!(db.unfinished().unwrap().is_empty());
    assert_eq!(
        db.list(Some(JobState::Failed), None, 10, 0).unwrap().len(),
        1
    );
    assert!(db
        .list(Some(JobState::Done), None, 10, 0)
        .unwrap()
        .is_empty());
    assert!(db.get("nope").unwrap().is_none());
}

#[test]
fn quotas_count_unfinished_jobs_and_pruning_keeps_recent_and_unended_ones() {
    let db = Db::open(Path::new(":memory:")).unwrap();
    for id in ["old", "new", "running", "uncleaned"] {
        db.insert(id, "acme", None, &serde_json::json!({})).unwrap();
    }
    db.insert("other", "beta", None, &serde_json::json!({}))
        .unwrap();
    assert_eq!(db.unfinished_of("acme").unwrap(), 4);
    for id in ["old", "new", "uncleaned"] {
        db.fail(id, JobState::Failed, "x", "y").unwrap();
    }
    db.record_plan("uncleaned", 1).unwrap();
    assert_eq!(db.unfinished_of("acme").unwrap(), 1);
    db.with(|c| {
        c.execute(
            "UPDATE jobs SET updated_at = 100 WHERE id IN ('old', 'uncleaned', 'running')",
            [],
        )
    })
    .unwrap();
    assert_eq!(db.prune(1000).unwrap(), 1);
    assert!(db.get("old").unwrap().is_none());
    for kept in ["new", "running", "uncleaned", "other"] {
        assert!(db.get(kept).unwrap().is_some(), "{kept}");
    }
}

#[test]
fn a_cancel_and_the_start_of_delivery_exclude_each_other() {
    let db = Db::open(Path::new(":memory:")).unwrap();
    let req = serde_json::json!({"input": "s3://in/a.mp4"});
    for id in ["early", "late"] {
        db.insert(id, "t", None, &req).unwrap();
        db.set_state(id, JobState::Stitching).unwrap();
    }
    // Cancelled first: delivery is refused, the job stays cancelled.
    assert!(db.cancel("early", "cancelled by request").unwrap());
    assert!(matches!(
        db.begin_delivery("early"),
        Err(FarmError::Cancelled { .. })
    ));
    assert_eq!(db.get("early").unwrap().unwrap().state, JobState::Cancelled);
    // Delivering first: the cancel is refused, delivery finishes the job.
    db.begin_delivery("late").unwrap();
    assert!(!db.cancel("late", "cancelled by request").unwrap());
    assert_eq!(db.get("late").unwrap().unwrap().state, JobState::Delivering);
    db.finish("late", &serde_json::json!({})).unwrap();
    assert_eq!(db.get("late").unwrap().unwrap().state, JobState::Done);
    assert!(!db.cancel("late", "too late").unwrap());
}
