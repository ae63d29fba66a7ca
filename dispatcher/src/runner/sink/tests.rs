//! The sink's rollback deletes only what the job's own delivery wrote.

use std::path::Path;
use std::time::Duration;

use tessera_engine::OutputSink;
use tessera_farm::store::{S3Client, S3Config};

use super::S3Sink;
use crate::db::Db;

/// A client of a store nobody listens at: any call the sink makes to it fails.
async fn unreachable_store() -> S3Client {
    let mut cfg = S3Config::new("us-east-1");
    cfg.endpoint = Some("http://127.0.0.1:1".into());
    cfg.access_key_id = Some("key".into());
    cfg.secret_access_key = Some("secret".into());
    cfg.force_path_style = true;
    cfg.connect_timeout = Duration::from_secs(1);
    cfg.op_timeout = Duration::from_secs(2);
    S3Client::new(cfg).await.expect("client")
}

#[tokio::test]
async fn a_rollback_removes_only_what_this_job_delivered() {
    let db = Db::open(Path::new(":memory:")).unwrap();
    let sink = S3Sink::new(
        unreachable_store().await,
        "work".into(),
        db.clone(),
        "job-b",
    );
    // Never delivered by this job (another tenant's file, one there before): left alone,
    // without asking the store. Before, the delete went to the store (here: an error).
    let left = sink.remove("output", "acme/a.mp4").await;
    assert!(left.is_ok(), "{left:?}");
    // Another job's delivery is not this job's.
    db.record_delivery("job-a", "output", "acme/b.mp4").unwrap();
    assert!(sink.remove("output", "acme/b.mp4").await.is_ok());
    // What this job recorded (a run before a restart) is removed: the store is asked.
    db.record_delivery("job-b", "output", "beta/a.mp4").unwrap();
    let asked = sink.remove("output", "beta/a.mp4").await;
    assert!(
        asked.is_err(),
        "the unreachable store was not asked: {asked:?}"
    );
    // So is what this run copied (known without the database).
    sink.this_run()
        .insert(("output".to_string(), "beta/b.mp4".to_string()));
    assert!(sink.remove("output", "beta/b.mp4").await.is_err());
}
