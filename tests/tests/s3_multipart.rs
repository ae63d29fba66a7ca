//! Multipart uploads against a real Garage server: a large file goes up in parts and round
//! trips, and an upload that fails or is cancelled, at any moment, leaves no incomplete
//! upload and no half-made object.
//!
//! Run with `cargo test -p tessera-tests --test s3_multipart` (needs the `garage` binary).

use std::path::Path;
use std::time::{Duration, Instant};

use tessera_farm::store::{S3Config, S3Store, Store};
use tessera_farm::FarmError;
use tessera_tests::garage::{store_on_garage, test_bytes as data, write_file as file};

const MIB: u64 = 1024 * 1024;
const BUCKET: &str = "tessera-test";

/// 5 MiB parts from 8 MiB on.
fn small_parts(cfg: &mut S3Config) {
    cfg.part_size = 5 * MIB;
    cfg.multipart_threshold = 8 * MIB;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_file_goes_multipart_and_round_trips() {
    let (_garage, store, dir) = store_on_garage(BUCKET, small_parts).await;
    let bytes = data(20 * MIB as usize, 3);
    let src = file(&dir, "big.bin", &bytes);
    let key = "jobs/j2/encoded/720p/000001.nut";
    assert_eq!(store.put_file(key, &src).await.unwrap(), bytes.len() as u64);
    let info = store.head(key).await.unwrap().unwrap();
    assert_eq!(info.size, bytes.len() as u64);
    // A multipart ETag ends in "-{parts}".
    assert!(info.etag.ends_with("-4"), "not a 4-part upload: {info:?}");
    let dst = dir.path().join("back.bin");
    assert_eq!(store.get_file(key, &dst).await.unwrap(), bytes.len() as u64);
    assert!(std::fs::read(&dst).unwrap() == bytes, "bytes differ");
    assert!(store.incomplete_uploads("").await.unwrap().is_empty());
}

/// Starts `put_file` in the background and waits until its multipart upload exists on the
/// server; returns the task.
async fn start_multipart_put(
    store: &S3Store,
    key: &str,
    src: &Path,
) -> tokio::task::JoinHandle<Result<u64, FarmError>> {
    let task = {
        let (store, key, src) = (store.clone(), key.to_string(), src.to_path_buf());
        tokio::spawn(async move { store.put_file(&key, &src).await })
    };
    let start = Instant::now();
    while store.incomplete_uploads(key).await.unwrap().is_empty() {
        assert!(!task.is_finished(), "put ended before its upload was seen");
        assert!(start.elapsed() < Duration::from_secs(20), "no upload");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_or_cancelled_multipart_put_leaves_no_upload() {
    let (_garage, store, dir) = store_on_garage(BUCKET, small_parts).await;
    // A missing source fails before anything is sent.
    let missing = dir.path().join("nope");
    let err = store
        .put_file("jobs/j3/missing", &missing)
        .await
        .unwrap_err();
    assert!(matches!(err, FarmError::Io { .. }), "{err:?}");

    // A source that shrinks after the upload was created fails at a later part: the upload
    // must be aborted. (Retried if the whole upload won the race against the truncation.)
    let mut failed = false;
    for attempt in 0..3 {
        let src = file(&dir, "shrinks.bin", &data(40 * MIB as usize, 4));
        let key = format!("jobs/j3/shrinks-{attempt}");
        let task = start_multipart_put(&store, &key, &src).await;
        let shrink = std::fs::OpenOptions::new().write(true).open(&src).unwrap();
        shrink.set_len(MIB).unwrap();
        if let Err(e) = task.await.unwrap() {
            assert!(e.to_string().contains("part"), "{e}");
            assert!(!store.exists(&key).await.unwrap());
            failed = true;
            break;
        }
    }
    assert!(failed, "the shrinking file never made the upload fail");
    // Aborted before put_file returned.
    let left = store.incomplete_uploads("").await.unwrap();
    assert!(left.is_empty(), "uploads left: {left:?}");

    // Cancelled mid-way (the task dropped): the upload is aborted in the background.
    let src = file(&dir, "big.bin", &data(40 * MIB as usize, 5));
    let task = start_multipart_put(&store, "jobs/j3/cancelled", &src).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_no_upload_left(&store).await;
    assert!(!store.exists("jobs/j3/cancelled").await.unwrap());
}

/// Waits (20 s at most) until the bucket has no incomplete multipart upload.
async fn assert_no_upload_left(store: &S3Store) {
    let start = Instant::now();
    loop {
        let left = store.incomplete_uploads("").await.unwrap();
        if left.is_empty() {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "left: {left:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A put cancelled at any moment, including while its CreateMultipartUpload is in flight
/// (the server has made the upload, the client has no id yet), leaves no upload behind, and
/// either the whole object or none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_put_cancelled_at_any_moment_leaves_no_upload() {
    let (_garage, store, dir) = store_on_garage(BUCKET, small_parts).await;
    let bytes = data(10 * MIB as usize, 6);
    let src = file(&dir, "two-parts.bin", &bytes);
    let mut cancelled = 0;
    // Cancel 0, 0.5, 1, ... 30 ms after the put starts: the early ones land inside the
    // create request, the later ones among the parts or after the completion.
    for step in 0..60u64 {
        let key = format!("jobs/j4/at-{step}");
        let task = {
            let (store, key, src) = (store.clone(), key.clone(), src.clone());
            tokio::spawn(async move { store.put_file(&key, &src).await })
        };
        tokio::time::sleep(Duration::from_micros(step * 500)).await;
        task.abort();
        match task.await {
            Ok(result) => {
                assert_eq!(result.unwrap(), bytes.len() as u64);
                let info = store.head(&key).await.unwrap().expect("finished put");
                assert_eq!(info.size, bytes.len() as u64, "{key}");
            }
            Err(e) => {
                assert!(e.is_cancelled(), "{e}");
                cancelled += 1;
            }
        }
    }
    assert!(cancelled > 0, "no put was cancelled mid-way");
    assert_no_upload_left(&store).await;
    // Nothing half-made: a cancelled put left no object (the background abort ran).
    for step in 0..60u64 {
        let key = format!("jobs/j4/at-{step}");
        if let Some(info) = store.head(&key).await.unwrap() {
            assert_eq!(info.size, bytes.len() as u64, "{key}");
        }
    }
}
