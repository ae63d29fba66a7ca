//! A rendition's NUT output file, and the one way both paths finish a rendition.
//!
//! Why one: the software renditions and the GPU path's NVENC renditions write the same
//! intermediate and answer the same `RenditionResult` (frames, first and last pts without the
//! bias, size, bytes, whether the file starts on a keyframe); the file is created, written,
//! counted and closed here, once for both.

use std::path::{Path, PathBuf};

use ffmpeg_next as ff;

use crate::{nut, MediaError};
use tessera_model::encode::RenditionResult;

/// An open rendition output: the NUT file with its one video stream, and the figures of what
/// was sent to its encoder and written.
pub(crate) struct RenditionFile {
    name: String,
    path: PathBuf,
    size: (u32, u32),
    /// The encoder's name (`h264_nvenc`, `libx264`), for the result.
    encoder: String,
    octx: ff::format::context::Output,
    enc_tb: ff::Rational,
    out_tb: ff::Rational,
    frames: u64,
    first_pts: Option<i64>,
    last_pts: Option<i64>,
    first_key: Option<bool>,
}

impl RenditionFile {
    /// Creates `path` with one stream for the opened `encoder` (of `codec`) in time base
    /// `tb`, and writes its header. `name` and `size` are the rendition's, for the result.
    pub(crate) fn create(
        name: &str,
        path: &Path,
        size: (u32, u32),
        codec: ff::Codec,
        encoder: &ff::encoder::Video,
        tb: ff::Rational,
    ) -> Result<Self, MediaError> {
        let mut octx = nut::create(path)?;
        let mut ost = octx
            .add_stream(codec)
            .map_err(|e| MediaError::write(path, e))?;
        ost.set_parameters(encoder);
        ost.set_time_base(tb);
        let enc_tb = encoder.time_base();
        let out_tb = nut::write_header(&mut octx, path)?[0];
        Ok(RenditionFile {
            name: name.to_string(),
            path: path.to_path_buf(),
            size,
            encoder: codec.name().to_string(),
            octx,
            enc_tb,
            out_tb,
            frames: 0,
            first_pts: None,
            last_pts: None,
            first_key: None,
        })
    }

    /// The rendition's name, for errors.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Counts one frame the encoder took, at output pts `pts` (biased) when it had one.
    pub(crate) fn sent(&mut self, pts: Option<i64>) {
        self.frames += 1;
        if let Some(p) = pts {
            self.first_pts.get_or_insert(p);
            self.last_pts = Some(p);
        }
    }

    /// Writes one encoded packet (timestamps in the encoder's time base); the first one says
    /// whether the rendition starts on a keyframe.
    pub(crate) fn write(&mut self, packet: &mut ff::Packet) -> Result<(), MediaError> {
        self.first_key.get_or_insert(packet.is_key());
        packet.set_stream(0);
        packet.rescale_ts(self.enc_tb, self.out_tb);
        nut::write(&mut self.octx, packet, &self.path)
    }

    /// Closes the file (the encoder is flushed and drained already) and answers what it
    /// holds, its pts without the request's `bias`.
    pub(crate) fn finish(mut self, bias: i64) -> Result<RenditionResult, MediaError> {
        nut::finish(&mut self.octx, &self.path)?;
        Ok(RenditionResult {
            name: self.name,
            frames: self.frames,
            first_pts: self.first_pts.map(|p| p - bias),
            last_pts: self.last_pts.map(|p| p - bias),
            width: self.size.0,
            height: self.size.1,
            bytes: nut::file_size(&self.path),
            starts_with_keyframe: self.first_key.unwrap_or(false),
            encoder: self.encoder,
            target: None,
        })
    }
}
