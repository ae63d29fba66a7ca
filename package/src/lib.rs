//! Streaming packages (what a job asks for is tessera-model's `package`): the rungs of an automatic ladder
//! (`ladder`), the facts read from fMP4 segments (`bmff`), the manifests written over the
//! segments (`hls`, `dash`, `vtt`) and the checks every package passes before it is
//! published (`validate`).
//!
//! Why a crate of its own, without FFmpeg: a manifest is text computed from numbers (segment
//! times, sizes, codec strings); keeping that pure makes every rule unit-testable, and the
//! same validator serves the product (a QC gate before upload) and the tests.

pub mod assemble;
pub mod bmff;
pub mod dash;
pub mod hls;
pub mod ladder;
pub mod model;
pub mod subtitles;
pub mod thumbnails;
pub mod validate;
pub mod vtt;

pub use model::{MediaSegment, Package, Track, TrackKind};
