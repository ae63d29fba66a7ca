//! The load generator's fake workers: they take the dispatcher's real segment and stitch
//! tasks from the real broker and answer with the real wire events, storing the objects a
//! worker would store (tiny stand-ins), but do no media work.
//!
//! Why stubbed here and only here: the capacity test measures the dispatcher, and thousands
//! of real encodes would measure the encoder instead. What the dispatcher reads back is
//! real: the stitched result it copies to the destination, and the encoded segments its
//! cleanup deletes with the job's work area.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tessera_farm::queue::{Delivery, Queue, RabbitQueue};
use tessera_farm::store::{S3Store, Store};
use tessera_model::wire::{
    decode_message, encode_message, SegmentOutcome, SegmentTask, StitchTask, TaskEvent, TaskRef,
    QUEUE_ENCODE_CPU, QUEUE_EVENTS, QUEUE_STITCH, WIRE_VERSION,
};
use tokio::sync::watch;

/// How many deliveries each fake worker holds at once (the broker's prefetch).
const PREFETCH: u16 = 64;

/// What the fake workers did, read by the sampler.
#[derive(Debug, Default)]
pub struct WorkerCounts {
    /// Segment tasks answered done.
    pub segments: AtomicU64,
    /// Stitch tasks answered done.
    pub stitches: AtomicU64,
    /// Events published to the dispatcher (every answer, heartbeats included).
    pub events: AtomicU64,
    /// Tasks that could not be answered (unreadable, store or broker error).
    pub errors: AtomicU64,
}

impl WorkerCounts {
    /// (segments, stitches, events, errors) now.
    pub fn snapshot(&self) -> (u64, u64, u64, u64) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        (
            get(&self.segments),
            get(&self.stitches),
            get(&self.events),
            get(&self.errors),
        )
    }
}

/// Shared by every fake worker: the broker connection, the work bucket and a tiny file
/// uploaded as each object a worker would store.
#[derive(Clone)]
pub struct FakeFleet {
    /// The farm's broker (the same vhost as the dispatcher).
    pub queue: RabbitQueue,
    /// The farm's work bucket.
    pub work: S3Store,
    /// The bytes stored for an encoded segment or a stitched output.
    pub stand_in: PathBuf,
    /// What they did.
    pub counts: Arc<WorkerCounts>,
}

impl FakeFleet {
    /// Starts `encoders` segment consumers and `stitchers` stitch consumers until `stop`
    /// changes (or its sender goes).
    pub async fn start(&self, encoders: usize, stitchers: usize, stop: &watch::Receiver<bool>) {
        for (queue, n) in [(QUEUE_ENCODE_CPU, encoders), (QUEUE_STITCH, stitchers)] {
            for i in 0..n {
                let fleet = self.clone();
                let stop = stop.clone();
                let name = format!("fake-{}-{i}", queue.rsplit('.').next().unwrap_or(queue));
                tokio::spawn(async move { fleet.consume(queue, name, stop).await });
            }
        }
    }

    /// One fake worker: each delivery of `queue` is answered in its own task (at most
    /// [`PREFETCH`] at once).
    async fn consume(self, queue: &'static str, name: String, mut stop: watch::Receiver<bool>) {
        let mut consumer = match self.queue.consume(queue, PREFETCH).await {
            Ok(c) => c,
            Err(e) => panic!("fake worker cannot consume {queue}: {e}"),
        };
        loop {
            let delivery = tokio::select! {
                _ = stop.changed() => return,
                d = consumer.next() => d,
            };
            let delivery = match delivery {
                Ok(Some(d)) => d,
                Ok(None) => return,
                Err(e) => {
                    eprintln!("fake worker {name}: {e}");
                    self.counts.errors.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    continue;
                }
            };
            let (fleet, worker) = (self.clone(), name.clone());
            tokio::spawn(async move {
                let answered = if queue == QUEUE_STITCH {
                    fleet.stitch(&worker, &delivery).await
                } else {
                    fleet.segment(&worker, &delivery).await
                };
                match answered {
                    Ok(()) => {
                        let _ = delivery.acker.ack().await;
                    }
                    Err(e) => {
                        eprintln!("fake worker {worker}: {e}");
                        fleet.counts.errors.fetch_add(1, Ordering::Relaxed);
                        let _ = delivery.acker.reject(true).await;
                    }
                }
            });
        }
    }

    /// A segment "encoded": each rendition's object stored, then the done event with the
    /// frames the plan expects, as the worker's segment.rs reports them.
    async fn segment(&self, worker: &str, delivery: &Delivery) -> Result<(), String> {
        let task: SegmentTask = decode_message(&delivery.body).map_err(|e| e.to_string())?;
        for (_, key) in &task.renditions {
            self.work
                .put_file(key, &self.stand_in)
                .await
                .map_err(|e| e.to_string())?;
        }
        let done = done(task.encode.expected_frames);
        let task_ref = TaskRef::Segment(task.segment);
        self.send(&task.job_id, task.plan, task_ref, worker, done)
            .await?;
        self.counts.segments.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A stitch "run": the heartbeat a worker sends when it takes a stitch, the result
    /// object the dispatcher delivers, then the done event with the frames it expects.
    async fn stitch(&self, worker: &str, delivery: &Delivery) -> Result<(), String> {
        let task: StitchTask = decode_message(&delivery.body).map_err(|e| e.to_string())?;
        let task_ref = TaskRef::Stitch(task.output);
        if task.heartbeats {
            self.send(
                &task.job_id,
                task.plan,
                task_ref,
                worker,
                SegmentOutcome::Running,
            )
            .await?;
        }
        self.work
            .put_file(&task.result_key, &self.stand_in)
            .await
            .map_err(|e| e.to_string())?;
        let done = done(task.expected_frames);
        self.send(&task.job_id, task.plan, task_ref, worker, done)
            .await?;
        self.counts.stitches.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn send(
        &self,
        job: &str,
        plan: u64,
        task: TaskRef,
        worker: &str,
        outcome: SegmentOutcome,
    ) -> Result<(), String> {
        let event = TaskEvent {
            v: WIRE_VERSION,
            job_id: job.to_string(),
            plan,
            task,
            worker: worker.to_string(),
            outcome,
        };
        self.queue
            .publish(QUEUE_EVENTS, encode_message(&event))
            .await
            .map_err(|e| e.to_string())?;
        self.counts.events.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// A stand-in task's done event of `frames` frames, as a worker reports a first try.
fn done(frames: u64) -> SegmentOutcome {
    SegmentOutcome::Done {
        frames,
        bytes: 0,
        media_seconds: 0.001,
        overhead_seconds: 0.001,
        peak_rss_bytes: 0,
        decode_errors: 0,
        check_seconds: 0.0,
        targets: Vec::new(),
        etags: Vec::new(),
        keys: Vec::new(),
        attempt: 1,
        card: None,
    }
}
