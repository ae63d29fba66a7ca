//! Delivery to object destinations, recorded: each server-side copy is written to the job
//! database right after it lands (db/deliveries.rs), so that what a run killed inside
//! delivery copied is known to the run resumed after the restart, and taken back if that run
//! fails.
//!
//! Why here, in the sink: the sink is the one place every delivered object passes, outputs
//! and package files alike, and it already holds the job's identity.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tessera_engine::{JobReport, OutputSink};
use tessera_farm::store::{Delivered, S3Client};
use tessera_farm::FarmError;

use crate::db::Db;

/// Copies a job's stitched outputs from the work bucket to their destination buckets,
/// server-side, and records each copy.
pub(super) struct S3Sink {
    s3: S3Client,
    work_bucket: String,
    db: Db,
    job: String,
    /// `(bucket, key)` copied by this run: the engine's own rollback knows these.
    this_run: Mutex<HashSet<(String, String)>>,
}

impl S3Sink {
    /// The sink of job `job`.
    pub(super) fn new(s3: S3Client, work_bucket: String, db: Db, job: &str) -> S3Sink {
        S3Sink {
            s3,
            work_bucket,
            db,
            job: job.to_string(),
            this_run: Mutex::default(),
        }
    }

    fn this_run(&self) -> std::sync::MutexGuard<'_, HashSet<(String, String)>> {
        self.this_run.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The job's `result`; when it failed, what an earlier run of the job (killed inside
    /// delivery) copied is taken back first, retried through store outages, and what stays
    /// is named in the error. Why: the engine's rollback takes back only what this run
    /// copied; a job must not end failed with its earlier outputs at their destinations.
    pub(super) async fn take_back_earlier(
        self: Arc<Self>,
        result: Result<JobReport, FarmError>,
    ) -> Result<JobReport, FarmError> {
        let Err(e) = result else { return result };
        let recorded = match self.db.deliveries(&self.job) {
            Ok(recorded) => recorded,
            Err(db) => {
                tracing::error!(job = %self.job, error = %db, "earlier deliveries unknown: not taken back");
                return Err(e);
            }
        };
        let earlier: Vec<(String, String)> = {
            let this_run = self.this_run();
            recorded
                .into_iter()
                .filter(|o| !this_run.contains(o))
                .collect()
        };
        if earlier.is_empty() {
            return Err(e);
        }
        tracing::warn!(job = %self.job, objects = earlier.len(), "taking back what the job delivered before the restart");
        let sink: Arc<dyn OutputSink> = self;
        Err(tessera_engine::take_back(&sink, earlier, e).await)
    }
}

#[async_trait::async_trait]
impl OutputSink for S3Sink {
    async fn deliver(
        &self,
        work_key: &str,
        etag: Option<&str>,
        bucket: &str,
        key: &str,
    ) -> Result<Delivered, FarmError> {
        let store = self.s3.store(bucket);
        let done = store
            .deliver_once(&self.work_bucket, work_key, etag, key, &self.job)
            .await?;
        self.this_run()
            .insert((bucket.to_string(), key.to_string()));
        if let Err(e) = self.db.record_delivery(&self.job, bucket, key) {
            // Unrecorded, the copy could not be taken back after a restart: it is removed
            // now and the delivery fails (the engine takes back the copies before it).
            let removed = match store.delete(key).await {
                Ok(()) => {
                    self.this_run()
                        .remove(&(bucket.to_string(), key.to_string()));
                    "removed again".to_string()
                }
                Err(d) => format!("left there: {d}"),
            };
            return Err(FarmError::Store {
                key: format!("s3://{bucket}/{key}"),
                reason: format!("copied, but the copy was not recorded ({e}); {removed}"),
            });
        }
        Ok(done)
    }

    async fn remove(&self, bucket: &str, key: &str) -> Result<(), FarmError> {
        // A job deletes only what its own delivery wrote (review N1, M3): an object this
        // job never copied (another job's, another tenant's, one there before) is left.
        let pair = (bucket.to_string(), key.to_string());
        if !self.this_run().contains(&pair) && !self.db.delivered(&self.job, bucket, key)? {
            tracing::warn!(job = %self.job, bucket, key, "not removed: this job never delivered it");
            return Ok(());
        }
        // The engine retries an unavailable store, logs each try and names what stays in
        // the job's error (engine rollback.rs).
        self.s3.store(bucket).delete(key).await?;
        if let Err(e) = self.db.forget_delivery(&self.job, bucket, key) {
            // The row stays: a later take-back deletes the object again, which is harmless.
            tracing::warn!(job = %self.job, bucket, key, error = %e, "removed delivery not forgotten");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
