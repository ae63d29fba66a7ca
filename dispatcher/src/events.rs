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

mod held;
#[cfg(test)]
mod tests;

use crate::db::Db;
use held::{HeldReader, Phase, SharedPhase};

/// A registered job's route: its live channel and where its events go now.
#[derive(Clone)]
struct Route {
    tx: mpsc::UnboundedSender<Delivery>,
    phase: SharedPhase,
}

type Routes = Arc<Mutex<HashMap<String, Route>>>;

/// The router: register a job to receive its events.
#[derive(Clone, Default)]
pub struct EventRouter {
    routes: Routes,
    /// Where events of jobs not yet reading them are held; without it they wait in memory,
    /// unacked.
    held: Option<Db>,
}

/// A job's events, as a `Consumer` for `run_job`: first those held for it before it started
/// reading (oldest first), then the live ones.
pub struct JobEvents {
    job: String,
    held: Option<HeldReader>,
    rx: mpsc::UnboundedReceiver<Delivery>,
}

#[async_trait]
impl Consumer for JobEvents {
    async fn next(&mut self) -> Result<Option<Delivery>, FarmError> {
        if let Some(reader) = &mut self.held {
            if let Some(stored) = reader.next(&self.job).await? {
                return Ok(Some(stored));
            }
            self.held = None;
        }
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
    /// A router that holds the events of jobs not yet reading them in `db` (acked at once).
    pub fn durable(db: Db) -> Self {
        EventRouter {
            routes: Routes::default(),
            held: Some(db),
        }
    }

    /// Starts routing `job`'s events to the returned consumer: held until it first reads.
    pub fn register(&self, job: &str) -> JobEvents {
        let (tx, rx) = mpsc::unbounded_channel();
        let first = if self.held.is_some() {
            Phase::Held
        } else {
            Phase::Live
        };
        let phase: SharedPhase = Arc::new(tokio::sync::Mutex::new(first));
        let route = Route {
            tx,
            phase: phase.clone(),
        };
        self.routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(job.to_string(), route);
        let held = self.held.clone().map(|db| HeldReader {
            db,
            phase,
            after: 0,
        });
        JobEvents {
            job: job.to_string(),
            held,
            rx,
        }
    }

    /// Stops routing `job`'s events (it has ended) and forgets those held for it.
    pub async fn unregister(&self, job: &str) {
        let route = self
            .routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(job);
        if let Some(route) = route {
            // After this no event of the job is stored: the router sees it closed.
            *route.phase.lock().await = Phase::Closed;
        }
        if let Some(db) = &self.held {
            let id = job.to_string();
            if let Err(e) = held::blocking(db, move |db| db.forget_held_events(&id)).await {
                tracing::warn!(job, error = %e, "ended job's held events not forgotten");
            }
        }
    }

    /// Hands `delivery` to its job; back with what to do when no running job takes it.
    /// An event of a job not reading yet is stored and acked (see `held.rs`); if it cannot
    /// be stored it waits in the job's channel, unacked, as it would without a database.
    async fn route(&self, delivery: Delivery) -> Result<(), Unrouted> {
        let head = (delivery.body.len() <= MAX_MESSAGE_BYTES)
            .then(|| serde_json::from_slice::<JobOnly>(&delivery.body).ok())
            .flatten()
            .filter(|h| valid_job_id(&h.job_id));
        let Some(head) = head else {
            return Err(Unrouted::Poison(delivery));
        };
        let route = {
            let routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
            routes.get(&head.job_id).cloned()
        };
        let Some(route) = route else {
            return Err(Unrouted::Orphan(delivery));
        };
        let phase = route.phase.lock().await;
        match (*phase, &self.held) {
            (Phase::Closed, _) => Err(Unrouted::Orphan(delivery)),
            (Phase::Held, Some(db)) => match held::store(db, &head.job_id, &delivery).await {
                Ok(_) => {
                    drop(phase);
                    let _ = delivery.acker.ack().await;
                    Ok(())
                }
                Err(e) => {
                    tracing::warn!(job = %head.job_id, error = %e, "event not held; kept unacked");
                    route.tx.send(delivery).map_err(|e| Unrouted::Orphan(e.0))
                }
            },
            _ => route.tx.send(delivery).map_err(|e| Unrouted::Orphan(e.0)),
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
                    Ok(Some(d)) => match self.route(d).await {
                        Ok(()) => {}
                        Err(Unrouted::Orphan(d)) => {
                            tracing::debug!("event for a job not running here dropped");
                            let _ = d.acker.ack().await;
                        }
                        Err(Unrouted::Poison(d)) => {
                            let bytes = d.body.len();
                            tracing::warn!(bytes, "event naming no job dead-lettered");
                            let _ = d.acker.reject(false).await;
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
