//! The NVENC encoder of one GPU rendition and its output file, opened together once the
//! first CUDA frame shows the input pool.
//!
//! Why apart from the rendition: opening is where NVENC refuses a session, a parameter or a
//! card; its errors are read for the GPU stage they happened at (`EncoderOpen`), and the
//! output is the one both paths finish through (`RenditionFile`).

use std::path::Path;

use ffmpeg_next as ff;

use super::dts::{frame_step, NvencDts};
use super::nvenc::{NvencSettings, NVENC_B_FRAMES};
use crate::encode::output::RenditionFile;
use crate::ffi::cuda::{clear_log, AvFailure};
use crate::gpu::{gpu_error, GpuStage};
use crate::MediaError;

/// The NVENC encoder and its output, opened when the first frame shows the input pool.
pub(super) struct Opened {
    /// The opened encoder.
    pub(super) encoder: ff::encoder::Video,
    /// Its output.
    pub(super) file: RenditionFile,
    /// Packet dts from the pts sent (FFmpeg 5.1's NVENC dts is wrong outside 1/fps).
    pub(super) dts: NvencDts,
}

/// Opens `enc` (configured, of `codec`) with `settings`' options on card `dev`, and the
/// rendition's output `(name, path, size)` in time base `tb` at frame rate `rate`.
pub(super) fn open_encoder(
    mut enc: ff::encoder::video::Video,
    codec: ff::Codec,
    settings: &NvencSettings,
    (name, path, size): (&str, &Path, (u32, u32)),
    (tb, rate): (ff::Rational, Option<ff::Rational>),
    dev: u32,
) -> Result<Opened, MediaError> {
    let encoder_name = settings.encoder;
    enc.set_flags(ff::codec::Flags::GLOBAL_HEADER);
    let mut dict = ff::Dictionary::new();
    for (k, v) in &settings.options {
        dict.set(k, v);
    }
    clear_log();
    let encoder = enc.open_as_with(codec, dict).map_err(|e| {
        let f = AvFailure::from_error(e, "opening the encoder");
        gpu_error(dev, GpuStage::EncoderOpen, &f, |r| {
            MediaError::encode(encoder_name, format!("cannot open: {r}"))
        })
    })?;
    let file = RenditionFile::create(name, path, size, codec, &encoder, tb)?;
    let enc_tb = encoder.time_base();
    let step = frame_step(
        (enc_tb.numerator(), enc_tb.denominator()),
        rate.map(|r| (r.numerator(), r.denominator())),
    );
    Ok(Opened {
        encoder,
        file,
        dts: NvencDts::new(NVENC_B_FRAMES, step),
    })
}
