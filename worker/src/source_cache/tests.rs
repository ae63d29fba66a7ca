use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// A fetch that writes `bytes` bytes after a short pause and counts its calls.
async fn write(path: PathBuf, bytes: usize, calls: &AtomicUsize) -> Result<u64, FarmError> {
    calls.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(20)).await;
    std::fs::write(&path, vec![7u8; bytes]).map_err(|e| FarmError::io(&path, e))?;
    Ok(bytes as u64)
}

#[tokio::test]
async fn slots_asking_at_once_share_one_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let cache = SourceCache::new(dir.path().join("sources"), 1 << 20);
    let calls = AtomicUsize::new(0);
    let ask = || cache.get("j", "jobs/j/1/source/input", |p| write(p, 100, &calls));
    let (a, b, c) = tokio::join!(ask(), ask(), ask());
    let (a, b, c) = (a.unwrap(), b.unwrap(), c.unwrap());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(a.path(), b.path());
    assert_eq!(b.path(), c.path());
    assert_eq!(std::fs::read(a.path()).unwrap().len(), 100);
}

#[tokio::test]
async fn a_failed_fetch_leaves_no_file_and_the_next_ask_fetches_again() {
    let dir = tempfile::tempdir().unwrap();
    let cache = SourceCache::new(dir.path().to_path_buf(), 1 << 20);
    let failed = cache
        .get("job-k", "k", |p: PathBuf| async move {
            std::fs::write(&p, b"half").unwrap();
            Err(FarmError::BadMessage("store went away".into()))
        })
        .await;
    assert!(failed.is_err());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let calls = AtomicUsize::new(0);
    let held = cache
        .get("job-k", "k", |p| write(p, 10, &calls))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(std::fs::read(held.path()).unwrap().len(), 10);
}

#[tokio::test]
async fn over_budget_the_least_recently_used_free_source_goes() {
    let dir = tempfile::tempdir().unwrap();
    let cache = SourceCache::new(dir.path().to_path_buf(), 250);
    let calls = AtomicUsize::new(0);
    let first = cache
        .get("job-a", "a", |p| write(p, 100, &calls))
        .await
        .unwrap();
    let first_path = first.path().to_path_buf();
    drop(first);
    let held = cache
        .get("job-b", "b", |p| write(p, 100, &calls))
        .await
        .unwrap();
    // Still within budget: both stay.
    assert_eq!(cache.len(), 2);
    // A third source takes the cache over budget: "a" (free, least recently used) goes,
    // "b" stays because a cut holds it.
    let third = cache
        .get("job-c", "c", |p| write(p, 100, &calls))
        .await
        .unwrap();
    assert_eq!(cache.len(), 2);
    assert!(!first_path.exists());
    assert!(held.path().exists() && third.path().exists());
    // "a" asked again is fetched again.
    cache
        .get("job-a", "a", |p| write(p, 100, &calls))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_source_idle_past_the_limit_goes_even_within_budget() {
    let dir = tempfile::tempdir().unwrap();
    let cache = SourceCache::new(dir.path().to_path_buf(), 1 << 30);
    let calls = AtomicUsize::new(0);
    let old = cache
        .get("job-old", "old", |p| write(p, 10, &calls))
        .await
        .unwrap();
    let old_path = old.path().to_path_buf();
    drop(old);
    cache.evict("other", Instant::now() + IDLE + Duration::from_secs(1));
    assert_eq!(cache.len(), 0);
    assert!(!old_path.exists());
}

#[tokio::test]
async fn an_ended_jobs_sources_go_unless_a_cut_reads_them_and_no_directory_stays() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sources");
    let cache = SourceCache::new(root.clone(), 1 << 30);
    let calls = AtomicUsize::new(0);
    let read = cache
        .get("a", "ka", |p| write(p, 10, &calls))
        .await
        .unwrap();
    let free = cache
        .get("b", "kb", |p| write(p, 10, &calls))
        .await
        .unwrap();
    let free_path = free.path().to_path_buf();
    drop(free);
    assert_eq!(cache.free_jobs(), vec!["b".to_string()]);
    cache.remove_job("b");
    assert!(!free_path.exists());
    // Job "a" ended while a cut still reads its source: it stays until the cut lets go.
    cache.remove_job("a");
    assert!(read.path().exists());
    let read_path = read.path().to_path_buf();
    drop(read);
    cache.remove_job("a");
    assert!(!read_path.exists());
    assert_eq!(cache.len(), 0);
    assert!(!root.exists(), "an empty cache left its directory");
}
