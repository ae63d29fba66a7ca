//! One audio track's transcode to AAC: its decoder, the resampler to the encoder's layout
//! and rate, the samples laid into full encoder frames, and the encoder's packets written to
//! the intermediate.
//!
//! Why apart from audio.rs: audio.rs picks the tracks and routes their packets (copy or
//! transcode); this is the decode-resample-encode chain of one transcoded track.

use std::path::Path;

use ff::Rescale as _;
use ffmpeg_next as ff;

use super::layout::{layouts_to_try, open_aac};
use super::timeline::{Repair, Timeline, HOLD_SECONDS};
use crate::demux::{open_audio_decoder, skip_samples};
use crate::{ffi, nut, MediaError};
use tessera_model::audio::AudioRequest;

/// Sample rates the AAC encoder accepts; anything else is resampled to 48 kHz.
const AAC_RATES: [u32; 12] = [
    96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000,
];

/// A transcoded track's decoder, resampler and AAC encoder, and the samples between them.
pub(crate) struct Transcoder {
    decoder: ff::decoder::Audio,
    resampler: Option<ff::software::resampling::Context>,
    pub(crate) encoder: ff::encoder::Audio,
    layout: ff::ChannelLayout,
    pub(crate) rate: u32,
    frame_size: usize,
    /// The input stream's time base.
    in_tb: ff::Rational,
    /// Added to every output pts, in samples (the request's `bias_seconds`); set once the
    /// output's header is written.
    pub(crate) bias: i64,
    /// Planar f32 samples waiting to fill an encoder frame.
    fifo: Vec<Vec<f32>>,
    /// Pts (in samples, biased) of the first sample in `fifo`.
    next_pts: Option<i64>,
    /// Where the container presents the track's first sample (input time base): the first
    /// packet not discarded, plus the samples its side data says to skip.
    first_presented: Option<i64>,
    /// Where each decoded frame goes: at its timestamp, overlaps trimmed, gaps filled.
    timeline: Timeline,
}

/// Where a transcoded track's packets go: the output, its path for errors, the track's
/// stream in it, and the count of packets written.
pub(crate) struct Sink<'a> {
    /// The intermediate, header written.
    pub(crate) octx: &'a mut ff::format::context::Output,
    /// Its path, for errors.
    pub(crate) path: &'a Path,
    /// The track's stream index in it.
    pub(crate) stream: usize,
    /// Packets written so far.
    pub(crate) packets: &'a mut u64,
}

impl Transcoder {
    /// Opens the decoder of `stream` and an AAC encoder for it, as `req` asks.
    pub(crate) fn open(
        stream: &ff::format::stream::Stream,
        input: &Path,
        req: &AudioRequest,
    ) -> Result<Transcoder, MediaError> {
        let decoder = open_audio_decoder(stream, input)?;
        let rate = if AAC_RATES.contains(&decoder.rate()) {
            decoder.rate()
        } else {
            48000
        };
        let wanted = layouts_to_try(decoder.channel_layout(), decoder.channels(), req);
        let mut refused = Vec::new();
        let (encoder, layout) = wanted
            .iter()
            .find_map(
                |&layout| match open_aac(layout, rate, req.bitrate_per_channel) {
                    Ok(encoder) => Some((encoder, layout)),
                    Err(e) => {
                        refused.push(e);
                        None
                    }
                },
            )
            .ok_or_else(|| {
                refused
                    .pop()
                    .unwrap_or_else(|| MediaError::encode("aac", "no layout"))
            })?;
        if layout.channels() != i32::from(decoder.channels().max(1)) && !req.stereo_downmix {
            tracing::warn!(
                input = %input.display(), channels = decoder.channels(), coded = layout.channels(),
                "the AAC encoder takes no layout of this track's channel count; mixed down"
            );
        }
        let frame_size = (encoder.frame_size() as usize).max(1);
        Ok(Transcoder {
            decoder,
            resampler: None,
            encoder,
            layout,
            rate,
            frame_size,
            fifo: vec![Vec::new(); layout.channels().max(1) as usize],
            next_pts: None,
            in_tb: stream.time_base(),
            bias: 0,
            first_presented: None,
            timeline: Timeline::new(rate, &req.run_shifts_seconds),
        })
    }

    /// Decodes one packet and encodes what it completes (a corrupt packet costs a few ms
    /// of sound, not the job).
    pub(crate) fn feed(&mut self, packet: &ff::Packet, out: &mut Sink) -> Result<(), MediaError> {
        // A packet the decoder refuses (the partial frame where a recording was cut) presents
        // nothing: the track starts at the first one it takes.
        if self.decoder.send_packet(packet).is_err() {
            return Ok(());
        }
        if self.first_presented.is_none() && !ffi::packet_is_discard(packet) {
            // Skip samples count at the decoder's rate (unknown: nothing to skip).
            let skip = match self.decoder.rate() {
                0 => 0,
                r => skip_samples(packet).rescale(ff::Rational::new(1, r as i32), self.in_tb),
            };
            self.first_presented = packet.pts().map(|p| p + skip);
        }
        pump(self, out, false)
    }

    /// Drains the decoder, the resampler and the encoder (end of input).
    pub(crate) fn finish(&mut self, out: &mut Sink) -> Result<(), MediaError> {
        let _ = self.decoder.send_eof();
        pump(self, out, true)?;
        self.log_repairs(out.path);
        Ok(())
    }

    /// Logs what the timeline repaired (the probe names the same repairs in the job's
    /// warnings, see `probe::audio_repairs`).
    fn log_repairs(&self, path: &Path) {
        let rate = f64::from(self.rate);
        let at = |samples: i64| (samples - self.bias) as f64 / rate;
        for repair in self.timeline.repairs.iter().take(20) {
            match *repair {
                Repair::Gap { at: a, samples } => tracing::info!(
                    output = %path.display(), at_s = at(a), ms = samples as f64 * 1e3 / rate,
                    "audio gap filled with silence"
                ),
                Repair::Overlap { at: a, samples } => tracing::info!(
                    output = %path.display(), at_s = at(a), ms = samples as f64 * 1e3 / rate,
                    "audio overlap trimmed"
                ),
            }
        }
    }
}

/// Moves decoded frames through the resampler into full encoder frames, and encoded packets to
/// the muxer. With `flush`, drains everything (end of input).
fn pump(t: &mut Transcoder, out: &mut Sink, flush: bool) -> Result<(), MediaError> {
    let mut decoded = ff::frame::Audio::empty();
    while t.decoder.receive_frame(&mut decoded).is_ok() {
        if t.next_pts.is_none() {
            // The first sound is where the decoder stamps its first frame (where the
            // container presents the track only when the frame has no time). A decoder with
            // a delay (WMA: the first packets only prime it) stamps its first frame a packet
            // or two after the container's start, and that is where its sound is: the sync
            // oracle's beeps line up with their flashes from there, and were 92 ms early
            // laid from the container's start (an ASF of the input matrix).
            let ts = decoded.timestamp().or(t.first_presented).unwrap_or(0);
            let samples = ts.rescale(t.in_tb, ff::Rational::new(1, t.rate as i32));
            t.next_pts = Some(samples + t.bias);
        }
        // A decoder may leave the layout unset (PCM in AVI/MXF, mono guessed): name the
        // default one on the frame itself, since the resampler compares every frame with
        // what it was built for and refuses a difference ("Input changed").
        if decoded.channel_layout().is_empty() {
            decoded.set_channel_layout(ff::ChannelLayout::default(i32::from(decoded.channels())));
        }
        let same_input = t.resampler.as_ref().is_some_and(|r| {
            let input = r.input();
            input.format == decoded.format()
                && input.channel_layout == decoded.channel_layout()
                && input.rate == decoded.rate()
        });
        if !same_input {
            // First frame, or the stream changed format mid-way: keep what the old resampler
            // still holds, then build one for what comes now.
            if let Some(old) = t.resampler.as_mut() {
                let mut rest = ff::frame::Audio::empty();
                if old.flush(&mut rest).is_ok() && rest.samples() > 0 {
                    push_samples(&mut t.fifo, &rest, 0);
                }
            }
            let r = ff::software::resampling::Context::get(
                decoded.format(),
                decoded.channel_layout(),
                decoded.rate(),
                ff::format::Sample::F32(ff::format::sample::Type::Planar),
                t.layout,
                t.rate,
            )
            .map_err(|e| MediaError::encode("swresample", e))?;
            t.resampler = Some(r);
        }
        let Some(resampler) = t.resampler.as_mut() else {
            continue;
        };
        let mut resampled = ff::frame::Audio::empty();
        resampler
            .run(&decoded, &mut resampled)
            .map_err(|e| MediaError::encode("swresample", e))?;
        let ts = decoded
            .timestamp()
            .map(|ts| ts.rescale(t.in_tb, ff::Rational::new(1, t.rate as i32)));
        let held = t.fifo[0].len();
        let written = t.next_pts.unwrap_or(0) + held as i64;
        let place = t
            .timeline
            .place(ts, resampled.samples() as i64, written, held as i64);
        for buf in t.fifo.iter_mut() {
            buf.truncate(held - place.cut as usize);
        }
        // A gap is filled a second at a time, encoded as it goes: a hostile file's hour-long
        // gap costs time, never an hour of samples in memory at once.
        let mut silence = place.silence.max(0) as usize;
        while silence > 0 {
            let n = silence.min(t.rate as usize);
            for buf in t.fifo.iter_mut() {
                buf.resize(buf.len() + n, 0.0);
            }
            silence -= n;
            emit_frames(t, out, false)?;
        }
        push_samples(&mut t.fifo, &resampled, place.skip as usize);
        emit_frames(t, out, false)?;
    }
    if flush {
        if let Some(r) = &mut t.resampler {
            let mut rest = ff::frame::Audio::empty();
            if r.flush(&mut rest).is_ok() && rest.samples() > 0 {
                push_samples(&mut t.fifo, &rest, 0);
            }
        }
        emit_frames(t, out, true)?;
        t.encoder
            .send_eof()
            .map_err(|e| MediaError::encode("aac", e))?;
        write_packets(t, out)?;
    }
    Ok(())
}

/// Appends the samples of `frame` after the first `skip` of them.
fn push_samples(fifo: &mut [Vec<f32>], frame: &ff::frame::Audio, skip: usize) {
    let n = frame.samples();
    let skip = skip.min(n);
    for (ch, buf) in fifo.iter_mut().enumerate() {
        if ch < frame.planes() {
            buf.extend_from_slice(&frame.plane::<f32>(ch)[skip..n]);
        }
    }
}

/// Encodes full frames from the fifo, holding back [`HOLD_SECONDS`] of sound for an overlap to
/// cut (timeline.rs); with `last`, everything.
fn emit_frames(t: &mut Transcoder, out: &mut Sink, last: bool) -> Result<(), MediaError> {
    let hold = if last {
        0
    } else {
        (HOLD_SECONDS * f64::from(t.rate)) as usize
    };
    loop {
        let available = t.fifo[0].len();
        if available == 0 || (available < t.frame_size + hold && !last) {
            return Ok(());
        }
        let n = available.min(t.frame_size);
        let mut frame = ff::frame::Audio::new(
            ff::format::Sample::F32(ff::format::sample::Type::Planar),
            n,
            t.layout,
        );
        frame.set_rate(t.rate);
        for (ch, buf) in t.fifo.iter_mut().enumerate() {
            frame.plane_mut::<f32>(ch)[..n].copy_from_slice(&buf[..n]);
            buf.drain(..n);
        }
        let pts = t.next_pts.unwrap_or(0);
        frame.set_pts(Some(pts));
        t.next_pts = Some(pts + n as i64);
        t.encoder
            .send_frame(&frame)
            .map_err(|e| MediaError::encode("aac", e))?;
        write_packets(t, out)?;
    }
}

fn write_packets(t: &mut Transcoder, out: &mut Sink) -> Result<(), MediaError> {
    let mut packet = ff::Packet::empty();
    let enc_tb = t.encoder.time_base();
    let out_tb = out
        .octx
        .stream(out.stream)
        .map(|s| s.time_base())
        .unwrap_or(enc_tb);
    while t.encoder.receive_packet(&mut packet).is_ok() {
        packet.set_stream(out.stream);
        packet.rescale_ts(enc_tb, out_tb);
        nut::write(out.octx, &packet, out.path)?;
        *out.packets += 1;
    }
    Ok(())
}
