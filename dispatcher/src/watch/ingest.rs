//! Turning one uploaded object into one job (claim, sidecar, validate, insert, start), and
//! the poller that finds uploads by listing the watched prefixes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tessera_farm::store::{validate_key, ObjectInfo, S3Store, Store};
use tessera_farm::FarmError;
use tessera_model::api::{ApiJob, ApiOutput};
use tessera_model::encode::Container;
use tessera_model::error_code::ErrorCode;
use tokio_util::sync::CancellationToken;

use super::Watch;
use crate::api::AppState;
use crate::db::{Admitted, JobState};
use crate::jobspec::validate;

/// Limit for one S3 call of the watcher (listing a page, HEAD, fetching a sidecar).
const S3_TIMEOUT: Duration = Duration::from_secs(120);
/// Keys per listing page.
const PAGE: usize = 1000;
/// Largest sidecar accepted (the API's body limit).
const SIDECAR_MAX: u64 = 64 * 1024;

/// Which path found an upload (for logs).
#[derive(Debug, Clone, Copy)]
pub(super) enum Via {
    /// The poller's listing.
    Poll,
    /// An S3 event notification.
    S3Event,
}

impl Via {
    fn as_str(self) -> &'static str {
        match self {
            Via::Poll => "poll",
            Via::S3Event => "s3-event",
        }
    }
}

/// What became of an upload.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Outcome {
    /// A job was created and started now.
    Started(String),
    /// A job was created now and failed at once (bad sidecar, invalid job).
    Rejected(String),
    /// The object version had its job already.
    Seen,
    /// The watch's tenant is at its quota: no job yet; the next listing tries again.
    Waiting,
}

/// Whether an object is an upload to transcode: not a sidecar, folder marker or empty object.
pub(super) fn is_video(key: &str, size: Option<u64>) -> bool {
    !(key.ends_with(".json") || key.ends_with('/') || size == Some(0))
}

/// Runs `fut` with the watcher's S3 time limit.
pub(super) async fn timed<T>(
    what: &str,
    fut: impl std::future::Future<Output = Result<T, FarmError>>,
) -> Result<T, FarmError> {
    tokio::time::timeout(S3_TIMEOUT, fut)
        .await
        .unwrap_or_else(|_| {
            Err(FarmError::Store {
                key: what.to_string(),
                reason: format!("timed out after {S3_TIMEOUT:?}"),
            })
        })
}

/// Starts jobs for uploads; shared by the poller and the event consumer.
pub(super) struct Ingest {
    state: Arc<AppState>,
    watches: Vec<Watch>,
}

impl Ingest {
    /// Works for `watches` through the API's state (database, runner, allowed buckets).
    pub(super) fn new(state: Arc<AppState>, watches: Vec<Watch>) -> Self {
        Ingest { state, watches }
    }

    /// The watch an object belongs to: the one with the longest matching prefix.
    pub(super) fn watch_for(&self, bucket: &str, key: &str) -> Option<&Watch> {
        self.watches
            .iter()
            .filter(|w| w.covers(bucket, key))
            .max_by_key(|w| w.prefix.len())
    }

    /// The store of `bucket`.
    pub(super) fn store(&self, bucket: &str) -> S3Store {
        self.state.runner.s3.store(bucket)
    }

    /// Starts the job of the object version `obj` in the bucket of `w` unless it has one. `Err` means
    /// a transient failure (S3, database): the caller tries again later, and the claim then
    /// still lets the job be started exactly once.
    pub(super) async fn ingest(
        &self,
        w: &Watch,
        obj: &ObjectInfo,
        via: Via,
    ) -> Result<Outcome, FarmError> {
        let (db, bucket) = (&self.state.db, w.bucket.as_str());
        let (key, etag) = (obj.key.as_str(), obj.etag.as_str());
        let fresh = uuid::Uuid::new_v4().simple().to_string();
        let id = if db.claim_object(bucket, key, etag, &fresh)? {
            fresh
        } else if let Some(id) = db.unstarted_claim(bucket, key, etag)? {
            id // claimed before, but the job row was never written
        } else {
            return Ok(Outcome::Seen);
        };
        let idem = format!("watch:{bucket}/{key}@{etag}");
        let input = format!("s3://{bucket}/{key}");
        // A tenant at its quota: the upload waits, before its sidecar is fetched (uploads
        // waiting in numbers would otherwise each cost a HEAD every round).
        if db.unfinished_of(&w.tenant)? >= self.state.max_jobs_per_tenant {
            return Ok(Outcome::Waiting);
        }
        let output = match self.sidecar(w, bucket, key).await? {
            Ok(Some(out)) => out,
            Ok(None) => w.output(key),
            Err(why) => return self.reject(&id, &idem, w, key, ErrorCode::InvalidSidecar, &why),
        };
        let job = ApiJob {
            input: input.clone(),
            outputs: vec![output],
            segment_seconds: None,
            priority: None,
            callback_url: None,
            psnr: false,
            stereo_downmix: false,
            hardware: Default::default(),
        };
        let state = &self.state;
        let plan = match validate(&job, &state.buckets, state.segment_seconds, &state.gpu) {
            Ok(plan) => plan,
            Err((code, msg)) => {
                return self.reject(&id, &idem, w, key, code, &format!("{input}: {msg}"))
            }
        };
        // A sidecar's destination is the watch tenant's to write, and never inside a
        // watched prefix (it would be transcoded again).
        let grant = w.grant(&state.scopes);
        if let Err((code, msg)) = crate::scopes::check_plan(&plan, &grant, &state.watched) {
            return self.reject(&id, &idem, w, key, code, &format!("{input}: {msg}"));
        }
        let stored =
            serde_json::to_value(&plan).map_err(|e| FarmError::BadMessage(e.to_string()))?;
        // The watch's tenant's quota applies: over it, the upload waits (claimed, without a
        // job row) and the next listing tries again.
        let quota = state.max_jobs_per_tenant;
        let id = match db.insert_within_quota(&id, &w.tenant, Some(&idem), &stored, quota)? {
            Admitted::Created(id) => id,
            Admitted::Existing(_) => return Ok(Outcome::Seen),
            Admitted::OverQuota(_) => return Ok(Outcome::Waiting),
        };
        // The job's one output (a package has no planned file output).
        let output = &job.outputs[0].destination;
        tracing::info!(job = %id, %input, etag, %output, via = via.as_str(), "upload started a job");
        self.state.spawn(id.clone(), plan);
        Ok(Outcome::Started(id))
    }

    /// Records the upload's job as failed at once with `code` and `message`.
    fn reject(
        &self,
        id: &str,
        idem: &str,
        w: &Watch,
        key: &str,
        code: ErrorCode,
        message: &str,
    ) -> Result<Outcome, FarmError> {
        let request = json!({"input": {"bucket": w.bucket, "key": key}, "source": "watch"});
        let (id, created) = self.state.db.insert(id, &w.tenant, Some(idem), &request)?;
        if !created {
            return Ok(Outcome::Seen);
        }
        self.state
            .db
            .fail(&id, JobState::Failed, code.as_str(), message)?;
        tracing::warn!(job = %id, %code, error = message, "upload rejected");
        Ok(Outcome::Rejected(id))
    }

    /// The output a sidecar `<key>.json` asks for: `Ok(None)` without a sidecar, `Ok(Err)`
    /// for a sidecar that is unusable (the job fails with the reason), `Err` when S3 failed.
    /// A sidecar without `destination` gets the watch's default one.
    async fn sidecar(
        &self,
        w: &Watch,
        bucket: &str,
        key: &str,
    ) -> Result<Result<Option<ApiOutput>, String>, FarmError> {
        let side = format!("{key}.json");
        if validate_key(&side).is_err() {
            return Ok(Ok(None));
        }
        let store = self.store(bucket);
        let name = format!("sidecar s3://{bucket}/{side}");
        let Some(info) = timed(&side, store.head(&side)).await? else {
            return Ok(Ok(None));
        };
        if info.size > SIDECAR_MAX {
            let why = format!("{name}: {} bytes, at most {SIDECAR_MAX}", info.size);
            return Ok(Err(why));
        }
        let dir = self.state.runner.staging_dir.join("watch");
        let tmp = dir.join(format!("{}.json", uuid::Uuid::new_v4().simple()));
        let fetched = timed(&side, store.get_file(&side, &tmp)).await;
        let text = match fetched {
            Ok(_) => tokio::fs::read(&tmp)
                .await
                .map_err(|e| FarmError::io(&tmp, e)),
            Err(e) => Err(e),
        };
        let _ = tokio::fs::remove_file(&tmp).await;
        Ok(parse_sidecar(&text?, w, key)
            .map(Some)
            .map_err(|e| format!("{name}: {e}")))
    }
}

/// Parses a sidecar: one element of the API's `outputs` array, `destination` optional.
fn parse_sidecar(text: &[u8], w: &Watch, key: &str) -> Result<ApiOutput, String> {
    let mut v: Value = serde_json::from_slice(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let obj = v
        .as_object_mut()
        .ok_or("must be a JSON object like one element of the API's outputs array")?;
    if !obj.contains_key("destination") && obj.contains_key("package") {
        obj.insert("destination".into(), w.package_destination(key).into());
    } else if !obj.contains_key("destination") {
        let container = obj
            .get("container")
            .and_then(|c| serde_json::from_value::<Container>(c.clone()).ok())
            .unwrap_or(w.container);
        obj.insert("destination".into(), w.destination(key, container).into());
    }
    serde_json::from_value(v).map_err(|e| e.to_string())
}

/// Lists every watch each `interval` (the first round one interval after the start, so a
/// restarted dispatcher's event consumer goes first) until `shutdown`. A failed listing is
/// logged and retried next round.
pub(super) async fn poll(ingest: Arc<Ingest>, interval: Duration, shutdown: CancellationToken) {
    // Object versions handled in the last round: skipped without asking the database.
    let mut known: HashSet<(String, String, String)> = HashSet::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let mut seen = HashSet::new();
        for w in &ingest.watches {
            if let Err(e) = poll_watch(&ingest, w, &known, &mut seen, &shutdown).await {
                tracing::warn!(watch = %w, error = %e, "listing a watched prefix failed; retrying next round");
            }
        }
        known = seen;
    }
}

/// One round over one watch: lists its prefix page by page and ingests the new uploads.
async fn poll_watch(
    ingest: &Ingest,
    w: &Watch,
    known: &HashSet<(String, String, String)>,
    seen: &mut HashSet<(String, String, String)>,
    shutdown: &CancellationToken,
) -> Result<(), FarmError> {
    let store = ingest.store(&w.bucket);
    let mut after: Option<String> = None;
    loop {
        let page = timed(&w.prefix, store.list(&w.prefix, after.as_deref(), PAGE)).await?;
        let mut waiting = 0usize;
        for obj in &page {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            let id = (w.bucket.clone(), obj.key.clone(), obj.etag.clone());
            let mine = ingest
                .watch_for(&w.bucket, &obj.key)
                .is_some_and(|m| std::ptr::eq(m, w));
            if !mine || !is_video(&obj.key, Some(obj.size)) || seen.contains(&id) {
                continue;
            }
            if known.contains(&id) {
                seen.insert(id);
                continue;
            }
            match ingest.ingest(w, obj, Via::Poll).await {
                Ok(Outcome::Waiting) => waiting += 1,
                Ok(_) => {
                    seen.insert(id);
                }
                Err(e) => {
                    let key = &obj.key;
                    tracing::warn!(bucket = %w.bucket, key, error = %e, "upload not started; retrying next round");
                }
            }
        }
        if waiting > 0 {
            let tenant = &w.tenant;
            tracing::info!(watch = %w, tenant, waiting, "uploads wait: the watch's tenant is at its quota");
        }
        if page.len() < PAGE {
            return Ok(());
        }
        // Page on from the last key `list` accepts as a start (keys it rejects, such as
        // non-ASCII ones, are listed again on the next page and skipped as seen).
        let next = page.iter().rev().find(|o| validate_key(&o.key).is_ok());
        match next.map(|o| o.key.clone()) {
            Some(k) if after.as_deref() != Some(k.as_str()) => after = Some(k),
            _ => {
                tracing::warn!(watch = %w, "cannot page past keys the store rejects; rest of the prefix skipped this round");
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecars_and_video_filter() {
        let w = Watch::parse_flag("input/in/=output/out/").unwrap();
        let out = parse_sidecar(br#"{"codec": "h264", "height": 120}"#, &w, "in/a.mov").unwrap();
        assert_eq!(out.destination, "s3://output/out/a.mp4");
        assert_eq!(out.height, Some(120));
        let mkv = parse_sidecar(br#"{"container": "mkv"}"#, &w, "in/a.mov").unwrap();
        assert_eq!(mkv.destination, "s3://output/out/a.mkv");
        let pkg = parse_sidecar(br#"{"package": {"format": "hls"}}"#, &w, "in/b/c.mov").unwrap();
        assert_eq!(pkg.destination, "s3://output/out/b/c/");
        assert!(pkg.package.is_some());
        let given = parse_sidecar(br#"{"destination": "s3://output/x.mp4"}"#, &w, "in/a").unwrap();
        assert_eq!(given.destination, "s3://output/x.mp4");
        assert!(parse_sidecar(b"{nope", &w, "in/a")
            .unwrap_err()
            .contains("invalid JSON"));
        assert!(parse_sidecar(b"[1]", &w, "in/a")
            .unwrap_err()
            .contains("JSON object"));
        assert!(parse_sidecar(br#"{"heigth": 1}"#, &w, "in/a")
            .unwrap_err()
            .contains("heigth"));
        assert!(is_video("in/a.mp4", Some(10)) && is_video("in/a.mp4", None));
        assert!(!is_video("in/a.mp4.json", Some(10)));
        assert!(!is_video("in/dir/", Some(0)) && !is_video("in/a.mp4", Some(0)));
    }
}
