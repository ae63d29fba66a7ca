//! The input's duration judged by its packets: the limits on duration and frame rate, and the
//! truncation check of a header that promises more than the packets hold.
//!
//! Why apart from the probe: these are pure rules on figures the packet scan gathered, with
//! their own tests; the probe only feeds them.

use std::path::Path;

use super::limits::{MAX_DURATION_SECONDS, MAX_FRAME_RATE};
use crate::MediaError;
use tessera_model::probe::AudioInfo;

/// How far the packets reach, in seconds from zero or from the earliest packet, whichever is
/// more: muxers state a duration either way (Matroska counts from zero, so a file whose
/// timestamps start at 10 s says 13 s for 3 s of media), and a truncation check must not
/// mistake one convention for missing media.
pub(crate) fn covered_until(
    video_start: f64,
    video_end: f64,
    frames: usize,
    audio: &[AudioInfo],
    start_seconds: f64,
) -> f64 {
    let frame = if frames > 1 {
        (video_end - video_start) / (frames - 1) as f64
    } else {
        0.0
    };
    let end = audio
        .iter()
        .filter_map(|a| a.start_seconds.map(|s| s + a.duration_seconds))
        .fold(video_end + frame, f64::max);
    end - start_seconds.min(0.0)
}

/// The duration a container's header states, and whether it was measured (written by the
/// muxer, or read from the last timestamps) rather than guessed from the bit rate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    /// Seconds stated.
    pub(crate) seconds: f64,
    /// Measured, not a bit-rate guess.
    pub(crate) measured: bool,
}

/// Share of the header's duration the packets may fall short of before the file counts as
/// truncated (plus [`TRUNCATION_SLACK_SECONDS`]): muxers round, and a stream may end a little
/// before the longest one.
const TRUNCATION_SHARE: f64 = 0.02;
/// Seconds the packets may fall short of the header's duration, whatever its length.
const TRUNCATION_SLACK_SECONDS: f64 = 0.5;

/// The input's duration, judged by its packets rather than its header alone, and the limits on
/// duration and frame rate applied to what the packets say.
///
/// A measured header that promises clearly more than the packets hold means a truncated
/// upload (Matroska, WebM and AVI demuxers end quietly where the bytes stop): that is refused
/// as `source_corrupt`, never transcoded into a short output. A header that claims less is
/// not believed.
pub(crate) fn checked_duration(
    path: &Path,
    header: Header,
    video_span: f64,
    frames: usize,
    audio: &[AudioInfo],
    covered: f64,
) -> Result<f64, MediaError> {
    let container = header.seconds;
    let unsupported = |reason: String| MediaError::Unsupported {
        path: path.display().to_string(),
        reason,
    };
    let frame = if frames > 1 {
        video_span / (frames - 1) as f64
    } else {
        0.0
    };
    let media_span = audio
        .iter()
        .map(|a| a.duration_seconds)
        .fold(video_span + frame, f64::max);
    if media_span > MAX_DURATION_SECONDS {
        return Err(unsupported(format!(
            "its packets span {media_span:.0} s, over the limit of {MAX_DURATION_SECONDS:.0} s"
        )));
    }
    if frames > 1 && video_span > 0.0 && (frames - 1) as f64 / video_span > MAX_FRAME_RATE {
        return Err(unsupported(format!(
            "average frame rate {:.0} fps is over the limit of {MAX_FRAME_RATE:.0} fps",
            (frames - 1) as f64 / video_span
        )));
    }
    let slack = TRUNCATION_SLACK_SECONDS.max(2.0 * frame) + TRUNCATION_SHARE * container;
    let reached = media_span.max(covered);
    let missing = container - reached;
    if header.measured && missing > slack {
        return Err(MediaError::SourceCorrupt {
            path: path.display().to_string(),
            reason: format!(
                "truncated: its header promises {container:.2} s but its packets end after \
                 {reached:.2} s"
            ),
        });
    }
    let believable = header.measured && container > 0.0 && missing.abs() <= slack;
    if container > 0.0 && !believable {
        tracing::warn!(
            input = %path.display(), header = container, packets = media_span,
            "the container's duration disagrees with its packets; using the packets'"
        );
    }
    Ok(if believable { container } else { media_span })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::error_code::ErrorCode;

    fn check(header: f64, measured: bool, span: f64) -> Result<f64, MediaError> {
        check_from(header, measured, span, 0.0)
    }

    /// `span` seconds of 25 fps video whose first frame is at `start`.
    fn check_from(header: f64, measured: bool, span: f64, start: f64) -> Result<f64, MediaError> {
        let frames = (span * 25.0) as usize + 1;
        checked_duration(
            Path::new("in.mkv"),
            Header {
                seconds: header,
                measured,
            },
            span,
            frames,
            &[],
            covered_until(start, start + span, frames, &[], start),
        )
    }

    #[test]
    fn a_header_counting_from_zero_is_not_a_truncation() {
        // Matroska: timestamps from 10 s, 3 s of media, the header says 13 s.
        assert!(check_from(13.0, true, 2.96, 10.0).is_ok());
        // The same header over 1 s of media from 10 s is short by 2 s.
        let e = check_from(13.0, true, 0.96, 10.0).unwrap_err();
        assert_eq!(e.code(), ErrorCode::SourceCorrupt);
    }

    #[test]
    fn a_header_promising_more_than_the_packets_is_a_truncated_source() {
        let e = check(4.0, true, 1.96).unwrap_err();
        assert_eq!(e.code(), ErrorCode::SourceCorrupt);
        let text = e.to_string();
        assert!(
            text.starts_with("in.mkv: source is corrupt: truncated"),
            "{text}"
        );
        assert!(text.contains("4.00 s") && text.contains("2.00 s"), "{text}");
        // A lie of hours is the same finding, not a long job.
        assert_eq!(
            check(36_000.0, true, 3.96).unwrap_err().code(),
            ErrorCode::SourceCorrupt
        );
    }

    #[test]
    fn small_shortfalls_and_bitrate_guesses_are_accepted() {
        // Rounding and a stream that ends a frame early.
        assert_eq!(check(4.04, true, 3.96).unwrap(), 4.04);
        // Two per cent of a long file.
        assert!(check(3600.0, true, 3560.0).is_ok());
        // A guess from the bit rate says nothing about truncation, and is not believed.
        assert_eq!(check(8.0, false, 3.96).unwrap(), 4.0);
        // Nor is a header that claims less than the packets hold.
        assert_eq!(check(1.0, true, 3.96).unwrap(), 4.0);
    }
}
