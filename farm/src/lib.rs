//! tessera-farm: the plumbing shared by dispatcher, worker and CLI.
//!
//! Why a crate of its own: the job model, wire messages, queue and store traits and the media
//! sandbox are the contract between the farm's processes; keeping them in one place keeps the
//! processes in agreement.

mod error;

pub mod config;
pub mod disk;
pub mod model;
pub mod queue;
pub mod sandbox;
pub mod signals;
pub mod store;

pub use error::FarmError;
