//! The S3 store against a real Garage server: round trips, missing keys, prefix deletes, key
//! validation, presigned uploads, listings and error reasons (multipart uploads and their
//! aborts: `s3_multipart.rs`).
//!
//! Run with `cargo test -p tessera-tests --test s3_store` (needs the `garage` binary).

use std::net::TcpListener;
use std::time::{Duration, Instant};

use tessera_farm::store::{ObjectInfo, S3Client, S3Config, Store};
use tessera_farm::FarmError;
use tessera_tests::garage::{
    http_put, raw_http_put, store_on_garage, test_bytes as data, write_file as file,
};

const BUCKET: &str = "tessera-test";

fn reason(err: &FarmError) -> &str {
    match err {
        FarmError::Store { reason, .. } | FarmError::StoreUnavailable { reason, .. } => reason,
        other => panic!("expected a store error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_get_exists_round_trip() {
    let (_garage, store, dir) = store_on_garage(BUCKET, |_| {}).await;
    let bytes = data(300 * 1024 + 7, 1);
    let src = file(&dir, "src.bin", &bytes);
    let key = "jobs/j1/chunks/000001.nut";
    assert!(!store.exists(key).await.unwrap());
    assert_eq!(store.put_file(key, &src).await.unwrap(), bytes.len() as u64);
    assert!(store.exists(key).await.unwrap());
    let info = store.head(key).await.unwrap().expect("head");
    assert_eq!(info.size, bytes.len() as u64);
    assert!(
        !info.etag.is_empty() && !info.etag.contains('"'),
        "{info:?}"
    );

    // Into a directory that does not exist yet, then over an existing file.
    let dst = dir.path().join("out/nested/dst.bin");
    assert_eq!(store.get_file(key, &dst).await.unwrap(), bytes.len() as u64);
    assert!(std::fs::read(&dst).unwrap() == bytes, "bytes differ");
    let other = data(1000, 2);
    std::fs::write(&src, &other).unwrap();
    store.put_file(key, &src).await.unwrap();
    store.get_file(key, &dst).await.unwrap();
    assert_eq!(std::fs::read(&dst).unwrap(), other);
    // Nothing but the destination is left in its directory (no temporary files).
    let names: Vec<_> = std::fs::read_dir(dir.path().join("out/nested"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec!["dst.bin"]);

    // An empty file.
    let empty = file(&dir, "empty", b"");
    assert_eq!(store.put_file("jobs/j1/empty", &empty).await.unwrap(), 0);
    let dst = dir.path().join("empty.out");
    assert_eq!(store.get_file("jobs/j1/empty", &dst).await.unwrap(), 0);
    assert_eq!(std::fs::read(&dst).unwrap(), b"");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_of_missing_key_errors_and_leaves_no_file() {
    let (_garage, store, dir) = store_on_garage(BUCKET, |_| {}).await;
    let dst = dir.path().join("dst.bin");
    let err = store.get_file("jobs/none/x.nut", &dst).await.unwrap_err();
    assert_eq!(reason(&err), "no such object");
    assert_eq!(err.code(), "store_error");
    assert!(!dst.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert!(store.head("jobs/none/x.nut").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_prefix_removes_exactly_the_prefix_in_batches() {
    let (_garage, store, dir) = store_on_garage(BUCKET, |_| {}).await;
    let src = file(&dir, "tiny", b"x");
    // 1100 objects: more than one list page and one DeleteObjects batch (a few seconds).
    const N: usize = 1100;
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..16 {
        let (store, src) = (store.clone(), src.clone());
        tasks.spawn(async move {
            for i in (worker..N).step_by(16) {
                let key = format!("jobs/a/seg/{i:05}");
                store.put_file(&key, &src).await.unwrap();
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let keep = ["jobs/ab/x", "jobs/b/x", "jobs/a", "other"];
    for key in keep {
        store.put_file(key, &src).await.unwrap();
    }
    let listed = store.list("jobs/a/", None, 5000).await.unwrap();
    assert_eq!(listed.len(), N, "listing across pages");

    assert_eq!(store.delete_prefix("jobs/a").await.unwrap(), N as u64);
    assert!(store.list("jobs/a/", None, 10).await.unwrap().is_empty());
    for key in keep {
        assert!(store.exists(key).await.unwrap(), "{key} was deleted");
    }
    assert_eq!(store.delete_prefix("jobs/a/").await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_keys_are_refused() {
    let (_garage, store, dir) = store_on_garage(BUCKET, |_| {}).await;
    let src = file(&dir, "f", b"data");
    let dst = dir.path().join("g");
    macro_rules! refused {
        ($call:expr) => {
            let result = $call.map(drop);
            let refused = matches!(result, Err(FarmError::InvalidKey(_)));
            assert!(refused, "{}: {result:?}", stringify!($call));
        };
    }
    for bad in [
        "", "/abs", "a/../b", "..", "a//b", "a/./b", "a\\b", "a\u{7f}b", "a\nb",
    ] {
        refused!(store.put_file(bad, &src).await);
        refused!(store.get_file(bad, &dst).await);
        refused!(store.exists(bad).await);
        refused!(store.head(bad).await);
        refused!(store.delete_prefix(bad).await);
        refused!(store.presign_put(bad, Duration::from_secs(60)).await);
        if !bad.is_empty() {
            refused!(store.list(bad, None, 10).await);
            refused!(store.list("ok/", Some(bad), 10).await);
        }
    }
    assert!(store.list("", None, 10).await.unwrap().is_empty());
    assert!(!dst.exists());
    // Keys in people's own languages are objects like any other.
    let utf8 = "uploads/vidéo été 動画 🎬.mp4";
    store.put_file(utf8, &src).await.unwrap();
    assert!(store.exists(utf8).await.unwrap());
    let got = dir.path().join("got");
    store.get_file(utf8, &got).await.unwrap();
    assert_eq!(std::fs::read(&got).unwrap(), b"data");
    let listed = store.list("uploads/", None, 10).await.unwrap();
    assert_eq!(
        listed.iter().map(|o| o.key.as_str()).collect::<Vec<_>>(),
        [utf8]
    );
    store.delete_prefix("uploads/").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presigned_put_uploads_an_object() {
    let (garage, store, dir) = store_on_garage(BUCKET, |_| {}).await;
    let bytes = data(200_000, 6);
    let src = file(&dir, "upload.mp4", &bytes);
    let key = "in/My Video (1).mp4";
    let url = store.presign_put(key, Duration::from_secs(300)).await;
    let url = url.unwrap();
    assert!(url.starts_with(&garage.endpoint), "{url}");
    assert!(
        !url.contains(&garage.secret_access_key),
        "secret in the URL"
    );
    let put = tokio::task::spawn_blocking(move || http_put(&url, &src));
    assert_eq!(put.await.unwrap(), 200);
    let info = store.head(key).await.unwrap().unwrap();
    assert_eq!(info.size, bytes.len() as u64);
    let dst = dir.path().join("back.mp4");
    store.get_file(key, &dst).await.unwrap();
    assert!(std::fs::read(&dst).unwrap() == bytes, "bytes differ");

    // The raw HTTP/1.1 fallback (used where curl is missing) works too.
    let url = store
        .presign_put("in/raw.bin", Duration::from_secs(300))
        .await;
    let url = url.unwrap();
    let put = tokio::task::spawn_blocking(move || raw_http_put(&url, &data(1000, 7)));
    assert_eq!(put.await.unwrap(), 200);
    assert_eq!(store.head("in/raw.bin").await.unwrap().unwrap().size, 1000);

    // An expired URL is refused (AWS answers 403, Garage 400).
    let url = store
        .presign_put("in/late.bin", Duration::from_secs(1))
        .await;
    let url = url.unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let put = tokio::task::spawn_blocking(move || raw_http_put(&url, b"late"));
    let status = put.await.unwrap();
    assert!((400..500).contains(&status), "expired URL: HTTP {status}");
    assert!(!store.exists("in/late.bin").await.unwrap());
}

/// Behind compose or a load balancer the services reach the store by one address and clients
/// by another: presigned URLs must name (and be signed for) the public one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presigned_urls_name_the_public_endpoint() {
    let public = |endpoint: &str| endpoint.replace("127.0.0.1", "localhost");
    let (garage, store, dir) = store_on_garage(BUCKET, |cfg| {
        cfg.public_endpoint = cfg.endpoint.as_deref().map(public);
    })
    .await;
    let url = store
        .presign_put("in/public.bin", Duration::from_secs(300))
        .await
        .unwrap();
    assert!(url.starts_with(&public(&garage.endpoint)), "{url}");
    let src = file(&dir, "public.bin", &data(5000, 8));
    let put = tokio::task::spawn_blocking(move || http_put(&url, &src));
    assert_eq!(put.await.unwrap(), 200);
    // The services' own requests still go to `endpoint`.
    assert_eq!(
        store.head("in/public.bin").await.unwrap().unwrap().size,
        5000
    );

    // A URL signed for the public host is refused when sent to another one.
    let url = store
        .presign_put("in/elsewhere.bin", Duration::from_secs(300))
        .await
        .unwrap()
        .replace("localhost", "127.0.0.1");
    let put = tokio::task::spawn_blocking(move || raw_http_put(&url, b"x"));
    let status = put.await.unwrap();
    assert!((400..500).contains(&status), "re-hosted URL: HTTP {status}");
    assert!(store.head("in/elsewhere.bin").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_with_prefix_start_after_and_max() {
    let (_garage, store, dir) = store_on_garage(BUCKET, |_| {}).await;
    let names = ["list/a", "list/b", "list/c/d", "list/e", "listing", "other"];
    for (i, key) in names.iter().enumerate() {
        let src = file(&dir, &format!("f{i}"), &data(100 + i, i as u64));
        store.put_file(key, &src).await.unwrap();
    }
    let keys = |v: &[ObjectInfo]| -> Vec<String> { v.iter().map(|o| o.key.clone()).collect() };
    let all = store.list("list/", None, 100).await.unwrap();
    assert_eq!(keys(&all), ["list/a", "list/b", "list/c/d", "list/e"]);
    for info in &all {
        let index = names.iter().position(|n| *n == info.key).unwrap();
        assert_eq!(info.size, 100 + index as u64, "{info:?}");
        assert!(!info.etag.is_empty() && !info.etag.contains('"'));
        let head = store.head(&info.key).await.unwrap().unwrap();
        assert_eq!(&head, info, "listing differs from HEAD");
    }
    let after = store.list("list/", Some("list/b"), 100).await.unwrap();
    assert_eq!(keys(&after), ["list/c/d", "list/e"]);
    let two = store.list("list/", None, 2).await.unwrap();
    assert_eq!(keys(&two), ["list/a", "list/b"]);
    let next = store.list("list/", Some("list/b"), 1).await.unwrap();
    assert_eq!(keys(&next), ["list/c/d"]);
    assert!(store.list("list/", None, 0).await.unwrap().is_empty());
    assert_eq!(store.list("", None, 100).await.unwrap().len(), names.len());
    assert_eq!(store.list("list", None, 100).await.unwrap().len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_readable_bounded_and_keep_secrets() {
    let (garage, _store, dir) = store_on_garage(BUCKET, |_| {}).await;
    let src = file(&dir, "f", b"data");
    let cfg = garage.s3_config();
    let debug = format!("{cfg:?}");
    assert!(!debug.contains(&garage.secret_access_key) && debug.contains("redacted"));
    let store_with = |cfg: S3Config| async { S3Client::new(cfg).await.unwrap().store(BUCKET) };

    // A bucket that does not exist: the service's code, not a Debug dump.
    let client = S3Client::new(cfg.clone()).await.unwrap();
    let missing_bucket = client.store("no-such-bucket");
    let err = missing_bucket.put_file("k", &src).await.unwrap_err();
    let why = reason(&err);
    assert!(why.contains("NoSuchBucket"), "{why}");
    assert!(!why.contains("ServiceError") && !why.contains('{'), "{why}");

    // A wrong secret: refused, and the secret appears nowhere in the error.
    let mut wrong = cfg.clone();
    wrong.secret_access_key = Some("0".repeat(64));
    let err = store_with(wrong)
        .await
        .put_file("k", &src)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("HTTP 403"), "{text}");
    assert!(!text.contains(&"0".repeat(64)) && !text.contains(&garage.secret_access_key));

    // A server that accepts connections and never answers: bounded by the per-attempt
    // timeout (1 s here), 3 attempts.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut stuck = cfg.clone();
    stuck.endpoint = Some(format!("http://{}", silent.local_addr().unwrap()));
    stuck.op_timeout = Duration::from_secs(1);
    let start = Instant::now();
    let err = store_with(stuck).await.exists("k").await.unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    assert!(reason(&err).contains("timed out"), "{err}");
    // Unreachable is told apart from refused: workers wait for it instead of failing tasks.
    assert_eq!(err.code(), "store_unavailable");
    let refused = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut down = garage.s3_config();
    down.endpoint = Some(format!("http://{}", refused.local_addr().unwrap()));
    drop(refused);
    let err = store_with(down).await.exists("k").await.unwrap_err();
    assert_eq!(err.code(), "store_unavailable", "{err}");

    // Half the credentials is a configuration error.
    let mut half = cfg;
    half.secret_access_key = None;
    assert!(S3Client::new(half).await.is_err());
}
