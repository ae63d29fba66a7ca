//! The limits the probe holds every input to: size, duration, frame rate and frame count.
//!
//! Why a file of their own: the probe's packet scan, the stream description and the duration
//! check each apply some of them, and the farm names `MAX_VIDEO_FRAMES` as its admission cap.

/// Largest width or height tessera accepts (8K is 7680; DCI 8K 8192).
pub const MAX_DIMENSION: u32 = 16384;
/// Longest input tessera accepts, in seconds (48 hours).
pub const MAX_DURATION_SECONDS: f64 = 48.0 * 3600.0;
/// Most video frames tessera accepts (24 hours at 60 fps): the packet scan stops there, so a
/// file of millions of tiny frames cannot exhaust the probe's memory.
pub const MAX_VIDEO_FRAMES: usize = 24 * 3600 * 60;
/// Highest average frame rate tessera accepts (high-speed cameras shoot 240 fps).
pub const MAX_FRAME_RATE: f64 = 480.0;
