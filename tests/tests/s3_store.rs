//! The S3 store against a real Garage server: round trips, multipart uploads and their abort,
//! missing keys, prefix deletes, key validation, presigned uploads, listings and error reasons.
//!
//! Run with `cargo test -p tessera-tests --test s3_store` (needs the `garage` binary).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tessera_farm::store::{ObjectInfo, S3Client, S3Config, S3Store, Store};
use tessera_farm::FarmError;
use tessera_tests::garage::{http_put, raw_http_put, test_bytes as data, Garage};

const MIB: u64 = 1024 * 1024;
const BUCKET: &str = "tessera-test";

/// A Garage server, a store on its bucket `BUCKET` (config changed by `tweak`), a temp dir.
async fn setup(tweak: impl FnOnce(&mut S3Config)) -> (Garage, S3Store, TempDir) {
    let garage = Garage::start(&[BUCKET]);
    let mut cfg = garage.s3_config();
    tweak(&mut cfg);
    let store = S3Client::new(cfg).await.expect("s3 client").store(BUCKET);
    (garage, store, tempfile::tempdir().unwrap())
}

/// 5 MiB parts from 8 MiB on.
fn small_parts(cfg: &mut S3Config) {
    cfg.part_size = 5 * MIB;
    cfg.multipart_threshold = 8 * MIB;
}

/// Writes `bytes` to `dir/name`.
fn file(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn reason(err: &FarmError) -> &str {
    match err {
        FarmError::Store { reason, .. } | FarmError::StoreUnavailable { reason, .. } => reason,
        other => panic!("expected a store error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_get_exists_round_trip() {
    let (_garage, store, dir) = setup(|_| {}).await;
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
async fn large_file_goes_multipart_and_round_trips() {
    let (_garage, store, dir) = setup(small_parts).await;
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
    let (_garage, store, dir) = setup(small_parts).await;
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
    let (_garage, store, dir) = setup(small_parts).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_of_missing_key_errors_and_leaves_no_file() {
    let (_garage, store, dir) = setup(|_| {}).await;
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
    let (_garage, store, dir) = setup(|_| {}).await;
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
    let (_garage, store, dir) = setup(|_| {}).await;
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
    let (garage, store, dir) = setup(|_| {}).await;
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
    let (garage, store, dir) = setup(|cfg| {
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
    let (_garage, store, dir) = setup(|_| {}).await;
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
    let (garage, _store, dir) = setup(|_| {}).await;
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
