//! Server-side copies are pinned to the object they were asked to copy, against a real Garage
//! server: a source replaced after its HEAD (a late duplicate stitch overwriting the work
//! object that passed QC) is not delivered, neither by one CopyObject nor by a multipart copy
//! of ranges, and nothing appears at the destination.
//!
//! Why not "replaced between two part copies": nothing here can hold the copy between two of
//! its parts, so the source is replaced before the first part; every part carries the same
//! `x-amz-copy-source-if-match`, so the server refuses a part sent after the replacement,
//! whichever it is.
//!
//! Run with `cargo test -p tessera-tests --test s3_copy_pinning` (needs the `garage` binary).

use std::time::{Duration, Instant};

use tessera_farm::store::{S3Config, S3Store, Store};
use tessera_tests::garage::{store_on_garage, test_bytes as data, write_file as file};

const MIB: u64 = 1024 * 1024;
const BUCKET: &str = "tessera-test";
const SRC: &str = "jobs/j1/output/720p.mp4";

/// Copies of more than 8 MiB go in 5 MiB parts.
fn small_copy_parts(cfg: &mut S3Config) {
    cfg.single_copy_max = 8 * MIB;
    cfg.copy_part_size = 5 * MIB;
}

/// Puts `len` bytes at [`SRC`], HEADs it, then replaces it with other bytes of the same size;
/// returns the HEAD of the first, the one that "passed QC".
async fn replaced_after_head(
    store: &S3Store,
    dir: &tempfile::TempDir,
    len: u64,
) -> tessera_farm::store::ObjectInfo {
    store
        .put_file(SRC, &file(dir, "a.bin", &data(len as usize, 1)))
        .await
        .unwrap();
    let checked = store.head(SRC).await.unwrap().unwrap();
    store
        .put_file(SRC, &file(dir, "b.bin", &data(len as usize, 2)))
        .await
        .unwrap();
    let now = store.head(SRC).await.unwrap().unwrap();
    assert_ne!(checked.etag, now.etag, "the replacement has the same ETag");
    checked
}

/// Waits (20 s at most) until the bucket has no incomplete multipart upload.
async fn no_upload_left(store: &S3Store) {
    let start = Instant::now();
    while !store.incomplete_uploads("").await.unwrap().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(20), "upload left");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Copies the version `checked` to `dst` and checks it is refused, naming the destination and
/// saying the source changed, with nothing delivered.
async fn copy_is_refused(store: &S3Store, checked: &tessera_farm::store::ObjectInfo, dst: &str) {
    let err = store
        .copy_version(BUCKET, checked, dst)
        .await
        .expect_err("a replaced source was copied");
    let text = err.to_string();
    assert!(text.contains(dst), "{text}");
    assert!(text.contains("changed"), "{text}");
    assert!(text.contains(SRC), "{text}");
    assert!(store.head(dst).await.unwrap().is_none(), "{dst} delivered");
    no_upload_left(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_replaced_after_its_head_is_not_copied_in_parts() {
    let (_garage, store, dir) = store_on_garage(BUCKET, small_copy_parts).await;
    let checked = replaced_after_head(&store, &dir, 12 * MIB).await;
    copy_is_refused(&store, &checked, "out/big.mp4").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_replaced_after_its_head_is_not_copied_whole() {
    let (_garage, store, dir) = store_on_garage(BUCKET, small_copy_parts).await;
    let checked = replaced_after_head(&store, &dir, MIB).await;
    copy_is_refused(&store, &checked, "out/small.mp4").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_source_is_copied_in_parts_byte_for_byte() {
    let (_garage, store, dir) = store_on_garage(BUCKET, small_copy_parts).await;
    let bytes = data(12 * MIB as usize + 7, 3);
    store
        .put_file(SRC, &file(&dir, "a.bin", &bytes))
        .await
        .unwrap();
    let size = store.copy_from(BUCKET, SRC, "out/big.mp4").await.unwrap();
    assert_eq!(size, bytes.len() as u64);
    let info = store.head("out/big.mp4").await.unwrap().unwrap();
    assert!(info.etag.ends_with("-3"), "not a 3-part copy: {info:?}");
    let back = dir.path().join("back.bin");
    store.get_file("out/big.mp4", &back).await.unwrap();
    assert!(std::fs::read(&back).unwrap() == bytes, "bytes differ");
}

/// Uploads of more than 8 MiB go in 5 MiB parts, and so do copies.
fn small_parts(cfg: &mut S3Config) {
    small_copy_parts(cfg);
    cfg.multipart_threshold = 8 * MIB;
    cfg.part_size = 5 * MIB;
}

/// The ETag an upload answers is the one a HEAD finds, for one PutObject and for a multipart
/// upload: a stitch reports it with its result and the delivery copies only that object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_answers_the_etag_its_head_finds_whole_and_in_parts() {
    let (_garage, store, dir) = store_on_garage(BUCKET, small_parts).await;
    for (name, len) in [("small.bin", MIB), ("big.bin", 12 * MIB)] {
        let src = file(&dir, name, &data(len as usize, 4));
        let stored = store.put_file_tagged(SRC, &src).await.unwrap();
        let head = store.head(SRC).await.unwrap().unwrap();
        assert_eq!(stored.size, len, "{name}");
        assert_eq!(
            stored.etag.as_deref(),
            Some(head.etag.trim_matches('"')),
            "{name}"
        );
    }
}

/// Review N6: the work object a stitch stored after its QC gate, replaced by another writer
/// of the key (a duplicate stitch) before the delivery's HEAD. Before, the delivery HEADed the
/// key and copied whatever it found (the replacement, never checked); pinned to the ETag the
/// stitch reported, nothing is delivered and the error names both objects. Whole and in parts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_object_replaced_after_its_qc_is_not_delivered() {
    let (_garage, store, dir) = store_on_garage(BUCKET, small_parts).await;
    for (dst, len) in [("out/small.mp4", MIB), ("out/big.mp4", 12 * MIB)] {
        let checked = store
            .put_file_tagged(SRC, &file(&dir, "a.bin", &data(len as usize, 5)))
            .await
            .unwrap();
        let checked_etag = checked.etag.expect("Garage answers an ETag");
        store
            .put_file(SRC, &file(&dir, "b.bin", &data(len as usize, 6)))
            .await
            .unwrap();
        let now = store.head(SRC).await.unwrap().unwrap();
        assert_ne!(now.etag, checked_etag, "the replacement has the same ETag");
        let err = store
            .copy_tagged(BUCKET, SRC, Some(&checked_etag), dst)
            .await
            .expect_err("the replacement was delivered");
        let text = err.to_string();
        for part in [dst, SRC, checked_etag.as_str(), now.etag.as_str()] {
            assert!(text.contains(part), "{part} not named: {text}");
        }
        assert!(store.head(dst).await.unwrap().is_none(), "{dst} delivered");
        // The object of the ETag asked for is delivered, byte for byte.
        let size = store
            .copy_tagged(BUCKET, SRC, Some(&now.etag), dst)
            .await
            .unwrap();
        assert_eq!(size, len);
        let back = dir.path().join("back.bin");
        store.get_file(dst, &back).await.unwrap();
        assert!(
            std::fs::read(&back).unwrap() == data(len as usize, 6),
            "bytes differ"
        );
        store.delete(dst).await.unwrap();
    }
    no_upload_left(&store).await;
}
