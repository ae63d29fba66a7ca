//! A/V sync at every second: the matrix sources carry a white flash on the first frame of
//! every second ([`flash_filter`]) and a 1 kHz beep at every whole second ([`beep_source`]);
//! [`markers`] finds them in a file with the ffmpeg CLI and [`check_sync`] requires every
//! output flash/beep pair to keep its source pair's offset within one frame.
//!
//! Why: [`crate::playback::compare_media`] checks sync only at the start (first frames' A/V
//! offset) and in total (audio duration); audio that drifts, or is laid end to end across a
//! join while the video is not, passes both and is still out of sync in the middle.
//! Sources without markers (a continuous `sine` tone, no flash) give no pairs, so the check
//! is a no-op for them.

use std::path::Path;

use crate::probe::Frame;
use crate::run::run_ffmpeg_tool;
use crate::summary::{Jump, Summary};

/// A frame whose mean luma (0-255, full-range gray) is above this is a flash.
const FLASH_LUMA: f64 = 200.0;
/// A sample whose magnitude is above this is loud (the beep's amplitude is 0.5).
const LOUD: f32 = 0.1;
/// A beep starts after at least this long below [`LOUD`] (s), or at the start of the track.
const QUIET_S: f64 = 0.3;
/// A beep lasts 50 ms; a loud stretch longer than this is not one (a continuous tone) (s).
const MAX_BEEP_S: f64 = 0.2;
/// A beep belongs to the nearest flash at most this far from it (s).
const PAIR_S: f64 = 0.4;
/// Width and height of the gray frames the video is decoded to (for their mean luma only).
const GRAY: (usize, usize) = (32, 18);

/// A lavfi filter to append (after a comma) to a `testsrc2=...` source of frame rate `rate`
/// (`25`, `30000/1001`): the first frame at or after every whole second is all white.
/// Why no spaces and no quotes beyond lavfi's own: recipe steps are split on whitespace and
/// passed to ffmpeg without a shell. The window is one frame long, a microsecond early, so
/// a frame exactly on the second is never lost to rounding and the frame after never caught.
pub fn flash_filter(rate: &str) -> String {
    format!("drawbox=c=white:t=fill:enable='lt(mod(t+0.000001\\,1)\\,1/({rate}))'")
}

/// An ffmpeg input (`-f lavfi -i aevalsrc=...`): `secs` seconds at `rate` Hz in `layout`
/// (`mono`, `stereo`, `5.1`, ...), silent but for a 50 ms 1 kHz beep of amplitude 0.5 at
/// every whole second on every channel (aevalsrc applies its one expression to them all).
/// Why: the audio half of [`flash_filter`]'s marker pair.
pub fn beep_source(layout: &str, rate: u32, secs: u32) -> String {
    format!(
        "-f lavfi -i aevalsrc=exprs='0.5*sin(2*PI*1000*t)*lt(mod(t\\,1)\\,0.05)'\
         :c={layout}:s={rate}:d={secs}"
    )
}

/// The markers found in one file, in its own (laid-out) time line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Markers {
    /// Times of the flashes (s): frames much brighter than the frame before.
    pub flashes: Vec<f64>,
    /// Times of the beep onsets (s), per audio track in container order.
    pub beeps: Vec<Vec<f64>>,
}

/// Measures the markers of a file summarized by [`Summary::of`]: flashes from the first video
/// stream, beeps from every audio track. Panics when ffmpeg decodes a different number of
/// video frames than ffprobe listed (the flashes could not be timed).
pub fn markers(s: &Summary) -> Markers {
    Markers {
        flashes: flashes_of(s),
        beeps: (0..s.audio.len()).map(|i| beeps_of(s, i)).collect(),
    }
}

/// `(flash time, beep time - flash time)` for each flash with a beep of `track` within
/// [`PAIR_S`] (the nearest one).
pub fn pairs(m: &Markers, track: usize) -> Vec<(f64, f64)> {
    let Some(beeps) = m.beeps.get(track) else {
        return Vec::new();
    };
    m.flashes
        .iter()
        .filter_map(|&f| {
            beeps
                .iter()
                .map(|&b| b - f)
                .filter(|d| d.abs() <= PAIR_S)
                .min_by(|a, b| a.abs().total_cmp(&b.abs()))
                .map(|d| (f, d))
        })
        .collect()
}

/// The sync invariant: for every audio track both files have, each source flash/beep pair
/// (times from each file's [`Summary::presentation_start`]) has an output pair within `tol`
/// of its time whose offset is the source's within `tol`, and the output has no fewer
/// pairs. Adds one line per violated track to `p`; nothing when the source has no pairs.
pub fn check_sync(s: &Summary, o: &Summary, tol: f64, p: &mut Vec<String>) {
    let tracks = s.audio.len().min(o.audio.len());
    // Beeps first: most sources have none, and then nothing else needs decoding.
    let beeps: Vec<Vec<f64>> = (0..tracks).map(|i| beeps_of(s, i)).collect();
    if beeps.iter().all(Vec::is_empty) {
        return;
    }
    let flashes = flashes_of(s);
    let sm = from_start(Markers { flashes, beeps }, s.presentation_start());
    if (0..tracks).all(|i| pairs(&sm, i).is_empty()) {
        return;
    }
    let om = from_start(markers(o), o.presentation_start());
    for i in 0..tracks {
        let (sp, op) = (pairs(&sm, i), pairs(&om, i));
        if op.len() < sp.len() {
            p.push(format!(
                "audio {i}: output has {} flash/beep pairs, source {}",
                op.len(),
                sp.len()
            ));
        }
        if let Some(line) = judge(&sp, &op, tol) {
            p.push(format!("audio {i}: {line}"));
        }
    }
}

/// `m` with `start` taken from every time.
fn from_start(m: Markers, start: f64) -> Markers {
    let less = |v: Vec<f64>| v.into_iter().map(|t| t - start).collect();
    Markers {
        flashes: less(m.flashes),
        beeps: m.beeps.into_iter().map(less).collect(),
    }
}

/// What is wrong with the output pairs `op` against the source pairs `sp`, if anything:
/// how many source pairs have no output pair within `tol` or an offset off by more, the
/// first of them, and the largest offset difference.
fn judge(sp: &[(f64, f64)], op: &[(f64, f64)], tol: f64) -> Option<String> {
    let matched: Vec<(f64, f64, Option<f64>)> = sp
        .iter()
        .map(|&(t, d)| {
            let near = op
                .iter()
                .filter(|(ot, _)| (ot - t).abs() <= tol)
                .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()));
            (t, d, near.map(|&(_, od)| od))
        })
        .collect();
    let off = |&(_, d, od): &&(f64, f64, Option<f64>)| od.is_none_or(|od| (od - d).abs() > tol);
    let bad: Vec<&(f64, f64, Option<f64>)> = matched.iter().filter(off).collect();
    let (t, d, od) = **bad.first()?;
    let worst = matched
        .iter()
        .filter_map(|(_, d, od)| od.map(|od| (od - d).abs()))
        .fold(0.0, f64::max);
    let out = od.map_or("none within tol".into(), |od| format!("{od:+.4} s"));
    Some(format!(
        "A/V sync off at {} of {} flash/beep pairs (tol {tol:.4} s); first at {t:.3} s: \
         source offset {d:+.4} s, output {out}; largest difference {worst:.4} s",
        bad.len(),
        sp.len()
    ))
}

/// Times of the flashes in the first video stream of `s`.
fn flashes_of(s: &Summary) -> Vec<f64> {
    let luma = mean_luma(&s.path);
    assert_eq!(
        luma.len(),
        s.video.len(),
        "sync oracle: ffmpeg decoded {} video frames of {}, ffprobe listed {}: cannot time the \
         flashes",
        luma.len(),
        s.path.display(),
        s.video.len()
    );
    let ts: Vec<f64> = s.video.iter().map(|f| f.ts).collect();
    flash_times(&luma, &ts)
}

/// Beep onsets of audio track `i` of `s`, in the video's time line (see [`synced_frames`]).
fn beeps_of(s: &Summary, i: usize) -> Vec<f64> {
    let rate = s.audio[i].info.sample_rate.unwrap_or(48_000) as f64;
    let x = mono_samples(&s.path, i);
    let frames = synced_frames(s, i);
    sample_times(&frames, rate, &onsets(&x, rate))
}

/// Mean luma of every decoded frame of the first video stream, in decoder output order.
fn mean_luma(path: &Path) -> Vec<f64> {
    let scale = format!("scale={}:{},format=gray", GRAY.0, GRAY.1);
    let args = ["-map", "0:v:0", "-vf", &scale, "-fps_mode", "passthrough"];
    let bytes = decode(path, &args, "rawvideo");
    let n = GRAY.0 * GRAY.1;
    bytes
        .chunks_exact(n)
        .map(|c| c.iter().map(|&b| f64::from(b)).sum::<f64>() / n as f64)
        .collect()
}

/// Audio track `i` decoded and mixed to mono 32-bit float at its own rate.
fn mono_samples(path: &Path, i: usize) -> Vec<f32> {
    let map = format!("0:a:{i}");
    let bytes = decode(path, &["-map", &map, "-ac", "1"], "f32le");
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `path` decoded by ffmpeg (no rotation) with `args` into raw `format`, read back as bytes
/// (through a file: [`run_ffmpeg_tool`] keeps stdout as text).
fn decode(path: &Path, args: &[&str], format: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("sync oracle temp dir");
    let out = dir.path().join(format!("decoded.{format}"));
    let (input, output) = (path.to_string_lossy(), out.to_string_lossy());
    let quiet = "-hide_banner -nostdin -v error -noautorotate -i".split(' ');
    let tail = ["-f", format, "-y", &output];
    let all = quiet
        .chain([&*input])
        .chain(args.iter().copied())
        .chain(tail);
    run_ffmpeg_tool("ffmpeg", all);
    std::fs::read(&out).unwrap_or_else(|e| panic!("cannot read {}: {e}", out.display()))
}

/// Times (`ts`, same index) of the frames brighter than [`FLASH_LUMA`] whose previous frame
/// is not (the first frame counts when bright).
fn flash_times(luma: &[f64], ts: &[f64]) -> Vec<f64> {
    (0..luma.len().min(ts.len()))
        .filter(|&i| luma[i] > FLASH_LUMA && (i == 0 || luma[i - 1] <= FLASH_LUMA))
        .map(|i| ts[i])
        .collect()
}

/// Indices of the beep onsets in `x` (sampled at `rate`): the first loud sample after at
/// least [`QUIET_S`] of quiet (or at the start), of a loud stretch that ends (falls quiet
/// for [`QUIET_S`] or reaches the end) within [`MAX_BEEP_S`].
fn onsets(x: &[f32], rate: f64) -> Vec<usize> {
    let quiet_n = (QUIET_S * rate).round() as usize;
    let max_n = (MAX_BEEP_S * rate).round() as usize;
    // Loud stretches: first and last loud sample, less than `quiet_n` quiet between.
    let mut bursts: Vec<(usize, usize)> = Vec::new();
    for (k, _) in x.iter().enumerate().filter(|(_, v)| v.abs() > LOUD) {
        match bursts.last_mut() {
            Some(b) if k - b.1 <= quiet_n => b.1 = k,
            _ => bursts.push((k, k)),
        }
    }
    bursts
        .into_iter()
        .filter(|(start, last)| last - start <= max_n)
        .map(|(start, _)| start)
        .collect()
}

/// The times of sample indices `ks` of a track whose decoded `frames` (with their sample
/// counts) are at `rate`: sample k is in the frame whose cumulative count covers it, at
/// that frame's `ts` plus its place in the frame; past the last frame, the last frame's
/// time continues at `rate`.
fn sample_times(frames: &[Frame], rate: f64, ks: &[usize]) -> Vec<f64> {
    let mut starts = Vec::with_capacity(frames.len());
    let mut total = 0u64;
    for f in frames {
        starts.push(total);
        total += f.samples;
    }
    ks.iter()
        .filter_map(|&k| {
            let k = k as u64;
            let j = starts.partition_point(|&s| s <= k).checked_sub(1)?;
            Some(frames[j].ts + (k - starts[j]) as f64 / rate)
        })
        .collect()
}

/// Audio track `i`'s frames with each joined recording moved by its video's shift, not its
/// own: [`crate::summary::lay_out`] lays each stream's recordings end to end on its own,
/// which would move a later recording's audio by a slightly different amount than its video,
/// while each recording keeps its own sync. When the video and audio jump a different number
/// of times the audio keeps its own layout.
fn synced_frames(s: &Summary, i: usize) -> Vec<Frame> {
    let a = &s.audio[i];
    let mut frames = a.frames.clone();
    if a.jumps.len() == s.video_jumps.len() {
        transfer_jumps(&mut frames, &a.jumps, &s.video_jumps);
    }
    frames
}

/// Replaces the shifts `own` applied to `frames` by `video`'s, jump for jump.
fn transfer_jumps(frames: &mut [Frame], own: &[Jump], video: &[Jump]) {
    for (a, v) in own.iter().zip(video) {
        for f in frames.iter_mut().skip(a.at) {
            f.ts += v.shift - a.shift;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::lay_out;

    fn frame(ts: f64, samples: u64) -> Frame {
        let duration = None;
        Frame {
            ts,
            duration,
            samples,
        }
    }

    fn near(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    /// `secs` of silence at `rate` with a 50 ms 0.5 sine at each of `at` (s).
    fn beeps(rate: f64, secs: f64, at: &[f64]) -> Vec<f32> {
        let mut x = vec![0.0f32; (secs * rate) as usize];
        for &t in at {
            let k0 = (t * rate) as usize;
            for k in k0..(k0 + (0.05 * rate) as usize).min(x.len()) {
                let t = (k - k0) as f64 / rate;
                x[k] = (0.5 * (2.0 * std::f64::consts::PI * 1000.0 * t + 0.3).sin()) as f32;
            }
        }
        x
    }

    #[test]
    fn onsets_find_each_beep_and_no_tone() {
        let r = 8000.0;
        assert_eq!(
            onsets(&beeps(r, 3.0, &[0.0, 1.0, 2.0]), r),
            [0, 8000, 16000]
        );
        // A beep in the last instant of the track still counts.
        assert_eq!(onsets(&beeps(r, 2.0, &[0.5, 1.98]), r), [4000, 15840]);
        // Loud again after only 0.2 s of quiet: the same stretch, too long for a beep.
        assert!(onsets(&beeps(r, 1.0, &[0.0, 0.25]), r).is_empty());
        let tone: Vec<f32> = (0..24_000)
            .map(|k| (0.125 * (k as f64 * 0.345).sin()) as f32)
            .collect();
        assert!(onsets(&tone, r).is_empty(), "a tone is no beep");
        assert!(onsets(&[0.05; 24_000], r).is_empty());
    }

    #[test]
    fn flashes_are_bright_frames_after_dark_ones() {
        let luma = [230.0, 120.0, 119.0, 255.0, 240.0, 100.0, 210.0];
        let ts = [0.0, 0.04, 0.08, 1.0, 1.04, 1.08, 2.0];
        assert_eq!(flash_times(&luma, &ts), [0.0, 1.0, 2.0]);
    }

    #[test]
    fn samples_map_through_frame_times() {
        // Two frames of 1000 samples at 1 kHz, the second after a 0.5 s gap.
        let frames = [frame(10.0, 1000), frame(11.5, 1000)];
        let t = sample_times(&frames, 1000.0, &[0, 500, 1000, 1999, 2500]);
        assert!(near(&t, &[10.0, 10.5, 11.5, 12.499, 13.0]), "{t:?}");
        assert!(sample_times(&[], 1000.0, &[0]).is_empty());
    }

    #[test]
    fn pairs_take_the_nearest_beep_within_reach() {
        let m = Markers {
            flashes: vec![0.0, 1.0, 2.0, 3.0],
            beeps: vec![vec![0.02, 0.98, 1.5, 2.9, 3.6], vec![]],
        };
        let p = pairs(&m, 0);
        let (times, offsets): (Vec<f64>, Vec<f64>) = p.iter().copied().unzip();
        assert!(near(&times, &[0.0, 1.0, 3.0]) && near(&offsets, &[0.02, -0.02, -0.1]));
        assert!(pairs(&m, 1).is_empty() && pairs(&m, 2).is_empty());
    }

    #[test]
    fn judge_counts_pairs_off_and_missing() {
        let src = [(0.0, 0.0), (1.0, 0.0), (2.0, 0.01)];
        let good = [(0.0, 0.02), (1.01, 0.0), (2.0, 0.0)];
        assert_eq!(judge(&src, &good, 0.041), None);
        let line = judge(&src, &[(0.0, 0.0), (1.0, 0.08)], 0.041).expect("off");
        assert!(line.starts_with("A/V sync off at 2 of 3"), "{line}");
        assert!(line.contains("first at 1.000 s"), "{line}");
        assert!(line.contains("largest difference 0.0800"), "{line}");
        assert!(judge(&[], &[(0.0, 0.5)], 0.041).is_none());
    }

    #[test]
    fn audio_follows_the_video_shift_of_its_recording() {
        // Two recordings from 10 s, joined: video of 1 s frames, audio of 0.75 s frames
        // whose first recording ends 0.25 s later than its video.
        let mut video: Vec<Frame> = [10.0, 11.0, 10.0, 11.0].map(|t| frame(t, 0)).into();
        let mut audio: Vec<Frame> = [10.0, 10.75, 11.5, 10.0].map(|t| frame(t, 750)).into();
        let (vj, aj) = (lay_out(&mut video), lay_out(&mut audio));
        assert!(
            near(&[vj[0].shift, aj[0].shift], &[2.0, 2.25]),
            "{vj:?} {aj:?}"
        );
        transfer_jumps(&mut audio, &aj, &vj);
        let ts: Vec<f64> = audio.iter().map(|f| f.ts).collect();
        assert!(near(&ts, &[10.0, 10.75, 11.5, 12.0]), "{ts:?}");
    }

    #[test]
    fn lavfi_strings_hold_no_whitespace() {
        assert!(!flash_filter("30000/1001").contains(char::is_whitespace));
        let b = beep_source("5.1", 44_100, 3);
        assert_eq!(b.split_whitespace().count(), 4, "{b}");
        assert!(b.ends_with(":c=5.1:s=44100:d=3"), "{b}");
    }
}
