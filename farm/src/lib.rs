//! tessera-farm: the plumbing shared by dispatcher, worker and CLI.
//!
//! Why a crate of its own: the queue and store traits and the media sandbox are how the
//! farm's processes reach each other and FFmpeg (the messages they exchange are
//! tessera-model's `wire`); keeping them in one place keeps the processes in agreement.

mod error;

pub mod backoff;
pub mod config;
pub mod disk;
pub mod health;
pub mod queue;
pub mod sandbox;
pub mod signals;
pub mod store;

pub use error::FarmError;
