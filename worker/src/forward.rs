//! The queues a worker consumes, each forwarded into the worker's one channel of events.
//!
//! Why: the consume loop waits on one channel, whatever the number of queues; each queue's
//! consumer lives in its own task, which can let go of its queue while the worker cannot take
//! that work and consume again later.

use std::sync::Arc;
use std::time::Duration;

use tessera_farm::queue::{Consumer, Delivery, Queue};
use tessera_farm::FarmError;
use tokio::sync::mpsc;

use crate::{Fitness, Gpus, WorkerConfig};

/// Which work a delivery is: a CPU segment, a GPU segment, a stitch, a whole input or a
/// CPU segment this worker cuts from the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Cpu,
    Cut,
    Gpu,
    Stitch,
    Whole,
}

/// What a forwarder tells the consume loop.
pub(crate) enum Event {
    Work(Kind, Delivery),
    Ended(Kind),
    Failed(FarmError),
}

/// Where a forwarder consumes: the queue, and its prefetch (for the GPU queue, what the
/// cards can start now, checked every second).
pub(crate) struct Source {
    kind: Kind,
    queue: Arc<dyn Queue>,
    pub(crate) name: String,
    slots: u16,
    gpus: Option<Arc<Gpus>>,
}

impl Source {
    pub(crate) fn prefetch(&self) -> u16 {
        self.gpus.as_ref().map_or(self.slots, |g| g.prefetch())
    }
}

/// The queues `config` names, and the primary kind (the worker stops when its queue ends).
/// With GPUs it consumes the GPU queue (and the CPU queue too when told to drain it), else
/// the CPU queue; the stitch queue, when set, one at a time beside either; the whole-input
/// queue, when set and without cards, one at a time too; the cut queue, when set and
/// without cards, with the CPU queue's slots (the two share them).
pub(crate) fn sources(
    config: &WorkerConfig,
    queue: &Arc<dyn Queue>,
    slots: u16,
) -> (Vec<Source>, Kind) {
    let source = |kind, name: &str, slots, gpus| Source {
        kind,
        queue: queue.clone(),
        name: name.to_string(),
        slots,
        gpus,
    };
    let mut sources = Vec::new();
    let primary = match &config.gpus {
        Some(gpus) => {
            sources.push(source(
                Kind::Gpu,
                &config.gpu_queue,
                slots,
                Some(gpus.clone()),
            ));
            if gpus.drains_cpu_queue() {
                sources.push(source(Kind::Cpu, &config.queue, slots, None));
            }
            Kind::Gpu
        }
        None => {
            sources.push(source(Kind::Cpu, &config.queue, slots, None));
            Kind::Cpu
        }
    };
    if let Some(q) = &config.stitch_queue {
        sources.push(source(Kind::Stitch, q, 1, None));
    }
    // Whole inputs are software encodes: a worker with cards leaves them to CPU workers.
    if let (Some(q), None) = (&config.whole_queue, &config.gpus) {
        sources.push(source(Kind::Whole, q, 1, None));
    }
    // Cut segments are software encodes too; they share the CPU slots (consume.rs).
    if let (Some(q), None) = (&config.cut_queue, &config.gpus) {
        sources.push(source(Kind::Cut, q, slots, None));
    }
    (sources, primary)
}

/// Moves one queue's deliveries into the worker's channel. While the worker is unfit (its
/// staging disk full), or for the GPU queue while no card can start anything and nothing
/// runs (every card unhealthy or its budget taken), it cancels its consumer, so the broker
/// hands the queue's tasks to other workers, and consumes again once it can take work.
pub(crate) fn forward(
    source: Source,
    mut consumer: Box<dyn Consumer>,
    tx: mpsc::UnboundedSender<Event>,
    fitness: Arc<Fitness>,
) -> tokio::task::JoinHandle<()> {
    let kind = source.kind;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut prefetch = source.prefetch();
        loop {
            if !fitness.is_fit() || source.prefetch() == 0 {
                drop(consumer);
                loop {
                    if !fitness.is_fit() {
                        fitness.wait_fit().await;
                    } else if source.prefetch() == 0 {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    } else {
                        break;
                    }
                }
                prefetch = source.prefetch();
                consumer = match source.queue.consume(&source.name, prefetch).await {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = tx.send(Event::Failed(e));
                        return;
                    }
                };
            }
            let next = tokio::select! {
                d = consumer.next() => d,
                _ = tick.tick() => {
                    let want = source.prefetch();
                    if want == 0 {
                        tracing::warn!("no GPU can take work: GPU queue left to other workers");
                        continue;
                    }
                    if source.gpus.is_some() && want != prefetch {
                        if let Err(e) = consumer.set_prefetch(want).await {
                            tracing::warn!(error = %e, "prefetch not changed");
                            continue;
                        }
                        tracing::debug!(prefetch = want, "GPU prefetch follows the budget");
                        prefetch = want;
                    }
                    continue;
                }
            };
            let event = match next {
                Ok(Some(d)) => Event::Work(kind, d),
                Ok(None) => Event::Ended(kind),
                Err(e) => Event::Failed(e),
            };
            let last = !matches!(event, Event::Work(..));
            if tx.send(event).is_err() || last {
                return;
            }
        }
    })
}
