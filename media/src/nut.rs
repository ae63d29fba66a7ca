//! Intermediate files (chunks, encoded segments, audio) in FFmpeg's NUT container.
//!
//! Why NUT: it keeps each stream's own time base exactly (Matroska rounds to 1 ms, MPEG-TS to
//! 1/90000 s), so source timestamps survive split -> encode -> stitch bit for bit. Timestamps
//! are stored with a non-negative bias (see `plan::timestamp_bias`) that readers subtract.

use std::path::Path;

use ffmpeg_next as ff;

use crate::MediaError;

/// Opens a NUT output at `path`.
pub(crate) fn create(path: &Path) -> Result<ff::format::context::Output, MediaError> {
    ff::format::output_as(path, "nut").map_err(|e| MediaError::write(path, e))
}

/// Writes the header; returns the time bases the muxer settled on, per stream.
pub(crate) fn write_header(
    octx: &mut ff::format::context::Output,
    path: &Path,
) -> Result<Vec<ff::Rational>, MediaError> {
    let mut opts = ff::Dictionary::new();
    // Timestamps are already biased to be non-negative; never let the muxer shift them.
    opts.set("avoid_negative_ts", "disabled");
    octx.write_header_with(opts)
        .map_err(|e| MediaError::write(path, format!("header: {e}")))?;
    Ok(octx.streams().map(|s| s.time_base()).collect())
}

/// Writes one packet (already in the stream's time base).
pub(crate) fn write(
    octx: &mut ff::format::context::Output,
    packet: &ff::Packet,
    path: &Path,
) -> Result<(), MediaError> {
    packet
        .write_interleaved(octx)
        .map_err(|e| MediaError::write(path, format!("packet: {e}")))
}

/// Finishes the file.
pub(crate) fn finish(
    octx: &mut ff::format::context::Output,
    path: &Path,
) -> Result<(), MediaError> {
    octx.write_trailer()
        .map_err(|e| MediaError::write(path, format!("trailer: {e}")))
}

/// The size of a finished file, 0 when it cannot be read.
pub(crate) fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}
