//! Unit tests of the job database: lifecycle, idempotency, tenants, retention, cancel
//! against delivery, the webhook outbox (queued with the job's end, due order, retries,
//! give-up, restarts).

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

/// A database that queues a webhook for every ending job that has a `callback_url`.
fn with_webhooks() -> Db {
    let db = Db::open(Path::new(":memory:")).unwrap();
    db.queue_webhooks(Box::new(|row| {
        let url = row.request.get("callback_url")?.as_str()?.to_string();
        Some((
            url,
            format!("{}:{}", row.id, row.state.as_str()).into_bytes(),
        ))
    }));
    db
}

#[test]
fn an_ending_job_queues_its_webhook_once_in_the_same_write() {
    let db = with_webhooks();
    let hook = serde_json::json!({"callback_url": "http://hooks.example.com/a"});
    for id in ["done", "failed", "cancelled", "none"] {
        let req = if id == "none" {
            serde_json::json!({})
        } else {
            hook.clone()
        };
        db.insert(id, "t", None, &req).unwrap();
    }
    db.finish("done", &serde_json::json!({})).unwrap();
    db.fail("failed", JobState::Failed, "x", "y").unwrap();
    assert!(db.cancel("cancelled", "by request").unwrap());
    db.finish("none", &serde_json::json!({})).unwrap();
    // Ending again (the runner's record after a cancel, a retried write) queues nothing more.
    db.fail("cancelled", JobState::Cancelled, "cancelled", "z")
        .unwrap();
    db.finish("done", &serde_json::json!({})).unwrap();
    let due = db.due_webhooks(now_ms() + 1, 10).unwrap();
    let got: Vec<_> = due
        .iter()
        .map(|r| (r.job_id.as_str(), r.url.as_str(), r.attempts))
        .collect();
    assert_eq!(
        got,
        [
            ("done", "http://hooks.example.com/a", 0),
            ("failed", "http://hooks.example.com/a", 0),
            ("cancelled", "http://hooks.example.com/a", 0),
        ]
    );
    // The body is the ended row's view, fixed when the job ended.
    assert_eq!(due[2].body, b"cancelled:cancelled");
    // A database without a sender queues nothing.
    let plain = Db::open(Path::new(":memory:")).unwrap();
    plain.insert("j", "t", None, &hook).unwrap();
    plain.finish("j", &serde_json::json!({})).unwrap();
    assert!(plain.due_webhooks(i64::MAX, 10).unwrap().is_empty());
}

#[test]
fn the_outbox_gives_due_calls_oldest_first_and_keeps_failed_ones() {
    let db = with_webhooks();
    let hook = serde_json::json!({"callback_url": "http://hooks.example.com/a"});
    for id in ["a", "b", "c"] {
        db.insert(id, "t", None, &hook).unwrap();
        db.finish(id, &serde_json::json!({})).unwrap();
    }
    let all = db.due_webhooks(i64::MAX, 10).unwrap();
    let [a, b, c] = [&all[0], &all[1], &all[2]];
    assert_eq!((a.job_id.as_str(), b.job_id.as_str()), ("a", "b"));
    let keys: std::collections::HashSet<_> = all.iter().map(OutboxRow::delivery_key).collect();
    assert_eq!(keys.len(), 3, "{keys:?}");
    // a failed, retried at 5000; b failed, retried at 3000; c delivered.
    db.webhook_failed(a.id, 5_000, "HTTP 503").unwrap();
    db.webhook_failed(b.id, 3_000, "connection refused")
        .unwrap();
    db.webhook_delivered(c.id).unwrap();
    assert!(db.due_webhooks(2_999, 10).unwrap().is_empty());
    let due: Vec<_> = db.due_webhooks(i64::MAX, 10).unwrap();
    let order: Vec<_> = due
        .iter()
        .map(|r| (r.job_id.as_str(), r.attempts))
        .collect();
    assert_eq!(order, [("b", 1), ("a", 1)], "the earliest due first");
    assert_eq!(db.due_webhooks(i64::MAX, 1).unwrap().len(), 1, "the limit");
    // The same row, the same key, on every try.
    assert_eq!(due[1].delivery_key(), a.delivery_key());
    assert_eq!(due[1].body, a.body);
}

#[test]
fn a_given_up_call_is_kept_unsent_until_pruned() {
    let db = with_webhooks();
    db.insert(
        "j",
        "t",
        None,
        &serde_json::json!({"callback_url": "http://h.example/"}),
    )
    .unwrap();
    db.fail("j", JobState::Failed, "x", "y").unwrap();
    let row = db.due_webhooks(i64::MAX, 10).unwrap().remove(0);
    db.webhook_given_up(row.id, 10_000, "HTTP 500").unwrap();
    assert!(db.due_webhooks(i64::MAX, 10).unwrap().is_empty());
    let kept = |db: &Db| {
        db.with(|c| {
            c.query_row(
                "SELECT attempts, given_up_ms, last_error FROM webhook_outbox",
                [],
                |r| {
                    Ok((
                        r.get::<_, u32>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                },
            )
            .optional()
        })
        .unwrap()
    };
    assert_eq!(kept(&db), Some((1, 10_000, "HTTP 500".to_string())));
    db.prune(5).unwrap(); // given up at 10 s: kept at a cutoff of 5 s
    assert!(kept(&db).is_some());
    db.prune(11).unwrap();
    assert_eq!(kept(&db), None);
}

#[test]
fn calls_left_in_the_outbox_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    {
        let db = with_webhooks_at(&path);
        db.insert(
            "j",
            "t",
            None,
            &serde_json::json!({"callback_url": "http://h.example/"}),
        )
        .unwrap();
        db.finish("j", &serde_json::json!({})).unwrap();
    }
    let reopened = Db::open(&path).unwrap();
    let due = reopened.due_webhooks(i64::MAX, 10).unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].job_id, "j");
}

fn with_webhooks_at(path: &Path) -> Db {
    let db = Db::open(path).unwrap();
    db.queue_webhooks(Box::new(|row| {
        Some((
            row.request.get("callback_url")?.as_str()?.to_string(),
            vec![],
        ))
    }));
    db
}
