//! tessera-media: every FFmpeg call tessera makes, behind a blocking API with no FFmpeg types.
//!
//! Why one crate: FFmpeg's API is unsafe at the edges and version-sensitive; confining it here
//! keeps the farm, worker and dispatcher plain Rust, and lets them run this crate's functions in
//! a child process on untrusted input.
//!
//! # Layout
//! The stages of a job, in the order it runs them:
//! - `probe`: container, streams and the video packet index, by one packet scan; the limits
//!   every input is held to.
//! - `split`: the input's video cut by stream copy into one chunk per segment.
//! - `encode`: one segment, on the software encoders or an NVIDIA card; the still images made
//!   from its frames and the sprite sheets composed from them.
//! - `audio`: every kept track transcoded (or copied) once for the whole input.
//! - `stitch`: the segments and the audio joined into the output, with subtitles, chapters
//!   and title; a stitched rendition cut into a streaming package's media segments.
//! - `verify`: the QC gate that decodes the stitched output against the plan; PSNR/SSIM.
//!
//! Under them: `gpu` (what the build and a card offer, how GPU failures are read, the NVDEC
//! check), `demux` (opening inputs, reading packets, opening decoders), `nut` (the NUT
//! intermediates between stages), `capabilities` (the build's answer as one value), `error`
//! (`MediaError`), and `ffi`, the only module with `unsafe` code outside tests.
//!
//! # One public path per name
//! Every module is private; the items other crates call are re-exported here, at the root,
//! and that is their only public path (`tessera_media::probe_within`, never
//! `tessera_media::probe::probe_within`).

mod audio;
mod capabilities;
mod demux;
mod encode;
mod error;
mod ffi;
mod gpu;
mod nut;
mod probe;
mod scenes;
mod split;
mod stitch;
mod verify;

pub use audio::transcode_audio;
pub use capabilities::capabilities;
pub use encode::encode_segment;
pub use encode::hw::nvenc::nvenc_preset;
pub use encode::sprite::compose_sprite;
pub use error::MediaError;
pub use gpu::nvdec::nvdec_decode_check;
pub use gpu::probe::probe_card;
pub use gpu::{release_cuda_devices, warm_cuda_device};
pub use probe::limits::MAX_VIDEO_FRAMES;
pub use probe::{probe, probe_within};
pub use scenes::scene_changes;
pub use split::split;
pub use stitch::segmenter::segment_track;
pub use stitch::stitch;
pub use verify::quality::measure_quality;

use std::sync::Once;

/// Initialises FFmpeg once per process and quiets its logging to errors.
///
/// Why: library log chatter on stderr would drown the child-process protocol and our own logs.
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = ffmpeg_next::init();
        ffmpeg_next::util::log::set_level(ffmpeg_next::util::log::Level::Error);
    });
}

/// The FFmpeg library versions this process is linked against, for logs and `--version`.
pub fn ffmpeg_version() -> String {
    let v = ffmpeg_next::format::version();
    format!("libavformat {}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff)
}
