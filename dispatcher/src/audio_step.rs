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

/// Starts the audio step of `req` (nothing to do without audio tracks).
pub(crate) fn spawn_audio(
    ctx: &DispatchContext,
    req: &JobRequest,
    fingerprint: u64,
    info: &ProbeInfo,
    bias_seconds: f64,
    staging: &Path,
) -> AudioTask {
    let mut tracks: Vec<usize> = info.audio.iter().map(|a| a.index).collect();
    if req.first_audio_only {
        tracks.truncate(1);
    }
    let ctx = ctx.clone();
    let job = req.id.clone();
    // A package that names an audio bit rate gets it (AAC sources are then re-encoded too).
    let package_rate = req
        .package
        .as_ref()
        .filter(|p| !p.spec.audio.is_empty())
        .map(|p| p.spec.audio_bitrate() / 2);
    let request = AudioRequest {
        input: req.input.clone(),
        tracks,
        bias_seconds,
        copy_tracks: info
            .audio
            .iter()
            .filter(|a| a.stream_copies() && package_rate.is_none())
            .map(|a| a.index)
            .collect(),
        bitrate_per_channel: package_rate.unwrap_or(AUDIO_BITRATE_PER_CHANNEL),
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
