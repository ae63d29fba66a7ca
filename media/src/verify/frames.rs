//! The decoded frames of a file in presentation order, and a scaler that brings each one to
//! a size in 8-bit 4:2:0: what the quality measures compare.
//!
//! Why apart from the gate's decode (parts.rs): the measures compare two files frame by frame
//! in lockstep, each frame at one or two sizes, where the gate checks one file's timeline.

use std::path::{Path, PathBuf};

use ff::media::Type;
use ffmpeg_next as ff;

use crate::demux::{open_input, open_video_decoder, read_packet};
use crate::MediaError;

/// The video frames of one file, decoded in presentation order.
pub(crate) struct FrameReader {
    path: PathBuf,
    ictx: ff::format::context::Input,
    pub(crate) decoder: ff::decoder::Video,
    index: usize,
    eof: bool,
}

impl FrameReader {
    /// Opens the best video stream of `path`, decoding on up to `threads` threads.
    pub(crate) fn open(path: &Path, threads: usize) -> Result<Self, MediaError> {
        let ictx = open_input(path)?;
        let stream = ictx
            .streams()
            .best(Type::Video)
            .ok_or_else(|| MediaError::NoVideo {
                path: path.display().to_string(),
                found: "no video stream to compare".into(),
            })?;
        let index = stream.index();
        let decoder = open_video_decoder(&stream, path, threads)?;
        Ok(FrameReader {
            path: path.to_path_buf(),
            ictx,
            decoder,
            index,
            eof: false,
        })
    }

    /// The file, for errors.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The next decoded frame as the decoder gave it.
    pub(crate) fn next(&mut self) -> Result<Option<ff::frame::Video>, MediaError> {
        let mut frame = ff::frame::Video::empty();
        loop {
            if self.decoder.receive_frame(&mut frame).is_ok() {
                return Ok(Some(frame));
            }
            if self.eof {
                return Ok(None);
            }
            match read_packet(&mut self.ictx, &self.path)? {
                Some(p) if p.stream() == self.index => {
                    let _ = self.decoder.send_packet(&p);
                }
                Some(_) => {}
                None => {
                    let _ = self.decoder.send_eof();
                    self.eof = true;
                }
            }
        }
    }
}

/// Brings frames of one stream to one size in 8-bit yuv420p, bicubic (the scaler is made
/// for the first frame's format and size, and again when they change).
pub(crate) struct Fit {
    width: u32,
    height: u32,
    scaler: Option<(ff::format::Pixel, u32, u32, ff::software::scaling::Context)>,
}

impl Fit {
    /// Frames to `width`x`height`.
    pub(crate) fn to(width: u32, height: u32) -> Self {
        Fit {
            width,
            height,
            scaler: None,
        }
    }

    /// `frame` at this size and format; `path` names the file in errors.
    pub(crate) fn fit(
        &mut self,
        frame: &ff::frame::Video,
        path: &Path,
    ) -> Result<ff::frame::Video, MediaError> {
        let (format, w, h) = (frame.format(), frame.width(), frame.height());
        let fresh =
            !matches!(&self.scaler, Some((f, sw, sh, _)) if (*f, *sw, *sh) == (format, w, h));
        if fresh {
            let scaler = ff::software::scaling::Context::get(
                format,
                w,
                h,
                ff::format::Pixel::YUV420P,
                self.width,
                self.height,
                ff::software::scaling::Flags::BICUBIC,
            )
            .map_err(|e| MediaError::decode(path, e))?;
            self.scaler = Some((format, w, h, scaler));
        }
        let (.., scaler) = self.scaler.as_mut().expect("made above");
        let mut out = ff::frame::Video::empty();
        scaler
            .run(frame, &mut out)
            .map_err(|e| MediaError::decode(path, e))?;
        Ok(out)
    }
}
