//! tessera-model: the plain data every other crate shares, and the pure logic on it.
//!
//! Why a crate at the bottom with no FFmpeg: a job's request, a segment's plan, the wire
//! messages and the error catalog are read by the packager, the farm, the GPU scheduler, the
//! dispatcher and the CLI; none of them should link FFmpeg to name a codec. The media crate
//! executes these requests; everything else only builds and reads them.
//!
//! The modules, in the order a job meets them (each name has one public path, its module):
//! - `probe`: what a source holds (streams, packets, chapters) and a segment's range.
//! - `timestamps`: pure timestamp repair (decode times, runs, equal times, derived pts).
//! - `plan`: the planner: segment and package ranges from the packet index.
//! - `encode`, `settings`, `hdr`: what to encode and the encoder settings derived from it.
//! - `images`, `subtitles`, `audio`: stills, subtitle cues, the job's audio.
//! - `stitch`: joining segments, the output checks and the quality report; `target`: the
//!   rate-factor search of target-quality encoding.
//! - `segmented`: a track cut into package segments.
//! - `capabilities`: what an FFmpeg build and a card can do.
//! - `package`: what a streaming package (HLS, DASH, CMAF) and its ladder are.
//! - `wire`: the versioned queue messages between dispatcher and workers, and store keys.
//! - `api`: the job body of the dispatcher's HTTP API.
//! - `error_code`: the catalog of error codes and their retry class.

pub mod api;
pub mod audio;
pub mod capabilities;
pub mod civil;
pub mod encode;
pub mod error_code;
pub mod hdr;
pub mod images;
mod index_codec;
pub mod package;
pub mod plan;
pub mod probe;
pub mod segmented;
pub mod settings;
pub mod stitch;
pub mod subtitles;
pub mod target;
pub mod timestamps;
pub mod wire;
