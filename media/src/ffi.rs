//! The few raw FFmpeg calls ffmpeg-next does not wrap. Every `unsafe` in the crate lives in
//! this module tree, and the rest of the crate calls it through the names re-exported here
//! (`cuda` excepted, a module of its own).
//!
//! Why: keeping the FFI in one small audited module means the rest of the crate is safe Rust,
//! and each unsafe block states the invariant it relies on. By what they touch:
//! - opening and reading inputs: open.rs (the open without stream-info probing), input.rs
//!   (packet and frame flags, stream parameters, the duration estimate), index.rs (the
//!   demuxer's index), hdr.rs (HDR10 side data);
//! - decoding and frames: decoder.rs (decoder switches), frame.rs (frame references),
//!   scale.rs (what the scaler needs);
//! - encoding and writing: encoder.rs (colour tags, priming), output.rs (stream side data and
//!   codec tags before the header), subtitle.rs (text subtitle codecs);
//! - the GPU path: cuda.rs (CUDA device and frames contexts), with the FFmpeg log capture in
//!   avlog.rs;
//! - libvmaf, the one C library besides FFmpeg: vmaf.rs (its scorer, a module of its own).

mod avlog;
pub(crate) mod cuda;
mod decoder;
mod encoder;
mod frame;
mod hdr;
mod index;
mod input;
mod open;
mod output;
mod scale;
mod subtitle;
pub(crate) mod vmaf;

pub(crate) use decoder::{decode_fast, skip_nonref_frames};
pub(crate) use encoder::{encoder_initial_padding, set_encoder_color};
pub(crate) use frame::{buffersrc_write, frame_ref};
pub(crate) use hdr::hdr_metadata;
pub(crate) use index::keyframe_times;
pub(crate) use input::{
    codecpar_format, duration_is_bitrate_guess, frame_is_damaged, guessed_sar, packet_is_discard,
    pixel_depth, stream_extradata, stream_video_delay,
};
pub(crate) use open::{find_stream_info, open_without_stream_info};
pub(crate) use output::{
    adapt_codec_tag, add_display_matrix, muxer_has_tag, set_codec_tag, set_initial_padding,
    set_nut_codec_tag,
};
pub(crate) use scale::{copy_frame_props, scaler_keeps_full_range};
pub(crate) use subtitle::{encode_subtitle, set_subtitle_header, subtitle_header};
