//! The sources of the cut jobs this worker runs, each fetched once onto the local staging
//! disk and shared by its slots (model's wire/cut.rs).
//!
//! Why: every segment task of a cut job names the same source; fetching it per segment
//! would move the whole input once per segment. A source is fetched once per job and worker.
//! It goes when its job has ended (the worker's sweep, [`SWEEP_EVERY`], looks for the job's
//! end marker), when no task has used it for [`IDLE`], or, once the cache holds more than its
//! budget, as the least recently used; never while a cut is reading it. An empty cache
//! leaves no directory behind.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tessera_farm::FarmError;

/// The bytes of sources the cache keeps before it removes the least recently used. Why 8
/// GiB: a 2-hour 1080p source is about that, and the staging disk (40 GiB in the shipped
/// manifests) also holds the chunks and encodes of every slot. The source in use is kept
/// whatever its size.
pub(crate) const BUDGET_BYTES: u64 = 8 << 30;

/// A source no task has used for this long is removed, whether or not its job has ended.
pub(crate) const IDLE: Duration = Duration::from_secs(15 * 60);

/// How often the worker looks for the end markers of the jobs whose sources it holds.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// The cache: one file per source key under `dir`.
pub(crate) struct SourceCache {
    dir: PathBuf,
    budget: u64,
    entries: Mutex<HashMap<String, Arc<Entry>>>,
}

/// One source: its job, its file, once fetched (its size), and when a task last asked for it.
struct Entry {
    job: String,
    path: PathBuf,
    fetched: tokio::sync::OnceCell<u64>,
    last_used: Mutex<Instant>,
}

/// A fetched source, held while a cut reads it: the cache removes none that is held.
pub(crate) struct HeldSource(Arc<Entry>);

impl HeldSource {
    /// The source's local file.
    pub(crate) fn path(&self) -> &Path {
        &self.0.path
    }
}

impl SourceCache {
    /// A cache in `dir` (created on the first fetch) keeping about `budget` bytes.
    pub(crate) fn new(dir: PathBuf, budget: u64) -> SourceCache {
        SourceCache {
            dir,
            budget,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The source of `job` stored under `key`, fetched by `fetch` into the path it is given
    /// unless it is here already. Slots asking for the same source at once share one fetch;
    /// a failed fetch leaves nothing behind, and the next ask tries again.
    pub(crate) async fn get<F, Fut>(
        &self,
        job: &str,
        key: &str,
        fetch: F,
    ) -> Result<HeldSource, FarmError>
    where
        F: FnOnce(PathBuf) -> Fut,
        Fut: Future<Output = Result<u64, FarmError>>,
    {
        let entry = {
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let path = self.dir.join(key.replace('/', "_"));
            entries
                .entry(key.to_string())
                .or_insert_with(|| {
                    Arc::new(Entry {
                        job: job.to_string(),
                        path,
                        fetched: tokio::sync::OnceCell::new(),
                        last_used: Mutex::new(Instant::now()),
                    })
                })
                .clone()
        };
        entry
            .fetched
            .get_or_try_init(|| async {
                tokio::fs::create_dir_all(&self.dir)
                    .await
                    .map_err(|e| FarmError::io(&self.dir, e))?;
                let part = entry.path.with_extension("part");
                let fetched = fetch(part.clone()).await;
                let bytes = match fetched {
                    Ok(bytes) => bytes,
                    Err(e) => {
                        let _ = tokio::fs::remove_file(&part).await;
                        return Err(e);
                    }
                };
                tokio::fs::rename(&part, &entry.path)
                    .await
                    .map_err(|e| FarmError::io(&entry.path, e))?;
                Ok(bytes)
            })
            .await?;
        *entry.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.evict(key, Instant::now());
        Ok(HeldSource(entry))
    }

    /// The jobs whose sources no cut is reading now (the sweep asks whether they ended).
    pub(crate) fn free_jobs(&self) -> Vec<String> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let mut jobs: Vec<String> = entries
            .values()
            .filter(|e| Arc::strong_count(e) == 1)
            .map(|e| e.job.clone())
            .collect();
        jobs.sort();
        jobs.dedup();
        jobs
    }

    /// Removes the sources of `job` that no cut is reading (its job has ended).
    pub(crate) fn remove_job(&self, job: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|_, e| {
            let gone = e.job == job && Arc::strong_count(e) == 1;
            if gone {
                let _ = std::fs::remove_file(&e.path);
            }
            !gone
        });
        self.remove_dir_if_empty(&entries);
    }

    /// Removes the cache's directory once it holds no source. Under the entries' lock: a
    /// source is entered before its directory is made, so none is being fetched now.
    fn remove_dir_if_empty(&self, entries: &HashMap<String, Arc<Entry>>) {
        if entries.is_empty() {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }

    /// Removes sources idle for [`IDLE`], then the least recently used while the cache
    /// holds more than its budget; never `keep` nor a source being fetched or read. Entries
    /// of fetches that failed and that nobody waits on go too.
    fn evict(&self, keep: &str, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|k, e| k == keep || Arc::strong_count(e) > 1 || e.fetched.initialized());
        let used = |e: &Entry| *e.last_used.lock().unwrap_or_else(|p| p.into_inner());
        let mut free: Vec<(Instant, String, u64)> = entries
            .iter()
            .filter(|(k, e)| *k != keep && Arc::strong_count(e) == 1)
            .filter_map(|(k, e)| e.fetched.get().map(|b| (used(e), k.clone(), *b)))
            .collect();
        free.sort();
        let mut total: u64 = entries.values().filter_map(|e| e.fetched.get()).sum();
        for (last, key, bytes) in free {
            if total <= self.budget && now.duration_since(last) < IDLE {
                break;
            }
            if let Some(e) = entries.remove(&key) {
                let _ = std::fs::remove_file(&e.path);
                total -= bytes;
            }
        }
        self.remove_dir_if_empty(&entries);
    }

    /// How many sources the cache holds (fetched or being fetched).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
