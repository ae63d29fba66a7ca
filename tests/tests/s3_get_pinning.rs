//! Downloads pinned to the version the dispatcher measured, against a real Garage server: an
//! input replaced after its HEAD is not fetched (If-Match on the HEAD's ETag), and a body
//! longer than the HEAD said is refused while it is written, leaving no file behind.
//!
//! Run with `cargo test -p tessera-tests --test s3_get_pinning` (needs the `garage` binary).

use tessera_farm::store::Store;
use tessera_tests::garage::{store_on_garage, test_bytes as data, write_file as file};

const BUCKET: &str = "tessera-test";
const KEY: &str = "in/a.mp4";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_replaced_after_its_head_is_not_fetched() {
    let (_garage, store, dir) = store_on_garage(BUCKET, |_| {}).await;
    store
        .put_file(KEY, &file(&dir, "a.bin", &data(100_000, 1)))
        .await
        .unwrap();
    let seen = store.head(KEY).await.unwrap().unwrap();
    let dst = dir.path().join("staged/input");
    let n = store
        .get_file_if_match(KEY, &dst, &seen.etag, seen.size)
        .await
        .unwrap();
    assert_eq!(n, 100_000);
    store
        .put_file(KEY, &file(&dir, "b.bin", &data(300_000, 2)))
        .await
        .unwrap();
    std::fs::remove_file(&dst).unwrap();
    let err = store
        .get_file_if_match(KEY, &dst, &seen.etag, seen.size)
        .await
        .expect_err("a replaced input was fetched");
    let text = err.to_string();
    assert!(text.contains("changed") && text.contains(KEY), "{text}");
    assert!(!dst.exists(), "a file was left at {}", dst.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_longer_than_its_head_said_is_refused() {
    let (_garage, store, dir) = store_on_garage(BUCKET, |_| {}).await;
    store
        .put_file(KEY, &file(&dir, "a.bin", &data(200_000, 1)))
        .await
        .unwrap();
    let seen = store.head(KEY).await.unwrap().unwrap();
    let dst = dir.path().join("staged/input");
    let err = store
        .get_file_if_match(KEY, &dst, &seen.etag, 150_000)
        .await
        .expect_err("more bytes than allowed were fetched");
    let text = err.to_string();
    assert!(text.contains("150000") && text.contains(KEY), "{text}");
    assert!(!dst.exists(), "a file was left at {}", dst.display());
    let leftovers = std::fs::read_dir(dir.path().join("staged"))
        .unwrap()
        .count();
    assert_eq!(leftovers, 0, "a temporary file was left");
}

/// A body that breaks off mid-transfer (a partition, a store restart) is the store being
/// unavailable, not refusing: `patiently` waits it out. Before, it was a store error that
/// failed the job (`input_unreadable`: chaos, a dispatcher-store partition).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_breaks_off_is_retried_not_refused() {
    use tessera_farm::store::S3Client;
    use tessera_farm::FarmError;
    use tessera_tests::s3_faults::S3Faults;

    let (garage, direct, dir) = store_on_garage(BUCKET, |_| {}).await;
    direct
        .put_file(KEY, &file(&dir, "a.bin", &data(300_000, 1)))
        .await
        .unwrap();
    let door = S3Faults::start(&garage.endpoint);
    let mut cfg = garage.s3_config();
    cfg.endpoint = Some(door.endpoint.clone());
    let store = S3Client::new(cfg).await.unwrap().store(BUCKET);
    let seen = store.head(KEY).await.unwrap().unwrap();
    let dst = dir.path().join("staged/input");
    door.cut_next_read(KEY, 50_000);
    let err = store
        .get_file_if_match(KEY, &dst, &seen.etag, seen.size)
        .await
        .expect_err("a body cut at 50000 bytes was taken whole");
    assert!(
        matches!(err, FarmError::StoreUnavailable { .. }),
        "a broken-off body is not retried: {err}"
    );
    assert!(err.to_string().contains(KEY), "{err}");
    assert!(!dst.exists(), "a part was left at {}", dst.display());
    let n = store
        .get_file_if_match(KEY, &dst, &seen.etag, seen.size)
        .await
        .unwrap();
    assert_eq!(
        (n, std::fs::read(&dst).unwrap()),
        (300_000, data(300_000, 1))
    );
}
