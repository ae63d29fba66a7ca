//! Executing one segment from the GPU queue: take every session it needs on one card (or
//! wait), encode with NVDEC/NVENC in the child, and on a session or device failure lower the
//! card's budget or mark it unhealthy.

use std::sync::Arc;
use std::time::Duration;

use tessera_farm::model::TaskRef;
use tessera_farm::queue::Delivery;
use tessera_farm::{ErrorClass, ErrorCode, FarmError};

use crate::gpu::Gpus;
use crate::segment::{decode_task, SegmentRunner};

/// How long a GPU segment waits for its sessions before it goes back to the queue. The
/// prefetch follows the budget, so waiting is rare (a budget lowered after a failure).
const SESSION_WAIT: Duration = Duration::from_secs(30);

/// No session could be opened, the card is busy or faulted, or no card fits: the segment is
/// retried later (as a fresh message), never failed for it.
pub(crate) fn is_gpu_busy(err: &FarmError) -> bool {
    matches!(
        err.code(),
        ErrorCode::GpuSessionUnavailable | ErrorCode::GpuDeviceFault | ErrorCode::GpuNoSession
    )
}

impl SegmentRunner {
    /// Handles one GPU-queue delivery to the end: acked, requeued or dead-lettered.
    pub async fn handle_gpu(&self, delivery: Delivery, gpus: Arc<Gpus>) {
        let Some(task) = decode_task(&delivery).await else {
            return;
        };
        let job = task.job_id.clone();
        let staging = self.segment_staging(&task);
        let work = async {
            let need = gpus.need_for(&task);
            let Some(lease) = gpus.acquire(&need, SESSION_WAIT).await else {
                return Err(FarmError::Media {
                    code: ErrorCode::GpuNoSession,
                    class: ErrorClass::Retry,
                    message: format!(
                        "no card had {} free NVENC session(s) within {:?}",
                        need.encode_sessions, SESSION_WAIT
                    ),
                });
            };
            let hardware = gpus.hardware(&lease.lease);
            tracing::info!(
                job = %task.job_id, segment = task.segment, card = hardware.device,
                nvdec = hardware.nvdec, sessions_in_use = gpus.sessions_in_use(hardware.device),
                "GPU segment"
            );
            let result = self.execute(&task, &staging, Some(hardware)).await;
            if let Err(e) = &result {
                match e.code() {
                    ErrorCode::GpuSessionUnavailable => lease.lease.penalize(),
                    ErrorCode::GpuDeviceFault => lease.lease.mark_unhealthy(&e.to_string()),
                    _ => {}
                }
            }
            result
        };
        let origin = self.config.gpu_queue.clone();
        let ticket = crate::segment::Ticket {
            job: &job,
            plan: task.plan,
            task: TaskRef::Segment(task.segment),
        };
        self.run_task(ticket, &origin, delivery, &staging, work)
            .await;
    }
}
