//! Routes worker events from the one events queue to the job each belongs to.
//!
//! Why: many jobs run at once in one dispatcher, but workers publish every event to one
//! queue; each running job reads its own events through a channel-backed `Consumer`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use tessera_farm::backoff::Backoff;
use tessera_farm::queue::{Consumer, Delivery, Queue, HELD_ELSEWHERE};
use tessera_farm::FarmError;
use tessera_model::wire::{valid_job_id, MAX_MESSAGE_BYTES, QUEUE_EVENTS};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Delivery>>>>;

/// The router: register a job to receive its events.
#[derive(Clone, Default)]
pub struct EventRouter {
    routes: Routes,
}

/// A job's events, as a `Consumer` for `run_job`.
pub struct JobEvents {
    rx: mpsc::UnboundedReceiver<Delivery>,
}

#[async_trait]
impl Consumer for JobEvents {
    async fn next(&mut self) -> Result<Option<Delivery>, FarmError> {
        Ok(self.rx.recv().await)
    }
}

/// An event no running job took.
enum Unrouted {
    /// Of a job this dispatcher does not run (finished, cancelled): acked away.
    Orphan(Delivery),
    /// Names no job (not JSON, too large, an impossible id): dead-lettered.
    Poison(Delivery),
}

#[derive(Deserialize)]
struct JobOnly {
    job_id: String,
}

impl EventRouter {
    /// Starts routing `job`'s events to the returned consumer.
    pub fn register(&self, job: &str) -> JobEvents {
        let (tx, rx) = mpsc::unbounded_channel();
        self.routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(job.to_string(), tx);
        JobEvents { rx }
    }

    /// Stops routing `job`'s events.
    pub fn unregister(&self, job: &str) {
        self.routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(job);
    }

    /// Hands `delivery` to its job; back with what to do when no running job takes it.
    fn route(&self, delivery: Delivery) -> Result<(), Unrouted> {
        let head = (delivery.body.len() <= MAX_MESSAGE_BYTES)
            .then(|| serde_json::from_slice::<JobOnly>(&delivery.body).ok())
            .flatten()
            .filter(|h| valid_job_id(&h.job_id));
        let Some(head) = head else {
            return Err(Unrouted::Poison(delivery));
        };
        let routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        match routes.get(&head.job_id) {
            Some(tx) => tx.send(delivery).map_err(|e| Unrouted::Orphan(e.0)),
            None => Err(Unrouted::Orphan(delivery)),
        }
    }

    /// Routes the events of `first` (the consumer `claim_events` got),
    /// then of new ones after broker outages, until `shutdown`. Events of jobs this
    /// dispatcher does not run (finished or cancelled: it is the farm's only dispatcher) are
    /// acknowledged and dropped. If another dispatcher took the queue during an outage, this
    /// one stops (`shutdown` is cancelled): its jobs could no longer hear their events.
    pub async fn run(
        self,
        first: Box<dyn Consumer>,
        queue: Arc<dyn Queue>,
        shutdown: CancellationToken,
    ) {
        let mut backoff =
            Backoff::new(Duration::from_millis(500), Duration::from_secs(30)).jittered();
        let mut consumer = Some(first);
        while !shutdown.is_cancelled() {
            let mut current = match consumer.take() {
                Some(c) => c,
                None => match reclaim(&*queue).await {
                    Ok(c) => c,
                    Err(FarmError::Queue { reason, .. }) if reason.contains(HELD_ELSEWHERE) => {
                        tracing::error!(%reason, "another dispatcher took the events queue; stopping");
                        shutdown.cancel();
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "events queue unavailable");
                        if !backoff.wait(&shutdown).await {
                            return;
                        }
                        continue;
                    }
                },
            };
            backoff.reset();
            loop {
                let next = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    n = current.next() => n,
                };
                match next {
                    Ok(Some(d)) => match self.route(d) {
                        Ok(()) => {}
                        Err(Unrouted::Orphan(d)) => {
                            tracing::debug!("event for a job not running here dropped");
                            let _ = d.acker.ack().await;
                        }
                        Err(Unrouted::Poison(d)) => {
                            let bytes = d.body.len();
                            tracing::warn!(bytes, "event naming no job dead-lettered");
                            let _ = d.acker.nack(false).await;
                        }
                    },
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "events consumer lost");
                        break;
                    }
                }
            }
        }
    }
}

/// After an outage the broker connection is new: the dispatcher lock is taken again before
/// the events queue is consumed again.
async fn reclaim(queue: &dyn Queue) -> Result<Box<dyn Consumer>, FarmError> {
    queue.hold_lock(crate::instance::DISPATCHER_LOCK).await?;
    queue
        .consume(QUEUE_EVENTS, crate::instance::EVENTS_PREFETCH)
        .await
}
