//! S3 event notifications (the AWS/MinIO `Records` JSON) consumed from a RabbitMQ queue:
//! each created object under a watch starts its job, exactly once.
//!
//! MinIO publishes to the queue directly (AMQP target, default exchange, routing key = the
//! queue name). A delivery is acked only once every record in it has its job row (or had one
//! already); a transient failure requeues it; a message that is not an S3 event is nacked
//! without requeue, which dead-letters it.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tessera_farm::queue::{Delivery, Queue};
use tessera_farm::store::ObjectInfo;
use tessera_farm::FarmError;
use tessera_model::error_code::ErrorClass;
use tokio_util::sync::CancellationToken;

use super::ingest::{is_video, timed, Ingest, Via};

/// Unacknowledged events at once (they are handled one after the other).
const PREFETCH: u16 = 4;
/// Wait before restarting a failed consumer.
const RESTART_PAUSE: Duration = Duration::from_secs(2);
/// Wait before requeueing an event whose job could not be started (S3 or database down).
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// The `ObjectCreated` kinds that carry a new object.
const CREATED: [&str; 4] = ["Put", "Post", "Copy", "CompleteMultipartUpload"];

/// One created object named by an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ObjectEvent {
    /// The event name as sent (`s3:ObjectCreated:Put`, `ObjectCreated:Put`, ...).
    pub(super) name: String,
    /// Bucket.
    pub(super) bucket: String,
    /// Key, URL-decoded.
    pub(super) key: String,
    /// ETag without quotes, when the event has one.
    pub(super) etag: Option<String>,
    /// Size in bytes, when the event has one.
    pub(super) size: Option<u64>,
}

#[derive(Deserialize)]
struct Notification {
    #[serde(rename = "Records")]
    records: Option<Vec<Record>>,
    /// `s3:TestEvent` in the message AWS sends when notifications are set up.
    #[serde(rename = "Event")]
    event: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    event_name: String,
    s3: Entity,
}

#[derive(Deserialize)]
struct Entity {
    bucket: Bucket,
    object: Object,
}

#[derive(Deserialize)]
struct Bucket {
    name: String,
}

#[derive(Deserialize)]
struct Object {
    key: String,
    #[serde(rename = "eTag")]
    etag: Option<String>,
    size: Option<u64>,
}

/// Decodes a key as S3 events encode it: `+` is a space, `%XX` a byte; UTF-8 result.
pub(super) fn url_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let (mut out, mut i) = (Vec::with_capacity(bytes.len()), 0);
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok());
                let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
                out.push(byte.ok_or_else(|| format!("key '{s}': bad %-escape at byte {i}"))?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| format!("key '{s}': not UTF-8 once decoded"))
}

/// Whether an event name announces a new object (`s3:` prefix optional, as MinIO sends it).
fn is_created(name: &str) -> bool {
    let name = name.strip_prefix("s3:").unwrap_or(name);
    name.strip_prefix("ObjectCreated:")
        .is_some_and(|kind| CREATED.contains(&kind))
}

/// The created objects of one notification message; other records (removals, metadata
/// changes) are left out, and AWS's `s3:TestEvent` has none. `Err` for a message that is not
/// an S3 event notification.
pub(super) fn parse_event(body: &[u8]) -> Result<Vec<ObjectEvent>, String> {
    let n: Notification =
        serde_json::from_slice(body).map_err(|e| format!("not an S3 event notification: {e}"))?;
    let records = match (n.records, n.event.as_deref()) {
        (Some(r), _) => r,
        (None, Some("s3:TestEvent")) => return Ok(Vec::new()),
        (None, _) => return Err("not an S3 event notification: no Records".into()),
    };
    let created = records.into_iter().filter(|r| is_created(&r.event_name));
    created
        .map(|r| {
            Ok(ObjectEvent {
                key: url_decode(&r.s3.object.key)?,
                name: r.event_name,
                bucket: r.s3.bucket.name,
                etag: r.s3.object.etag.map(|e| e.trim_matches('"').to_string()),
                size: r.s3.object.size,
            })
        })
        .collect()
}

/// Consumes `queue` (declared first) until `shutdown`; a failed consumer is logged and
/// started again, never fatal.
pub(super) async fn consume(
    ingest: Arc<Ingest>,
    queue: Arc<dyn Queue>,
    name: String,
    shutdown: CancellationToken,
) {
    loop {
        match run(&ingest, queue.as_ref(), &name, &shutdown).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(queue = %name, error = %e, "S3 event consumer stopped; restarting")
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(RESTART_PAUSE) => {}
        }
    }
}

/// One consumer's life: `Ok` on shutdown, `Err` when the queue fails.
async fn run(
    ingest: &Ingest,
    queue: &dyn Queue,
    name: &str,
    shutdown: &CancellationToken,
) -> Result<(), FarmError> {
    queue.declare(name).await?;
    let mut consumer = queue.consume(name, PREFETCH).await?;
    tracing::info!(queue = name, "consuming S3 event notifications");
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            next = consumer.next() => next?,
        };
        let Some(delivery) = next else {
            return Err(FarmError::Queue {
                queue: name.to_string(),
                reason: "consumer ended".into(),
            });
        };
        handle(ingest, name, delivery).await;
    }
}

/// Starts the jobs of one message's records, then settles it.
async fn handle(ingest: &Ingest, queue: &str, d: Delivery) {
    let settled = match parse_event(&d.body) {
        Err(why) => {
            tracing::warn!(queue, error = %why, bytes = d.body.len(), "malformed S3 event dead-lettered");
            d.acker.reject(false).await
        }
        Ok(events) => {
            let (mut retry, mut poison) = (false, false);
            for ev in events {
                if let Err(e) = start(ingest, &ev).await {
                    let (bucket, key) = (&ev.bucket, &ev.key);
                    if e.class() == ErrorClass::Retry {
                        tracing::warn!(bucket, key, error = %e, "S3 event not handled; requeued");
                        retry = true;
                    } else {
                        tracing::warn!(bucket, key, error = %e, "S3 event refused; dead-lettered");
                        poison = true;
                    }
                }
            }
            // Records already handled are claimed, so a requeued message starts no job twice.
            if retry {
                tokio::time::sleep(RETRY_PAUSE).await;
                d.acker.reject(true).await
            } else if poison {
                d.acker.reject(false).await
            } else {
                d.acker.ack().await
            }
        }
    };
    if let Err(e) = settled {
        tracing::warn!(queue, error = %e, "settling an S3 event failed; the broker redelivers it");
    }
}

/// Starts the job of one created object if a watch covers it.
async fn start(ingest: &Ingest, ev: &ObjectEvent) -> Result<(), FarmError> {
    let (bucket, key) = (ev.bucket.as_str(), ev.key.as_str());
    let Some(w) = ingest.watch_for(bucket, key) else {
        tracing::debug!(bucket, key, "S3 event for an unwatched object ignored");
        return Ok(());
    };
    if !is_video(key, ev.size) {
        tracing::debug!(
            bucket,
            key,
            "S3 event for a sidecar, folder or empty object ignored"
        );
        return Ok(());
    }
    let obj = match &ev.etag {
        Some(etag) => ObjectInfo {
            key: key.to_string(),
            etag: etag.clone(),
            size: ev.size.unwrap_or(0),
        },
        None => match timed(key, ingest.store(bucket).head(key)).await {
            Ok(Some(info)) => info,
            Ok(None) => {
                tracing::debug!(bucket, key, "S3 event for an object since deleted ignored");
                return Ok(());
            }
            Err(FarmError::InvalidKey(k)) => {
                tracing::warn!(bucket, key = %k, "S3 event without ETag for an invalid key ignored");
                return Ok(());
            }
            Err(e) => return Err(e),
        },
    };
    ingest.ingest(w, &obj, Via::S3Event).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as MinIO sends it (RELEASE.2023 format), key URL-encoded with `/` as `%2F`.
    const MINIO: &str = r#"{
      "EventName": "s3:ObjectCreated:Put",
      "Key": "input/incoming/my+clip%281%29.mp4",
      "Records": [{
        "eventVersion": "2.0", "eventSource": "minio:s3", "awsRegion": "",
        "eventTime": "2023-09-10T17:41:54.000Z", "eventName": "s3:ObjectCreated:Put",
        "userIdentity": {"principalId": "minioadmin"},
        "requestParameters": {"principalId": "minioadmin", "region": "", "sourceIPAddress": "10.0.0.5"},
        "responseElements": {"x-amz-id-2": "dd9025bab4ad", "x-amz-request-id": "1782A3D27E5B",
          "x-minio-deployment-id": "7c1b3ec8", "x-minio-origin-endpoint": "http://10.0.0.2:9000"},
        "s3": {
          "s3SchemaVersion": "1.0", "configurationId": "Config",
          "bucket": {"name": "input", "ownerIdentity": {"principalId": "minioadmin"}, "arn": "arn:aws:s3:::input"},
          "object": {"key": "incoming%2Fmy+clip%281%29.mp4", "size": 1048576,
            "eTag": "9b2cf535f27731c974343645a3985328", "contentType": "video/mp4",
            "userMetadata": {"content-type": "video/mp4"}, "sequencer": "1782A3D27EBF44B6"}
        },
        "source": {"host": "10.0.0.5", "port": "", "userAgent": "MinIO (linux; amd64) minio-go/v7.0.63"}
      }]
    }"#;

    #[test]
    fn minio_record() {
        let ev = parse_event(MINIO.as_bytes()).unwrap();
        assert_eq!(
            ev,
            vec![ObjectEvent {
                name: "s3:ObjectCreated:Put".into(),
                bucket: "input".into(),
                key: "incoming/my clip(1).mp4".into(),
                etag: Some("9b2cf535f27731c974343645a3985328".into()),
                size: Some(1_048_576),
            }]
        );
    }

    #[test]
    fn aws_records_kinds_and_rejects() {
        let rec = |name: &str, key: &str| {
            format!(
                r#"{{"eventName": "{name}", "s3": {{"bucket": {{"name": "b"}}, "object": {{"key": "{key}", "eTag": "\"e-2\""}}}}}}"#
            )
        };
        let body = format!(
            r#"{{"Records": [{}, {}, {}, {}, {}]}}"#,
            rec("ObjectCreated:CompleteMultipartUpload", "a/b%20c%2Bd.mkv"),
            rec("ObjectCreated:Copy", "x"),
            rec("ObjectRemoved:Delete", "gone"),
            rec("s3:ObjectCreated:PutRetention", "meta"),
            rec("ObjectCreated:Post", "p"),
        );
        let ev = parse_event(body.as_bytes()).unwrap();
        let keys: Vec<_> = ev.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["a/b c+d.mkv", "x", "p"]);
        assert_eq!(ev[0].etag.as_deref(), Some("e-2"));
        assert_eq!(ev[0].size, None);
        let test_event = br#"{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"b"}"#;
        assert!(parse_event(test_event).unwrap().is_empty());
        assert!(parse_event(b"not json").is_err());
        assert!(parse_event(br#"{"hello": 1}"#).is_err());
        assert!(parse_event(br#"{"Records": [{"eventName": "ObjectCreated:Put"}]}"#).is_err());
        let bad_escape = rec("ObjectCreated:Put", "a%2");
        assert!(
            parse_event(format!(r#"{{"Records": [{bad_escape}]}}"#).as_bytes())
                .unwrap_err()
                .contains("bad %-escape")
        );
    }

    #[test]
    fn url_decoding() {
        assert_eq!(url_decode("a+b%2Fc%25").unwrap(), "a b/c%");
        assert_eq!(url_decode("vid%C3%A9o.mp4").unwrap(), "vidéo.mp4");
        assert!(url_decode("%zz").is_err());
        assert!(url_decode("%ff").is_err());
    }
}
