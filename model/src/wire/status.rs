//! Workers' status reports: what each worker holds now (its slots, the tasks in hand, each
//! card's sessions against its budget, the card's use and health), sent every few seconds to
//! the dispatcher's dashboard.
//!
//! Why over the broker: workers sit behind Kubernetes pods or spot machines the dispatcher
//! cannot address, but every worker already reaches the broker. The reports go to a queue of
//! their own that keeps only recent ones ([`STATUS_QUEUE_MAX`], [`STATUS_TTL_SECONDS`]): while
//! no dispatcher reads them they neither pile up nor outlive their use, and a report lost
//! costs nothing because the next one says the same and more.

use serde::{Deserialize, Serialize};

use super::TaskRef;

/// Queue of worker status reports, read by the dispatcher (dashboard).
pub const QUEUE_STATUS: &str = "tessera.status";
/// Seconds between a worker's reports.
pub const STATUS_EVERY_SECONDS: u64 = 5;
/// Seconds without a report after which the dashboard shows a worker as silent: three
/// reports missed.
pub const STATUS_SILENT_SECONDS: u64 = 3 * STATUS_EVERY_SECONDS;
/// Seconds without a report after which the dispatcher forgets a worker (it scaled away).
pub const STATUS_FORGET_SECONDS: u64 = 120;
/// The most reports the status queue keeps; the oldest go first. Why: a fleet of 1,000
/// workers sends 200 a second; a dispatcher away for a while finds the newest ones only.
pub const STATUS_QUEUE_MAX: u32 = 2000;
/// Seconds an unread report stays on the queue.
pub const STATUS_TTL_SECONDS: u64 = 30;

/// One worker's state when it sent the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerStatus {
    /// Wire version ([`super::WIRE_VERSION`]).
    pub v: u32,
    /// The worker's name, as in its events.
    pub worker: String,
    /// The worker's release (`CARGO_PKG_VERSION`): a rolling upgrade shows which run where.
    pub release: String,
    /// The queue the worker lives on (its primary queue: CPU or GPU encodes).
    pub queue: String,
    /// Segment slots (tasks of its primary queue it runs at once).
    pub slots: u32,
    /// Why the worker takes no new work (`shutdown`, `spot notice`, `rebalance`, `idle`,
    /// ...); `None` while it takes work.
    pub draining: Option<String>,
    /// Why the worker holds back although it is not draining (staging disk short, no usable
    /// card); `None` when fit.
    pub unfit: Option<String>,
    /// The tasks it runs now.
    pub tasks: Vec<TaskInHand>,
    /// Its cards (empty on a CPU worker).
    pub cards: Vec<CardStatus>,
}

/// A task a worker runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskInHand {
    /// The task's job.
    pub job_id: String,
    /// Which task of the job.
    pub task: TaskRef,
    /// The queue it came from.
    pub queue: String,
    /// Seconds since the worker started it.
    pub running_s: u64,
}

/// One card of a GPU worker, as its books and NVML see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardStatus {
    /// NVML index.
    pub index: u32,
    /// The model's name (NVML).
    pub name: String,
    /// NVENC sessions this worker holds.
    pub encode_in_use: u32,
    /// NVENC sessions this worker may hold now (0 when unhealthy).
    pub encode_budget: u32,
    /// NVDEC sessions this worker holds.
    pub decode_in_use: u32,
    /// NVDEC sessions this worker may hold.
    pub decode_budget: u32,
    /// NVENC sessions other processes hold on the card.
    pub foreign_encode: u32,
    /// NVENC use over NVML's last sample period, in percent.
    pub encoder_pct: Option<u32>,
    /// NVDEC use over NVML's last sample period, in percent.
    pub decoder_pct: Option<u32>,
    /// Whether the card takes work.
    pub healthy: bool,
    /// Why not, or why its budget is cut (a penalty after a refused session).
    pub fault: Option<String>,
}

impl WorkerStatus {
    /// Reads a report: its size and version checked, its worker named (1-128 characters).
    ///
    /// Why not `decode_message`: a report names no job of its own, and one that cannot be read
    /// is dropped (the next one replaces it), never a job's failure.
    pub fn decode(body: &[u8]) -> Result<WorkerStatus, super::BadMessage> {
        use super::{BadMessage, MAX_MESSAGE_BYTES, WIRE_VERSION};
        if body.len() > MAX_MESSAGE_BYTES {
            return Err(BadMessage(format!("{} bytes: too large", body.len())));
        }
        let s: WorkerStatus =
            serde_json::from_slice(body).map_err(|e| BadMessage(e.to_string()))?;
        if s.v != WIRE_VERSION {
            return Err(BadMessage(format!("wire version {} not supported", s.v)));
        }
        if s.worker.is_empty() || s.worker.chars().count() > 128 {
            return Err(BadMessage(
                "a report must name its worker (1-128 characters)".into(),
            ));
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> WorkerStatus {
        WorkerStatus {
            v: super::super::WIRE_VERSION,
            worker: "gpu-a".into(),
            release: "0.1.0".into(),
            queue: super::super::QUEUE_ENCODE_GPU.into(),
            slots: 3,
            draining: None,
            unfit: None,
            tasks: vec![TaskInHand {
                job_id: "j1".into(),
                task: TaskRef::Segment(4),
                queue: super::super::QUEUE_ENCODE_GPU.into(),
                running_s: 12,
            }],
            cards: vec![CardStatus {
                index: 0,
                name: "Tesla T4".into(),
                encode_in_use: 2,
                encode_budget: 3,
                decode_in_use: 1,
                decode_budget: 4,
                foreign_encode: 0,
                encoder_pct: Some(71),
                decoder_pct: None,
                healthy: true,
                fault: None,
            }],
        }
    }

    #[test]
    fn a_report_round_trips_and_bad_ones_are_refused() {
        let r = report();
        let body = super::super::encode_message(&r);
        assert_eq!(WorkerStatus::decode(&body).unwrap(), r);
        let mut newer = r.clone();
        newer.v += 1;
        let e = WorkerStatus::decode(&super::super::encode_message(&newer)).unwrap_err();
        assert!(e.0.contains("version"), "{e}");
        let mut nameless = r.clone();
        nameless.worker.clear();
        assert!(WorkerStatus::decode(&super::super::encode_message(&nameless)).is_err());
        nameless.worker = "w".repeat(129);
        assert!(WorkerStatus::decode(&super::super::encode_message(&nameless)).is_err());
        assert!(WorkerStatus::decode(b"{\"v\":1}").is_err());
        let huge = vec![b' '; super::super::MAX_MESSAGE_BYTES + 1];
        assert!(WorkerStatus::decode(&huge).is_err());
    }
}
