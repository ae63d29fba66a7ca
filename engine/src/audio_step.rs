//! The audio step of a job: every audio track transcoded once, for the whole file, in a
//! child beside the segment encodes, then stored in the work area.
//!
//! Why apart from prepare.rs: prepare starts it, the collect stage may let it begin, the
//! stitch step waits for it; it holds its own task handle, which must kill the child when the
//! job ends early.
//!
//! When it begins: at once, except in the one-process farm (whose workers and dispatcher share
//! one warm child per worker) for a job of one round of segments (no more segments than
//! children, a short input): there it waits until a segment has finished
//! ([`AudioTask::segments_left`]) and runs on the child that segment freed. Why: begun at once
//! it made one worker's segment wait for it, and which worker that was depended on which asked
//! for a child first, a race the planner could not see: in about one run in ten the segment
//! the planner had not shortened for it waited, and the two ended 100-150 ms apart. Begun
//! after a segment, it runs on the child of the segment the planner made shorter for it
//! (`plan_segments_busy`), which ends first. A longer job begins it at once: its workers take
//! the segments as they come free, which evens out a worker's late start, while an audio step
//! left for the end ran past the last segment when the segments ended close together (0.6 s
//! on the 60 s 1080p benchmark).

use std::path::Path;

use tessera_farm::sandbox::{ChildStats, MediaOp};
use tessera_farm::FarmError;
use tessera_model::audio::{AudioRequest, AudioResult};
use tessera_model::probe::ProbeInfo;
use tessera_model::wire::keys;
use tokio::sync::oneshot;
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
pub(crate) struct AudioTask {
    task: JoinHandle<AudioOutcome>,
    /// Held while the step waits for a free child (see the module doc); sent by `begin`.
    waiting: Option<oneshot::Sender<()>>,
    /// The step begins once fewer segments than this are left (a child is free of segment
    /// work). 0: it began at once.
    children: usize,
}

impl AudioTask {
    /// No audio step in this run: a whole-input task transcodes the audio on its worker
    /// (whole.rs). Finishes at once with nothing.
    pub(crate) fn skipped() -> AudioTask {
        AudioTask {
            task: tokio::spawn(async { Ok(None) }),
            waiting: None,
            children: 0,
        }
    }

    /// Stops the audio step now.
    pub(crate) fn abort(&self) {
        self.task.abort();
    }

    /// Tells a waiting audio step how many segments are still to finish: it begins once that
    /// leaves a child free of segment work. Called by the collect stage at its start and after
    /// every segment.
    pub(crate) fn segments_left(&mut self, left: usize) {
        if left < self.children {
            self.begin();
        }
    }

    /// Lets a waiting audio step begin (nothing if it has).
    fn begin(&mut self) {
        if let Some(go) = self.waiting.take() {
            let _ = go.send(());
        }
    }

    /// Waits for the audio step's result (letting it begin first, if it still waited).
    pub(crate) async fn finish(&mut self) -> Result<AudioOutcome, tokio::task::JoinError> {
        self.begin();
        (&mut self.task).await
    }
}

impl Drop for AudioTask {
    fn drop(&mut self) {
        self.task.abort();
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
        .filter(|a| !(req.stereo_downmix && a.channels > 2))
        .map(|a| a.index)
        .collect();
    (
        tracks,
        copied,
        package_rate.unwrap_or(AUDIO_BITRATE_PER_CHANNEL),
    )
}

/// The audio step of `req` as a whole-input task carries it to its worker; `None` without
/// audio tracks.
pub(crate) fn whole_audio(
    req: &JobRequest,
    info: &ProbeInfo,
    bias_seconds: f64,
) -> Option<tessera_model::wire::WholeAudio> {
    let (tracks, copy_tracks, bitrate_per_channel) = audio_tracks(req, info);
    (!tracks.is_empty()).then_some(tessera_model::wire::WholeAudio {
        tracks,
        bias_seconds,
        copy_tracks,
        bitrate_per_channel,
        stereo_downmix: req.stereo_downmix,
        run_shifts_seconds: info.run_shifts_seconds.clone(),
    })
}

/// Starts the audio step of `req` (nothing to do without audio tracks), planned in `segments`
/// segments; in the one-process farm, a job of one round of segments waits for a segment's
/// child (see the module doc).
pub(crate) fn spawn_audio(
    ctx: &DispatchContext,
    req: &JobRequest,
    (fingerprint, segments): (u64, usize),
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
        stereo_downmix: req.stereo_downmix,
        run_shifts_seconds: info.run_shifts_seconds.clone(),
    };
    let children = ctx
        .sandbox
        .shared_children()
        .filter(|&c| segments <= c)
        .unwrap_or(0);
    let (waiting, go) = if children > 0 {
        let (tx, rx) = oneshot::channel();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    let task = tokio::spawn(async move {
        if request.tracks.is_empty() {
            return Ok(None);
        }
        if let Some(go) = go {
            // A dropped sender is a dropped AudioTask, whose drop aborts this task.
            let _ = go.await;
        }
        tracing::info!(job = %job, tracks = request.tracks.len(), "audio step began");
        let (result, stats): (AudioResult, _) = ctx
            .sandbox
            .run(&MediaOp::Audio(request.clone()), ctx.limits, &mut |_| {})
            .await?;
        let key = keys::audio(&job, fingerprint);
        patiently("store audio", || ctx.store.put_file(&key, &request.output)).await?;
        let _ = tokio::fs::remove_file(&request.output).await;
        Ok(Some((result, stats)))
    });
    AudioTask {
        task,
        waiting,
        children,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::probe::{AudioInfo, ColorInfo, Rational, VideoInfo};

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
                    discontinuous: false,
                })
                .collect(),
            size_bytes: 0,
            ignored: Vec::new(),
            chapters: Vec::new(),
            title: None,
            subtitles: Vec::new(),
            warnings: Vec::new(),
            run_shifts_seconds: Vec::new(),
        }
    }

    /// An audio task whose step only waits for its go and then reports no audio.
    fn waiting_task(children: usize) -> AudioTask {
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = rx.await;
            Ok(None)
        });
        AudioTask {
            task,
            waiting: Some(tx),
            children,
        }
    }

    /// Whether the task's step ran to its end within a moment.
    async fn ran(audio: &AudioTask) -> bool {
        for _ in 0..50 {
            if audio.task.is_finished() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        false
    }

    #[tokio::test]
    async fn a_waiting_audio_step_begins_once_a_segment_frees_a_child() {
        let mut audio = waiting_task(2);
        // Two segments on two children: none free.
        audio.segments_left(2);
        assert!(!ran(&audio).await, "began while every child had a segment");
        audio.segments_left(1);
        assert!(ran(&audio).await, "did not begin on the freed child");
        assert!(matches!(audio.finish().await, Ok(Ok(None))));
    }

    #[tokio::test]
    async fn finishing_begins_an_audio_step_that_still_waits() {
        // Nothing said a child is free: the stitch step's wait begins it, never waits forever.
        let mut audio = waiting_task(2);
        assert!(!ran(&audio).await);
        let done = tokio::time::timeout(std::time::Duration::from_secs(5), audio.finish()).await;
        assert!(
            matches!(done, Ok(Ok(Ok(None)))),
            "finish waited for a go nobody gave"
        );
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
