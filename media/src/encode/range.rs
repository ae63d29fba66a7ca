//! The frames a segment is made of, the same for the software and GPU paths: request checks,
//! the range gate that picks frames of `[start_pts, end_pts)` and gives each its output pts,
//! and the decode loop.
//!
//! Why shared: both paths must select exactly the same frames, or segments encoded on a card
//! and on a CPU would not stitch to the same frame count.

use ff::Rescale as _;
use ffmpeg_next as ff;

use crate::demux::read_packet;
use crate::MediaError;
use tessera_model::encode::EncodeRequest;

/// Checks what both paths require of a request.
pub(crate) fn check_request(req: &EncodeRequest) -> Result<(), MediaError> {
    if req.outputs.is_empty() {
        return Err(MediaError::InvalidRequest("no renditions to encode".into()));
    }
    if req.source.end_pts <= req.source.start_pts {
        return Err(MediaError::InvalidRequest(format!(
            "empty range [{}, {})",
            req.source.start_pts, req.source.end_pts
        )));
    }
    if !req.stills.is_empty() && req.hardware.is_some() {
        return Err(MediaError::InvalidRequest(
            "still images are made on the software path only".into(),
        ));
    }
    if let Some(s) = req
        .stills
        .iter()
        .find(|s| s.pts < req.source.start_pts || s.pts >= req.source.end_pts)
    {
        return Err(MediaError::InvalidRequest(format!(
            "still at pts {} is outside the range [{}, {})",
            s.pts, req.source.start_pts, req.source.end_pts
        )));
    }
    Ok(())
}

/// Picks the decoded frames of `[start_pts, end_pts)` and gives each its output pts; shared by
/// the software and GPU paths so both select exactly the same frames.
pub(crate) struct RangeGate {
    chunk_tb: ff::Rational,
    src_tb: ff::Rational,
    start: i64,
    end: i64,
    bias: i64,
    last_sent: Option<i64>,
    /// Frames the decoder produced (pre-roll included).
    pub(crate) decoded: u64,
    /// Frames admitted.
    pub(crate) in_range: u64,
    /// Admitted frames the decoder flagged as damaged (concealed errors, corrupt flag).
    pub(crate) damaged: u64,
}

impl RangeGate {
    pub(crate) fn new(req: &EncodeRequest, chunk_tb: ff::Rational) -> Self {
        RangeGate {
            chunk_tb,
            src_tb: ff::Rational::new(req.source.time_base.num, req.source.time_base.den),
            start: req.source.start_pts,
            end: req.source.end_pts,
            bias: req.source.bias,
            last_sent: None,
            decoded: 0,
            in_range: 0,
            damaged: 0,
        }
    }

    /// [`RangeGate::admit`] for a decoded frame, also counting it when it lies in the range
    /// and the decoder flagged it damaged (pre-roll damage, e.g. open-GOP leading pictures
    /// decoded without their references, is expected and not counted).
    pub(crate) fn admit_frame(&mut self, frame: &ff::frame::Video) -> Option<i64> {
        let pts = self.admit(frame.timestamp())?;
        if crate::ffi::frame_is_damaged(frame) {
            self.damaged += 1;
        }
        Some(pts)
    }

    /// What tells the packets before the range (the decode lead-in) from the rest.
    pub(crate) fn lead_in(&self) -> LeadIn {
        LeadIn {
            chunk_tb: self.chunk_tb,
            src_tb: self.src_tb,
            start: self.start,
            bias: self.bias,
        }
    }

    /// Counts a decoded frame; returns its biased output pts when it lies in the range.
    pub(crate) fn admit(&mut self, ts: Option<i64>) -> Option<i64> {
        self.decoded += 1;
        let ts = ts?;
        let ts = if self.chunk_tb == self.src_tb {
            ts
        } else {
            ts.rescale(self.chunk_tb, self.src_tb)
        };
        let src = ts - self.bias;
        if src < self.start || src >= self.end {
            return None;
        }
        // Keep timestamps strictly increasing for the encoder (a broken source may repeat one).
        let src = match self.last_sent {
            Some(prev) if src <= prev => prev + 1,
            _ => src,
        };
        self.last_sent = Some(src);
        self.in_range += 1;
        Some(src + self.bias)
    }
}

/// The packets of a chunk that show before its segment's range: they are decoded only as
/// references for the range's frames.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeadIn {
    chunk_tb: ff::Rational,
    src_tb: ff::Rational,
    start: i64,
    bias: i64,
}

impl LeadIn {
    /// Whether a packet with this pts (chunk time base) shows before the range.
    pub(crate) fn holds(&self, pts: i64) -> bool {
        let ts = if self.chunk_tb == self.src_tb {
            pts
        } else {
            pts.rescale(self.chunk_tb, self.src_tb)
        };
        ts - self.bias < self.start
    }
}

/// The one video stream of a segment's chunk (stream 0, as split.rs writes it).
pub(crate) fn chunk_stream<'a>(
    ictx: &'a ff::format::context::Input,
    chunk: &std::path::Path,
) -> Result<ff::format::stream::Stream<'a>, MediaError> {
    ictx.stream(0)
        .ok_or_else(|| MediaError::invalid(chunk, "chunk has no stream"))
}

/// A decoder's rejection of a packet: `Some(error)` stops decoding, `None` skips the packet.
pub(crate) type RejectPolicy<'a> = Option<&'a dyn Fn(ff::Error) -> Option<MediaError>>;

/// Feeds every packet of stream 0 to the decoder and hands each frame to `on_frame`, then
/// drains the decoder. Rejected packets are skipped (logged) unless `reject` says otherwise.
///
/// Returns how many packets of the range the decoder rejected (a lead-in packet's rejection is
/// not counted): with the gate's count of damaged frames,
/// the job compares their share with its limit (`source_corrupt`), so a broken upload is
/// refused instead of delivered garbled.
pub(crate) fn decode_all(
    ictx: &mut ff::format::context::Input,
    decoder: &mut ff::decoder::Video,
    chunk: &std::path::Path,
    on_frame: &mut dyn FnMut(&mut ff::frame::Video) -> Result<(), MediaError>,
    reject: RejectPolicy<'_>,
    lead_in: Option<LeadIn>,
) -> Result<u64, MediaError> {
    let mut frame = ff::frame::Video::empty();
    let mut rejected = 0u64;
    let mut skipping = false;
    while let Some(packet) = read_packet(ictx, chunk)? {
        if packet.stream() != 0 {
            continue;
        }
        let in_lead = lead_in.is_some_and(|l| packet.pts().is_some_and(|p| l.holds(p)));
        if lead_in.is_some() && in_lead != skipping {
            // Lead-in frames nothing refers to are never shown nor needed: not decoded.
            crate::ffi::skip_nonref_frames(decoder, in_lead);
            skipping = in_lead;
        }
        // Only this call's log lines may classify its failure (GPU re-review, M5): an earlier
        // line (a fallen-back NVDEC init) must not name a later decode error.
        crate::ffi::cuda::clear_log();
        if let Err(e) = decoder.send_packet(&packet) {
            if let Some(err) = reject.and_then(|f| f(e)) {
                return Err(err);
            }
            // A lead-in packet shows in another segment, which counts its damage, or nowhere
            // (the undecodable head of a recording cut mid-GOP): not charged here.
            rejected += u64::from(!in_lead);
            tracing::debug!(error = %e, "decoder rejected a packet");
        }
        rejected += drain_frames(decoder, &mut frame, on_frame, reject)?;
    }
    let _ = decoder.send_eof();
    rejected += drain_frames(decoder, &mut frame, on_frame, reject)?;
    Ok(rejected)
}

/// Hands every frame the decoder has ready to `on_frame`. An error other than "needs more
/// input" or "end" is a frame that failed (on NVDEC, mapping its surface failed): `reject`
/// decides whether it stops the segment; otherwise it is counted and decoding goes on.
/// Returns how many frames failed.
fn drain_frames(
    decoder: &mut ff::decoder::Video,
    frame: &mut ff::frame::Video,
    on_frame: &mut dyn FnMut(&mut ff::frame::Video) -> Result<(), MediaError>,
    reject: RejectPolicy<'_>,
) -> Result<u64, MediaError> {
    // A decoder that fails frame after frame has nothing more to give for this packet.
    const MAX_FAILED_IN_A_ROW: u64 = 64;
    let mut failed = 0u64;
    loop {
        crate::ffi::cuda::clear_log();
        match decoder.receive_frame(frame) {
            Ok(()) => on_frame(frame)?,
            Err(e) if is_end_or_again(&e) => return Ok(failed),
            Err(e) => {
                if let Some(err) = reject.and_then(|f| f(e)) {
                    return Err(err);
                }
                failed += 1;
                tracing::debug!(error = %e, "decoder failed a frame");
                if failed >= MAX_FAILED_IN_A_ROW {
                    return Ok(failed);
                }
            }
        }
    }
}

/// "Send more input" (EAGAIN) or "no more output" (EOF): the normal ends of a receive loop.
pub(crate) fn is_end_or_again(e: &ff::Error) -> bool {
    matches!(e, ff::Error::Eof)
        || matches!(e, ff::Error::Other { errno } if *errno == ff::util::error::EAGAIN)
}

/// The source of a segment of frames `[start, end)` at 25 fps, 8-bit SDR, for tests that
/// build requests by hand.
#[cfg(test)]
pub(crate) fn test_source(start: i64, end: i64) -> tessera_model::encode::SegmentSource {
    use tessera_model::probe::{ColorInfo, Rational};
    tessera_model::encode::SegmentSource {
        start_pts: start,
        end_pts: end,
        time_base: Rational::new(1, 25),
        bias: 0,
        frame_rate: Rational::new(25, 1),
        sample_aspect_ratio: Rational::new(1, 1),
        source_size: None,
        color: ColorInfo::default(),
        source_bit_depth: 8,
        keyframes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_eagain_and_eof_end_a_receive_loop_quietly() {
        assert!(is_end_or_again(&ff::Error::Eof));
        assert!(is_end_or_again(&ff::Error::Other {
            errno: ff::util::error::EAGAIN
        }));
        // ENOMEM ("No decoder surfaces left") and EXTERNAL (a failed cuvidMapVideoFrame) are
        // failures, which the GPU path's policy turns into errors.
        assert!(!is_end_or_again(&ff::Error::Other {
            errno: ff::util::error::ENOMEM
        }));
        assert!(!is_end_or_again(&ff::Error::External));
        assert!(!is_end_or_again(&ff::Error::InvalidData));
    }

    /// GPU re-review, M5: the decode loop clears the captured log before each decoder call,
    /// so a line logged before it (here: a fallen-back NVDEC init's) is gone by the time a
    /// frame (or a failure to classify) comes out. Before, it stayed for the whole segment.
    #[test]
    fn the_decode_loop_forgets_lines_logged_before_each_call() {
        crate::init();
        let dir = tempfile::tempdir().unwrap();
        let chunk = dir.path().join("chunk.mkv");
        let made = std::process::Command::new("ffmpeg")
            .args([
                "-v",
                "error",
                "-f",
                "lavfi",
                "-i",
                "testsrc2=size=160x90:rate=25:d=1",
            ])
            .args(["-c:v", "libx264", "-preset", "ultrafast"])
            .arg(&chunk)
            .status()
            .unwrap();
        assert!(made.success());
        let mut ictx = ff::format::input(&chunk).unwrap();
        let params = ictx.stream(0).unwrap().parameters();
        let ctx = ff::codec::Context::from_parameters(params).unwrap();
        let mut decoder = ctx.decoder().video().unwrap();
        let _capture = crate::ffi::cuda::LogCapture::start();
        let stale = c"cuvidCreateDecoder(...) failed -> CUDA_ERROR_OUT_OF_MEMORY\n";
        // SAFETY: a printf-style call with a "%s" format and one NUL-terminated string.
        unsafe {
            ff::ffi::av_log(
                std::ptr::null_mut(),
                ff::ffi::AV_LOG_ERROR as libc::c_int,
                c"%s".as_ptr(),
                stale.as_ptr(),
            )
        };
        let mut seen = Vec::new();
        let mut on_frame = |_: &mut ff::frame::Video| {
            // What a failure classified now would read (AvFailure takes the log).
            seen.push(crate::ffi::cuda::AvFailure::new(-libc::EINVAL, "decoding").describe());
            Ok(())
        };
        decode_all(&mut ictx, &mut decoder, &chunk, &mut on_frame, None, None).unwrap();
        assert_eq!(seen.len(), 25);
        assert!(seen.iter().all(|l| !l.contains("CUDA_ERROR")), "{seen:?}");
    }

    #[test]
    fn the_lead_in_is_what_shows_before_the_range() {
        // Source 1/90000 with a bias of 3000, chunk in 1/1000: the range starts at 90000 (1 s).
        let lead_in = LeadIn {
            chunk_tb: ff::Rational::new(1, 1000),
            src_tb: ff::Rational::new(1, 90000),
            start: 90_000,
            bias: 3_000,
        };
        // Chunk pts carry the bias: 1 s of source time is (90000 + 3000) / 90 = 1033.3 ms.
        assert!(lead_in.holds(0));
        assert!(lead_in.holds(1033));
        assert!(!lead_in.holds(1034));
        assert!(!lead_in.holds(5000));
        let same = LeadIn {
            chunk_tb: ff::Rational::new(1, 25),
            src_tb: ff::Rational::new(1, 25),
            start: 10,
            bias: 2,
        };
        assert!(same.holds(11) && !same.holds(12));
    }
}
