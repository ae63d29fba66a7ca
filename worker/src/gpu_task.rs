//! Executing one segment from the GPU queue: take every session it needs on one card (or
//! wait), encode with NVDEC/NVENC in the child, and on a session or device failure lower the
//! card's budget or mark it unhealthy.

use std::sync::Arc;
use std::time::Duration;

use tessera_farm::queue::Delivery;
use tessera_farm::FarmError;
use tessera_model::error_code::{ErrorClass, ErrorCode};
use tessera_model::wire::TaskRef;

use crate::gpu::Gpus;
use crate::segment::{decode_task, SegmentRunner};

/// How long a GPU segment waits for its sessions before it goes back to the queue. The
/// prefetch follows the budget, so waiting is rare (a budget lowered after a failure).
const SESSION_WAIT: Duration = Duration::from_secs(30);

/// No session could be opened, the card is busy, faulted or unusable from this host, or
/// no card fits now: the segment goes back as a fresh message (another card or worker may
/// take it), up to the bounce limit; past it the job fails with the fault, or runs on the
/// CPU when it may run anywhere.
pub(crate) fn is_gpu_busy(err: &FarmError) -> bool {
    matches!(
        err.code(),
        ErrorCode::GpuSessionUnavailable
            | ErrorCode::GpuDeviceFault
            | ErrorCode::GpuNoSession
            | ErrorCode::GpuUnavailable
    )
}

/// A segment whose need no card of this worker could ever hold: refused at once, as a
/// request the GPU path cannot serve, instead of waiting and bouncing until its limit.
fn never_fits(need: &tessera_gpu::SessionNeed) -> FarmError {
    FarmError::Media {
        code: ErrorCode::GpuRequestUnsupported,
        class: ErrorClass::Abort,
        message: format!(
            "no card of this worker can hold {} NVENC session(s){}",
            need.encode_sessions,
            if need.needs_av1_encode {
                " with AV1"
            } else {
                ""
            }
        ),
    }
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
            if !gpus.could_ever_fit(&need) {
                return Err(never_fits(&need));
            }
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
                    // Out until its probation probe passes (a faulted context, or a card
                    // this host cannot use now).
                    ErrorCode::GpuDeviceFault | ErrorCode::GpuUnavailable => {
                        lease.lease.mark_unhealthy(&e.to_string())
                    }
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
