//! The segment's source frames, decoded once and kept for every round of a target-quality
//! search: each round encodes from them, and each scoring compares against them, instead of
//! decoding the chunk again.
//!
//! Why: a high-bitrate upload costs about a third of a medium x264 encode to decode, and a
//! search decoded it twice a round (once to encode, once to score). Kept only up to
//! [`KEEP_BYTES`] (about 340 1080p frames of 8-bit 4:2:0); a longer or larger segment is
//! decoded again each round, as before.

use std::time::Instant;

use ffmpeg_next as ff;

use crate::demux::{open_input, open_video_decoder};
use crate::encode::range::{chunk_stream, decode_all, RangeGate};
use crate::encode::sw::SwEncoder;
use crate::MediaError;
use tessera_model::encode::{EncodeRequest, EncodeResult};

/// The most bytes of frames kept.
const KEEP_BYTES: usize = 1 << 30;

/// What a decode of a segment's range found.
struct Decoded {
    /// The size renditions scale from and scores are taken at.
    size: (u32, u32),
    format: ff::format::Pixel,
    /// Frames decoded, pre-roll included.
    frames: u64,
    /// Packets rejected and damaged frames, in the range.
    errors: u64,
}

/// Decodes the chunk of `req` and hands each frame of its range, with its output pts, to
/// `on_frame`.
fn decode_range(
    req: &EncodeRequest,
    on_frame: &mut dyn FnMut(&mut ff::frame::Video, i64) -> Result<(), MediaError>,
) -> Result<Decoded, MediaError> {
    let chunk = req.chunk.as_path();
    let mut ictx = open_input(chunk)?;
    let stream = chunk_stream(&ictx, chunk)?;
    let mut decoder = open_video_decoder(&stream, chunk, req.threads)?;
    let size = (req.source.source_size).unwrap_or((decoder.width(), decoder.height()));
    let mut gate = RangeGate::new(req, stream.time_base());
    let lead_in = gate.lead_in();
    let mut admit = |frame: &mut ff::frame::Video| match gate.admit_frame(frame) {
        Some(pts) => on_frame(frame, pts),
        None => Ok(()),
    };
    let rejected = decode_all(
        &mut ictx,
        &mut decoder,
        chunk,
        &mut admit,
        None,
        Some(lead_in),
    )?;
    if gate.decoded == 0 {
        return Err(MediaError::decode(chunk, "no frame could be decoded"));
    }
    Ok(Decoded {
        size,
        format: decoder.format(),
        frames: gate.decoded,
        errors: rejected + gate.damaged,
    })
}

/// Hands each frame of `req`'s range to `on_frame`, in order: the `kept` ones, or the chunk
/// decoded again.
pub(super) fn each_frame(
    req: &EncodeRequest,
    kept: Option<&SourceFrames>,
    on_frame: &mut dyn FnMut(&ff::frame::Video) -> Result<(), MediaError>,
) -> Result<(), MediaError> {
    match kept {
        Some(kept) => kept
            .frames
            .iter()
            .try_for_each(|(frame, _)| on_frame(frame)),
        None => decode_range(req, &mut |frame, _| on_frame(frame)).map(|_| ()),
    }
}

/// The admitted frames of a segment, in order, with their output pts.
pub(super) struct SourceFrames {
    frames: Vec<(ff::frame::Video, i64)>,
    /// The size renditions scale from and scores are taken at.
    pub(super) size: (u32, u32),
    format: ff::format::Pixel,
    decoded: u64,
    errors: u64,
}

impl SourceFrames {
    /// Decodes the frames of `req`'s range; `progress` counts them. None when they would
    /// take more than [`KEEP_BYTES`] (the decode stops there).
    pub(super) fn load(
        req: &EncodeRequest,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Option<SourceFrames>, MediaError> {
        Self::load_within(req, progress, KEEP_BYTES)
    }

    /// [`SourceFrames::load`] keeping at most `keep` bytes.
    fn load_within(
        req: &EncodeRequest,
        progress: &mut dyn FnMut(u64),
        keep: usize,
    ) -> Result<Option<SourceFrames>, MediaError> {
        let (mut frames, mut bytes, mut too_many) = (Vec::new(), 0usize, false);
        let decoded = decode_range(req, &mut |frame, pts| {
            bytes += (0..frame.planes())
                .map(|i| frame.data(i).len())
                .sum::<usize>();
            if bytes > keep {
                too_many = true;
                return Err(MediaError::InvalidRequest(
                    "frames past the keep limit".into(),
                ));
            }
            frame.set_kind(ff::picture::Type::None);
            frames.push((frame.clone(), pts));
            progress(frames.len() as u64);
            Ok(())
        });
        if too_many {
            return Ok(None);
        }
        let decoded = decoded?;
        Ok(Some(SourceFrames {
            frames,
            size: decoded.size,
            format: decoded.format,
            decoded: decoded.frames,
            errors: decoded.errors,
        }))
    }

    /// Encodes every rendition of `req` (the request these frames were decoded for, or a
    /// round of it) from the kept frames, as the software path would from the chunk.
    pub(super) fn encode(&self, req: &EncodeRequest) -> Result<EncodeResult, MediaError> {
        let started = Instant::now();
        let mut encoder = SwEncoder::open(req, self.size, self.format)?;
        for (frame, pts) in &self.frames {
            encoder.frame(frame, *pts)?;
        }
        Ok(EncodeResult {
            decoded_frames: self.decoded,
            frames_in_range: self.frames.len() as u64,
            renditions: encoder.finish()?,
            media_seconds: started.elapsed().as_secs_f64(),
            decode_errors: self.errors,
            gpu_decode: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use super::*;
    use crate::encode::sw::encode_sw;
    use tessera_model::encode::VideoCodec;
    use tessera_model::encode::{RateControl, RenditionOutput, RenditionSpec};

    /// A request for frames 5..25 of a 30-frame 64x48 chunk made by the ffmpeg CLI, into
    /// `out`; None without the CLI.
    fn request(dir: &Path, out: &str) -> Option<EncodeRequest> {
        let chunk = dir.join("chunk.nut");
        let made = Command::new("ffmpeg")
            .args([
                "-hide_banner",
                "-loglevel",
                "error",
                "-y",
                "-f",
                "lavfi",
                "-i",
            ])
            .arg("testsrc2=size=64x48:rate=25:duration=1.2")
            .args(["-c:v", "libx264", "-g", "10", "-bf", "2"])
            .arg(&chunk)
            .status()
            .ok()?;
        assert!(made.success(), "ffmpeg could not make the chunk");
        Some(EncodeRequest {
            chunk,
            source: crate::encode::range::test_source(5, 25),
            outputs: vec![RenditionOutput {
                spec: RenditionSpec {
                    name: "full".into(),
                    codec: VideoCodec::H264,
                    rate: RateControl::Crf(30.0),
                    preset: "veryfast".into(),
                    height: None,
                    hdr: Default::default(),
                    maxrate: None,
                    profile: None,
                    target: None,
                },
                path: dir.join(out),
            }],
            threads: 1,
            hardware: None,
            stills: Vec::new(),
        })
    }

    #[test]
    fn kept_frames_encode_to_the_same_bytes_as_the_chunk_and_the_limit_holds() {
        let dir = tempfile::tempdir().unwrap();
        let Some(req) = request(dir.path(), "from-chunk.nut") else {
            eprintln!("ffmpeg CLI not found; skipping");
            return;
        };
        crate::init();
        let from_chunk = encode_sw(&req, &mut |_| {}).unwrap();
        let mut counted = 0;
        let kept = SourceFrames::load(&req, &mut |n| counted = n)
            .unwrap()
            .expect("20 tiny frames are kept");
        assert_eq!((kept.frames.len(), counted), (20, 20));
        let again = EncodeRequest {
            outputs: vec![RenditionOutput {
                path: dir.path().join("from-frames.nut"),
                ..req.outputs[0].clone()
            }],
            ..req.clone()
        };
        let from_frames = kept.encode(&again).unwrap();
        assert_eq!(from_frames.frames_in_range, from_chunk.frames_in_range);
        assert_eq!(from_frames.decoded_frames, from_chunk.decoded_frames);
        let bytes = |p: &PathBuf| std::fs::read(p).unwrap();
        assert_eq!(
            bytes(&again.outputs[0].path),
            bytes(&req.outputs[0].path),
            "the kept frames encode differently from the chunk"
        );
        // 20 frames of 64x48 4:2:0 are about 92 KB: a tighter limit keeps none.
        let none = SourceFrames::load_within(&req, &mut |_| {}, 50_000).unwrap();
        assert!(none.is_none());
    }
}
