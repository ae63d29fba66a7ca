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
