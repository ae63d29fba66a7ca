//! The held side of a job's route: events of a job that has not started reading them are
//! stored in the database and acked, then read back first when it starts.
//!
//! Why: a registered job may wait long (admission, re-preparing a resumed job) before it
//! reads its events; unacked, they would pass the broker's consumer timeout (issue 29, M1).
//! The route's phase lock keeps the router's store and the job's switch to live reading
//! apart: the router stores only while the phase is `Held`, and the job turns it `Live` only
//! after finding no stored event under the same lock, so no event is stored unseen.

use std::sync::Arc;

use async_trait::async_trait;
use tessera_farm::queue::{Acker, Delivery};
use tessera_farm::FarmError;
use tokio::sync::Mutex;

use crate::db::Db;

/// Where a job's events go now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// The job has not started reading: events are stored and acked.
    Held,
    /// The job reads live: events go through its channel, acked by the job.
    Live,
    /// The job has ended: events are orphans.
    Closed,
}

/// A route's phase, shared by the router and the job.
pub(super) type SharedPhase = Arc<Mutex<Phase>>;

/// Runs a blocking database call off the async threads.
pub(super) async fn blocking<R: Send + 'static>(
    db: &Db,
    f: impl FnOnce(&Db) -> Result<R, FarmError> + Send + 'static,
) -> Result<R, FarmError> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || f(&db))
        .await
        .map_err(|e| FarmError::Io {
            path: "job database".into(),
            reason: format!("held events task: {e}"),
        })?
}

/// Stores `delivery` as a held event of `job`; the caller acks it once this returns `Ok`.
pub(super) async fn store(db: &Db, job: &str, delivery: &Delivery) -> Result<i64, FarmError> {
    let (job, body) = (job.to_string(), delivery.body.clone());
    let (redeliveries, dead) = (delivery.redeliveries, delivery.dead_reason.clone());
    blocking(db, move |db| {
        db.hold_event(&job, &body, redeliveries, dead.as_deref())
    })
    .await
}

/// Reads a job's held events back, oldest first, until it turns live.
pub(super) struct HeldReader {
    pub(super) db: Db,
    pub(super) phase: SharedPhase,
    /// The last row handed to the job: rows not acked stay, but are read once per run.
    pub(super) after: i64,
}

impl HeldReader {
    /// The next held event of `job`, or `None` once there is none and the route is live.
    /// Cancel-safe: the cursor moves and the phase turns only once nothing is awaited.
    pub(super) async fn next(&mut self, job: &str) -> Result<Option<Delivery>, FarmError> {
        let mut phase = self.phase.lock().await;
        let (id, after) = (job.to_string(), self.after);
        let row = blocking(&self.db, move |db| db.held_event_after(&id, after)).await?;
        let Some(row) = row else {
            if *phase == Phase::Held {
                *phase = Phase::Live;
            }
            return Ok(None);
        };
        self.after = row.seq;
        Ok(Some(Delivery {
            body: row.body,
            redeliveries: row.redeliveries,
            dead_reason: row.dead_reason,
            acker: Box::new(HeldAcker {
                db: self.db.clone(),
                seq: row.seq,
            }),
        }))
    }
}

/// Settles a held event: an ack (or a drop to dead letters) deletes its row; a requeue keeps
/// it for the job's next run.
struct HeldAcker {
    db: Db,
    seq: i64,
}

#[async_trait]
impl Acker for HeldAcker {
    async fn ack(&self) -> Result<(), FarmError> {
        let seq = self.seq;
        blocking(&self.db, move |db| db.drop_held_event(seq)).await
    }

    async fn reject(&self, requeue: bool) -> Result<(), FarmError> {
        if requeue {
            return Ok(());
        }
        tracing::warn!(seq = self.seq, "held event dropped as unreadable");
        self.ack().await
    }
}
