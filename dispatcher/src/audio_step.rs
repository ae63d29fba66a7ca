//! The audio step of a job: every audio track transcoded once, for the whole file, in a
//! child beside the segment encodes, then stored in the work area.
//!
//! Why apart from prepare.rs: prepare starts it, the stitch step waits for it; it holds its
//! own task handle, which must kill the child when the job ends early.

use std::path::Path;

use tessera_farm::model::keys;
use tessera_farm::sandbox::{ChildStats, MediaOp};
use tessera_farm::FarmError;
use tessera_media::{AudioRequest, AudioResult, ProbeInfo};
use tokio::task::JoinHandle;

use crate::patience::patiently;
use crate::request::{DispatchContext, JobRequest};

/// AAC bitrate per channel (128 kb/s stereo).
const AUDIO_BITRATE_PER_CHANNEL: u64 = 64_000;

/// What the audio step gives: the transcoded tracks and the child's figures (none without
/// audio).
pub(crate) type AudioOutcome = Result<Option<(AudioResult, ChildStats)>, FarmError>;

/// The audio step running beside the encodes. Dropping it (the job was cancelled or failed)
/// aborts it, which kills its child: no audio transcode outlives its job.
pub(crate) struct AudioTask(JoinHandle<AudioOutcome>);

impl AudioTask {
    /// Stops the audio step now.
    pub(crate) fn abort(&self) {
        self.0.abort();
    }

    /// Waits for the audio step's result.
    pub(crate) async fn finish(&mut self) -> Result<AudioOutcome, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl Drop for AudioTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Time the audio step holds its child per second of one channel transcoded to AAC, next to
/// one frame of a 1280x720 video decoded and encoded (x264 veryfast, one thread). Measured on
/// the 5 s 720p benchmark (48 kHz stereo, 16.4 ms a frame): without this the segment after
/// the audio step ended 0.11 s after the other one; with twice this it ended 0.12 to 0.5 s
/// before it.
const AUDIO_CHANNEL_SECOND_IN_720P_FRAMES: f64 = 9.5 / 16.4;

/// What the audio step of `req` costs in frames of the source video (for the planner, see
/// `plan_segments_busy`).
pub(crate) fn audio_step_frames_of(req: &JobRequest, info: &ProbeInfo) -> f64 {
    let (tracks, copied, _) = audio_tracks(req, info);
    let transcoded: Vec<usize> = tracks.into_iter().filter(|t| !copied.contains(t)).collect();
    audio_step_frames(info, &transcoded, req.outputs.len())
}

/// What transcoding the audio tracks `transcoded` of `info` costs in frames of its video,
/// with `outputs` video outputs, for `plan_segments_busy` (`tessera probe --plan` shows the
/// plan of `tessera transcode` with it). Only tracks transcoded count (a stream copy is
/// nearly free), a frame's cost grows about with the square root of its pixels (a 1080p
/// frame took 23 ms), and each output encodes every frame once more.
pub fn audio_step_frames(info: &ProbeInfo, transcoded: &[usize], outputs: usize) -> f64 {
    let channel_seconds: f64 = info
        .audio
        .iter()
        .filter(|a| transcoded.contains(&a.index))
        .map(|a| f64::from(a.channels) * a.duration_seconds.max(0.0))
        .sum();
    let pixels = f64::from(info.video.width) * f64::from(info.video.height);
    let frame_scale = (pixels / (1280.0 * 720.0)).sqrt().max(0.05) * outputs.max(1) as f64;
    channel_seconds * AUDIO_CHANNEL_SECOND_IN_720P_FRAMES / frame_scale
}

/// The audio tracks of `req` to transcode, those of them copied as they are, and the AAC
/// bit rate per channel of the others.
fn audio_tracks(req: &JobRequest, info: &ProbeInfo) -> (Vec<usize>, Vec<usize>, u64) {
    let mut tracks: Vec<usize> = info.audio.iter().map(|a| a.index).collect();
    if req.first_audio_only {
        tracks.truncate(1);
    }
    // A package that names an audio bit rate gets it (AAC sources are then re-encoded too).
    let package_rate = req
        .package
        .as_ref()
        .filter(|p| !p.spec.audio.is_empty())
        .map(|p| p.spec.audio_bitrate() / 2);
    let copied = info
        .audio
        .iter()
        .filter(|a| a.stream_copies() && package_rate.is_none())
        .map(|a| a.index)
        .collect();
    (
        tracks,
        copied,
        package_rate.unwrap_or(AUDIO_BITRATE_PER_CHANNEL),
    )
}

/// Starts the audio step of `req` (nothing to do without audio tracks).
pub(crate) fn spawn_audio(
    ctx: &DispatchContext,
    req: &JobRequest,
    fingerprint: u64,
    info: &ProbeInfo,
    bias_seconds: f64,
    staging: &Path,
) -> AudioTask {
    let (tracks, copy_tracks, bitrate_per_channel) = audio_tracks(req, info);
    let ctx = ctx.clone();
    let job = req.id.clone();
    let request = AudioRequest {
        input: req.input.clone(),
        tracks,
        bias_seconds,
        copy_tracks,
        bitrate_per_channel,
        output: staging.join("audio-encoded.nut"),
    };
    AudioTask(tokio::spawn(async move {
        if request.tracks.is_empty() {
            return Ok(None);
        }
        let (result, stats): (AudioResult, _) = ctx
            .sandbox
            .run(&MediaOp::Audio(request.clone()), ctx.limits, &mut |_| {})
            .await?;
        let key = keys::audio(&job, fingerprint);
        patiently("store audio", || ctx.store.put_file(&key, &request.output)).await?;
        let _ = tokio::fs::remove_file(&request.output).await;
        Ok(Some((result, stats)))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_media::{AudioInfo, ColorInfo, Rational, VideoInfo};

    fn info(width: u32, height: u32, audio: &[(u16, f64)]) -> ProbeInfo {
        let tb = Rational { num: 1, den: 30 };
        ProbeInfo {
            container: "mov,mp4,m4a,3gp,3g2,mj2".into(),
            duration_seconds: 5.0,
            start_seconds: 0.0,
            video: VideoInfo {
                index: 0,
                codec: "h264".into(),
                width,
                height,
                pix_fmt: "yuv420p".into(),
                bit_depth: 8,
                time_base: tb,
                frame_rate: Rational { num: 30, den: 1 },
                avg_frame_rate: Rational { num: 30, den: 1 },
                sample_aspect_ratio: Rational { num: 1, den: 1 },
                frames: 150,
                color: ColorInfo::default(),
                rotation: 0.0,
                display_matrix: None,
            },
            audio: (audio.iter().enumerate())
                .map(|(i, &(channels, seconds))| AudioInfo {
                    index: i + 1,
                    codec: "aac".into(),
                    sample_rate: 48_000,
                    channels,
                    language: None,
                    time_base: Rational {
                        num: 1,
                        den: 48_000,
                    },
                    start_seconds: Some(0.0),
                    duration_seconds: seconds,
                    trimmed: true,
                })
                .collect(),
            size_bytes: 0,
            ignored: Vec::new(),
            chapters: Vec::new(),
            title: None,
            subtitles: Vec::new(),
        }
    }

    #[test]
    fn the_audio_step_costs_frames_by_channels_seconds_size_and_outputs() {
        let stereo = info(1280, 720, &[(2, 5.0)]);
        let base = audio_step_frames(&stereo, &[1], 1);
        // 5 s of stereo next to 720p frames: 10 channel-seconds at 9.5 / 16.4 a frame each.
        assert!((base - 10.0 * 9.5 / 16.4).abs() < 1e-9, "{base}");
        // A copied track (not in `transcoded`) costs nothing; two outputs halve a frame's
        // share; 4 times the pixels make a frame about twice as costly.
        assert_eq!(audio_step_frames(&stereo, &[], 1), 0.0);
        assert!((audio_step_frames(&stereo, &[1], 2) - base / 2.0).abs() < 1e-9);
        let big = info(2560, 1440, &[(2, 5.0)]);
        assert!((audio_step_frames(&big, &[1], 1) - base / 2.0).abs() < 1e-9);
        // Channels and seconds add up over the tracks transcoded.
        let two = info(1280, 720, &[(2, 5.0), (6, 5.0)]);
        assert!((audio_step_frames(&two, &[1, 2], 1) - 4.0 * base).abs() < 1e-9);
        assert!((audio_step_frames(&two, &[2], 1) - 3.0 * base).abs() < 1e-9);
    }
}
