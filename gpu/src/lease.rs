//! A granted set of sessions on one card, given back when dropped.

use crate::state::Shared;
use std::sync::Arc;

/// Sessions held on one card for one segment; dropping the lease releases them.
///
/// Why: the worker cannot forget to give sessions back (error paths, panics unwinding,
/// cancelled tasks all drop the lease), so the budget never leaks.
pub struct SessionLease {
    pub(crate) shared: Arc<Shared>,
    pub(crate) pos: usize,
    pub(crate) card_index: u32,
    pub(crate) card_uuid: Option<String>,
    pub(crate) encode_sessions: u32,
    pub(crate) nvdec: bool,
}

impl SessionLease {
    /// The NVML index of the card to run on (for `-hwaccel_device` / `CUDA_VISIBLE_DEVICES`
    /// with `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    pub fn card_index(&self) -> u32 {
        self.card_index
    }

    /// The card's UUID, when NVML reported one.
    pub fn card_uuid(&self) -> Option<&str> {
        self.card_uuid.as_deref()
    }

    /// How many encode sessions this lease holds.
    pub fn encode_sessions(&self) -> u32 {
        self.encode_sessions
    }

    /// Whether this lease holds an NVDEC decode session (the segment decodes on the GPU).
    pub fn nvdec(&self) -> bool {
        self.nvdec
    }

    /// The encoder on this lease's card failed to open a session (out of memory): lower
    /// the card's budget for a while. Same as [`crate::SessionScheduler::penalize`].
    pub fn penalize(&self) {
        self.shared.penalize(self.pos);
    }

    /// This lease's card hit a driver fault: it gets no more work. Same as
    /// [`crate::SessionScheduler::mark_unhealthy`].
    pub fn mark_unhealthy(&self, reason: &str) {
        self.shared.mark_unhealthy(self.pos, reason);
    }
}

impl Drop for SessionLease {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.release(self.pos, self.encode_sessions, u32::from(self.nvdec));
    }
}

impl std::fmt::Debug for SessionLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLease")
            .field("card_index", &self.card_index)
            .field("card_uuid", &self.card_uuid)
            .field("encode_sessions", &self.encode_sessions)
            .field("nvdec", &self.nvdec)
            .finish()
    }
}
