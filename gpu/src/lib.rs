//! tessera's GPU inventory and NVENC/NVDEC session budgets.
//!
//! A GPU worker asks two questions before it takes a segment: *which cards do I have*, and
//! *can one of them open every session this segment needs right now*. This crate answers
//! both, with plain std synchronisation (the worker wraps it in its async runtime):
//!
//! - [`probe`] reads every card through NVML (name, UUID, PCI bus id, memory,
//!   encoder/decoder utilization, encoder sessions ours and foreign, H.264/HEVC encoder
//!   capacity). NVML is loaded at run time: no driver gives
//!   [`GpuError::NvmlUnavailable`], which the worker logs once before running CPU-only.
//!   A query that fails for one card leaves that field `None`; it never fails the
//!   inventory. Only `nvml.rs` touches NVML; everything else works on plain [`CardInfo`]
//!   data, so it is tested with simulated inventories.
//! - [`ModelSpec::lookup`] knows what NVML does not: NVENC/NVDEC engine counts, AV1 encode,
//!   the architecture (for the NVDEC codec matrix in [`Generation::nvdec_decodes`]) and a
//!   default encode-session budget per model (see `models.rs` for the reasoning).
//! - [`SessionScheduler`] keeps each card's budget: the model default or a per-card
//!   override from [`BudgetConfig`], minus encode sessions other processes hold, minus
//!   active penalties after `NV_ENC_ERR_OUT_OF_MEMORY`, zero when the card is unhealthy.
//!   GeForce cards also share the driver's system-wide session cap. A segment's
//!   [`SessionNeed`] (one encode session per rendition, one NVDEC session if it decodes on
//!   the GPU) is granted on **one** card, all at once or not at all, as a [`SessionLease`]
//!   that gives the sessions back when dropped. The card chosen is the one with the most
//!   free headroom, so load spreads evenly. [`SessionScheduler::capacity_for`] says how many
//!   such segments could start now: the worker's queue prefetch.
//!
//! No public signature mentions nvml-wrapper types.

mod budget;
mod clock;
mod config;
mod decode;
mod error;
mod inventory;
mod lease;
mod models;
mod need;
mod nvml;
mod scheduler;
mod snapshot;
mod state;

#[cfg(test)]
mod proptests;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{BudgetConfig, CardOverride};
pub use decode::{ChromaFormat, Codec, DecodeFormat, Generation};
pub use error::GpuError;
pub use inventory::{CardInfo, EncoderSessions, Inventory, MemoryUsage, QueryFailure};
pub use lease::SessionLease;
pub use models::{CardClass, ModelSpec};
pub use need::SessionNeed;
pub use nvml::probe;
pub use scheduler::SessionScheduler;
pub use snapshot::{CardSnapshot, SchedulerSnapshot};
