//! Where each audio track's first sound is: the time the decoder stamps its first frame.
//!
//! Why a decode: a container's first packet is not always the first sound. A decoder with a
//! delay (WMA: its first packets only prime it) stamps its first frame two frames after the
//! container's start, and that is where its sound is (the sync markers of the input matrix
//! line up from there); the partial frame where a recording was cut (AC-3 in a program
//! stream) is refused and presents nothing. The audio step lays the track from its first
//! decoded frame (audio/transcoder.rs), so the output's zero, which the probe sets, must count
//! from the same place. Only the first few packets of each track are decoded.

use std::path::Path;

use ffmpeg_next as ff;

use crate::demux::{open_audio_decoder, open_input, read_packet};
use crate::MediaError;
use tessera_model::probe::AudioInfo;

/// Packets read from the start before the tracks still silent are given up on.
const MAX_PACKETS: usize = 2_000;

/// The time (s) of each track's first decoded frame, `None` where none came within the first
/// [`MAX_PACKETS`] packets, the frame had no time, or the decoder would not open (the audio
/// step reports that one).
pub(crate) fn first_sounds(
    path: &Path,
    audio: &[AudioInfo],
) -> Result<Vec<Option<f64>>, MediaError> {
    let mut found = vec![None; audio.len()];
    if audio.is_empty() {
        return Ok(found);
    }
    let mut ictx = open_input(path)?;
    let mut decoders: Vec<Option<ff::decoder::Audio>> = audio
        .iter()
        .map(|a| {
            let stream = ictx.stream(a.index)?;
            open_audio_decoder(&stream, path).ok()
        })
        .collect();
    let mut frame = ff::frame::Audio::empty();
    for _ in 0..MAX_PACKETS {
        if decoders.iter().all(Option::is_none) {
            break;
        }
        let Some(packet) = read_packet(&mut ictx, path)? else {
            break;
        };
        let Some(pos) = audio.iter().position(|a| a.index == packet.stream()) else {
            continue;
        };
        let Some(decoder) = decoders[pos].as_mut() else {
            continue;
        };
        if decoder.send_packet(&packet).is_err() {
            continue;
        }
        if decoder.receive_frame(&mut frame).is_ok() {
            found[pos] = frame.timestamp().map(|ts| audio[pos].time_base.seconds(ts));
            decoders[pos] = None;
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1 s clip of `codec` audio in `file` (ffmpeg CLI), its audio track as the probe
    /// describes it.
    fn clip(dir: &Path, file: &str, codec: &str) -> (std::path::PathBuf, Vec<AudioInfo>) {
        let path = dir.join(file);
        let made = std::process::Command::new("ffmpeg")
            .args(["-v", "error", "-f", "lavfi", "-i", "sine=d=1:r=44100"])
            .args(["-c:a", codec])
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let ictx = open_input(&path).unwrap();
        let audio = super::super::streams::describe_audio(&ictx, &path);
        (path, audio)
    }

    #[test]
    fn a_decoder_delay_is_where_the_first_sound_is() {
        crate::init();
        let dir = tempfile::tempdir().unwrap();
        // WMA primes its decoder with its first packets: the first frame comes two frames
        // (2 x 2048 samples) after the container's start.
        let (wma, audio) = clip(dir.path(), "a.asf", "wmav2");
        let first = first_sounds(&wma, &audio).unwrap()[0].unwrap();
        let start = audio[0].start_seconds.unwrap_or(0.0);
        assert!(first - start > 0.05, "first sound {first}, start {start}");
        // PCM sounds from its first packet.
        let (pcm, audio) = clip(dir.path(), "a.wav", "pcm_s16le");
        assert_eq!(first_sounds(&pcm, &audio).unwrap(), vec![Some(0.0)]);
    }
}
