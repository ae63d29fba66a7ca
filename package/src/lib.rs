//! Streaming packages (what a job asks for is tessera-model's `package`): the rungs of an
//! automatic ladder (`ladder`), the facts read from fMP4 segments (`bmff`), the manifests
//! written over the segments (`hls`, `dash`, `vtt`) and the checks every package passes
//! before it is published (`validate`). The types of a written package (`Package`, its
//! `Track`s and their `MediaSegment`s, the thumbnail `TileTrack`) are at the crate root.

pub mod assemble;
pub mod bmff;
pub mod dash;
pub mod hls;
pub mod ladder;
mod model;
pub mod subtitles;
pub mod thumbnails;
pub mod validate;
pub mod vtt;

pub use model::{MediaSegment, Package, TileTrack, Track, TrackKind};
