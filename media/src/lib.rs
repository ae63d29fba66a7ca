//! tessera-media: every FFmpeg call tessera makes, behind a blocking API with no FFmpeg types.
//!
//! Why one crate: FFmpeg's API is unsafe at the edges and version-sensitive; confining it here
//! keeps the farm, worker and dispatcher plain Rust, and lets them run this crate's functions in
//! a child process on untrusted input.

mod bitstream;
mod capabilities;
mod demux;
mod duration;
mod encode_hw;
mod encode_sw;
mod error;
mod ffi;
mod gpu_failure;
mod nut;
mod range;
pub mod reorder;
mod streams;
mod tonemap;
mod verify_parts;

#[cfg(test)]
mod hw_tests;

pub mod audio;
pub mod encode;
mod hdr;
pub mod hw;
pub mod nvdec;
pub mod nvenc;
pub mod probe;
pub mod quality;
pub mod segmenter;
mod settings;
pub mod split;
pub mod sprite;
pub mod stills;
pub mod stitch;
pub mod subtitles;
pub mod verify;

pub use audio::transcode_audio;
pub use capabilities::capabilities;
pub use encode::encode_segment;
pub use error::MediaError;
pub use hw::{choose_decode_path, release_cuda_devices, warm_cuda_device};
pub use nvdec::nvdec_decode_check;
pub use probe::{probe, probe_within};
pub use quality::measure_quality;
pub use split::split;
pub use sprite::compose_sprite;
pub use stitch::stitch;
pub use verify::verify_output;

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
