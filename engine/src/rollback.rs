//! Taking a failed job's delivered outputs back, and naming what could not be taken back.
//!
//! Why: a delivery that fails because the store is down usually cannot delete either; one
//! try per delete left a `failed` job with outputs at its destinations, and nobody was told.
//! Each delete is retried through store outages (jittered, as `patiently` does) until one
//! deadline shared by the whole rollback; whatever is still there is named in the job's
//! error, so an operator knows what to remove.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tessera_farm::FarmError;
use tokio::time::Instant;

use crate::parallel::TRANSFERS;
use crate::patience::{patiently_until, STORE_PATIENCE};
use crate::request::OutputSink;

/// How long one rollback, all its deletes together, may wait for the store to come back.
/// Why shared: a package is thousands of objects; a patience each would hold a failed job
/// for days when the store stays down.
pub(crate) const ROLLBACK_PATIENCE: Duration = STORE_PATIENCE;

/// Leftovers named in the error at most; the rest are counted.
const NAMED: usize = 5;

/// One rollback: its deadline (from its first delete) and what it could not remove.
#[derive(Default)]
pub(crate) struct Rollback {
    deadline: Option<Instant>,
    left: Vec<String>,
}

impl Rollback {
    /// The shared deadline, set by the first delete (the failed delivery may itself have
    /// waited a patience; the rollback gets its own).
    fn deadline(&mut self) -> Instant {
        *self
            .deadline
            .get_or_insert_with(|| Instant::now() + ROLLBACK_PATIENCE)
    }

    /// Removes `bucket`/`key` for every key, a few at a time, each retried while the store
    /// is unavailable and the deadline allows; remembers each one left behind, with why.
    pub(crate) async fn remove_objects(
        &mut self,
        sink: &Arc<dyn OutputSink>,
        bucket: &str,
        keys: Vec<String>,
    ) {
        let deadline = self.deadline();
        let mut outstanding: HashSet<String> = keys.iter().cloned().collect();
        let (mut pending, mut running) = (keys.into_iter(), tokio::task::JoinSet::new());
        loop {
            while running.len() < TRANSFERS {
                let Some(key) = pending.next() else { break };
                let (sink, bucket) = (sink.clone(), bucket.to_string());
                running.spawn(async move {
                    let removed = patiently_until("remove delivered output", deadline, || {
                        sink.remove(&bucket, &key)
                    })
                    .await;
                    (key, removed)
                });
            }
            match running.join_next().await {
                Some(Ok((key, removed))) => {
                    outstanding.remove(&key);
                    if let Err(e) = removed {
                        self.left.push(format!("s3://{bucket}/{key} ({e})"));
                    }
                }
                Some(Err(e)) => tracing::error!(bucket, error = %e, "a rollback delete crashed"),
                None => break,
            }
        }
        // Only a crashed delete task leaves a key here.
        for key in outstanding {
            let left = format!("s3://{bucket}/{key} (the delete crashed)");
            self.left.push(left);
        }
    }

    /// Removes a delivered local file; one that cannot be removed (and is there) is left
    /// behind.
    pub(crate) async fn remove_file(&mut self, path: &Path) {
        match tokio::fs::remove_file(path).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                self.left.push(format!("{} ({e})", path.display()));
            }
            _ => {}
        }
    }

    /// The job's error `e`, naming what this rollback left behind (if anything); its code
    /// and class are kept.
    pub(crate) fn fail(mut self, e: FarmError) -> FarmError {
        if self.left.is_empty() {
            return e;
        }
        self.left.sort();
        let mut named = self.left[..self.left.len().min(NAMED)].join(", ");
        if self.left.len() > NAMED {
            named.push_str(&format!(" and {} more", self.left.len() - NAMED));
        }
        tracing::error!(left = %named, "rollback left delivered outputs behind");
        e.with_note(&format!("; left behind after rollback: {named}"))
    }
}

/// Takes back objects a job delivered that this run does not know of: each `(bucket, key)`
/// removed through `sink`, retried through store outages as a failed delivery's own rollback
/// is; returns `e` naming what stays (its code and class kept).
///
/// Why public: a dispatcher restarted inside delivery knows what the run before the crash
/// copied only from its own records; when the resumed run fails, that is taken back too.
pub async fn take_back(
    sink: &Arc<dyn OutputSink>,
    objects: Vec<(String, String)>,
    e: FarmError,
) -> FarmError {
    let mut by_bucket: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (bucket, key) in objects {
        by_bucket.entry(bucket).or_default().push(key);
    }
    let mut rollback = Rollback::default();
    for (bucket, keys) in by_bucket {
        rollback.remove_objects(sink, &bucket, keys).await;
    }
    rollback.fail(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Mutex;
    use tessera_farm::store::Delivered;

    /// A destination store whose deletes fail (store unavailable) the first `failures`
    /// times.
    struct FakeSink {
        objects: Mutex<HashSet<String>>,
        failures: AtomicU32,
        deletes: AtomicU32,
    }

    impl FakeSink {
        fn holding(keys: &[&str], failures: u32) -> Arc<FakeSink> {
            Arc::new(FakeSink {
                objects: Mutex::new(keys.iter().map(|k| k.to_string()).collect()),
                failures: AtomicU32::new(failures),
                deletes: AtomicU32::new(0),
            })
        }

        fn left(&self) -> Vec<String> {
            let mut left: Vec<_> = self.objects.lock().unwrap().iter().cloned().collect();
            left.sort();
            left
        }
    }

    #[async_trait::async_trait]
    impl OutputSink for FakeSink {
        async fn deliver(
            &self,
            _: &str,
            _: Option<&str>,
            _: &str,
            key: &str,
        ) -> Result<Delivered, FarmError> {
            let earlier = !self.objects.lock().unwrap().insert(key.into());
            Ok(Delivered { size: 1, earlier })
        }

        async fn remove(&self, _bucket: &str, key: &str) -> Result<(), FarmError> {
            self.deletes.fetch_add(1, Ordering::SeqCst);
            let failing = self.failures.load(Ordering::SeqCst);
            if failing > 0 {
                self.failures.store(failing - 1, Ordering::SeqCst);
                return Err(FarmError::StoreUnavailable {
                    key: key.into(),
                    reason: "HTTP 503".into(),
                });
            }
            self.objects.lock().unwrap().remove(key);
            Ok(())
        }
    }

    fn refused() -> FarmError {
        FarmError::Store {
            key: "b.mp4".into(),
            reason: "copy refused".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn deletes_are_retried_through_an_outage_until_the_objects_are_gone() {
        let fake = FakeSink::holding(&["a.mp4", "p/seg1.m4s", "p/master.m3u8"], 6);
        let sink: Arc<dyn OutputSink> = fake.clone();
        let mut rollback = Rollback::default();
        let keys = vec!["a.mp4".to_string()];
        rollback.remove_objects(&sink, "out", keys).await;
        let keys = vec!["p/seg1.m4s".to_string(), "p/master.m3u8".to_string()];
        rollback.remove_objects(&sink, "out", keys).await;
        assert_eq!(fake.left(), Vec::<String>::new());
        assert!(fake.deletes.load(Ordering::SeqCst) >= 9);
        // Nothing left: the job's error is the delivery's, unchanged.
        assert_eq!(
            rollback.fail(refused()).to_string(),
            "store b.mp4: copy refused"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn what_a_store_that_stays_down_keeps_is_named_in_the_error() {
        let fake = FakeSink::holding(&["a.mp4"], u32::MAX);
        let sink: Arc<dyn OutputSink> = fake.clone();
        let started = Instant::now();
        let mut rollback = Rollback::default();
        rollback
            .remove_objects(&sink, "out", vec!["a.mp4".into()])
            .await;
        assert_eq!(fake.left(), ["a.mp4"]);
        assert!(fake.deletes.load(Ordering::SeqCst) > 100, "retried");
        assert!(started.elapsed() <= ROLLBACK_PATIENCE);
        let e = rollback.fail(refused());
        assert_eq!(e.code(), "store_error");
        assert_eq!(
            e.to_string(),
            "store b.mp4: copy refused; left behind after rollback: \
             s3://out/a.mp4 (store a.mp4: unavailable: HTTP 503)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn objects_of_an_earlier_run_are_taken_back_through_an_outage() {
        let fake = FakeSink::holding(&["a.mp4", "b.mp4", "keep.mp4"], 3);
        let sink: Arc<dyn OutputSink> = fake.clone();
        let objects = vec![
            ("out".into(), "a.mp4".into()),
            ("out".into(), "b.mp4".into()),
        ];
        let e = take_back(&sink, objects, refused()).await;
        assert_eq!(fake.left(), ["keep.mp4"]);
        assert_eq!(e.to_string(), "store b.mp4: copy refused");
    }

    #[tokio::test(start_paused = true)]
    async fn many_leftovers_are_counted_and_the_code_is_kept() {
        let keys: Vec<String> = (0..8).map(|i| format!("p/{i}.m4s")).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let sink: Arc<dyn OutputSink> = FakeSink::holding(&refs, u32::MAX);
        let mut rollback = Rollback::default();
        rollback.remove_objects(&sink, "out", keys.clone()).await;
        let e = rollback.fail(FarmError::Cancelled { job: "j".into() });
        assert_eq!(e.code(), "cancelled");
        let text = e.to_string();
        assert!(text.starts_with("job j cancelled; left behind after rollback: s3://out/p/0.m4s"));
        assert!(text.ends_with(" and 3 more"), "{text}");
    }
}
