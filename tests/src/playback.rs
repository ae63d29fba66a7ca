//! Whether an output plays as its source: [`compare_media`], the invariants of an output
//! against its source that need no report: every source frame once, in order, with its
//! timestamp; A/V offset and audio duration kept, and sync at every flash/beep marker
//! ([`crate::sync`]); size, rotation and colour kept; quality good. What a file plays as (the
//! oracle's [`Summary`]) is [`crate::summary`], re-exported here.

use crate::probe::{psnr, StreamInfo};
pub use crate::summary::{lay_out, played_in_order, AudioTrack, Jump, Summary};

/// Audio tracks' durations may differ from the source's by this much (s).
pub const AUDIO_DURATION_TOLERANCE_S: f64 = 0.1;
/// Minimum acceptable PSNR of output against source (dB).
pub const MIN_PSNR_DB: f64 = 30.0;

fn known(v: &Option<String>) -> Option<&str> {
    v.as_deref()
        .filter(|s| !matches!(*s, "unknown" | "unspecified" | "reserved"))
}

/// The invariants of an output `o` against its source `s` that need no report: every frame
/// once with its time, the audio tracks (offset, duration, channels, language, sync at every
/// marker), size, aspect, rotation and colour, and PSNR. Adds what is violated to `p`;
/// returns the PSNR.
pub fn compare_media(s: &Summary, o: &Summary, p: &mut Vec<String>) -> f64 {
    let tol = s.min_frame_interval() + 1e-3;
    check_video(s, o, tol, p);
    check_audio(s, o, tol, p);
    crate::sync::check_sync(s, o, tol, p);
    check_metadata(&s.video_info, &o.video_info, p);
    let db = psnr(&o.path, &s.path);
    if db.is_nan() || db < MIN_PSNR_DB {
        p.push(format!("PSNR {db:.2} dB < {MIN_PSNR_DB} dB"));
    }
    db
}

fn check_video(s: &Summary, o: &Summary, tol: f64, p: &mut Vec<String>) {
    if o.video_info.codec_name != "h264" {
        p.push(format!(
            "output video codec {} != h264",
            o.video_info.codec_name
        ));
    }
    if o.frame_count != s.frame_count {
        p.push(format!(
            "decoded frames: output {} != source {}",
            o.frame_count, s.frame_count
        ));
    }
    for (sum, what) in [(s, "source"), (o, "output")] {
        if sum.video.len() as u64 != sum.frame_count {
            p.push(format!(
                "{what}: ffprobe frame list ({}) != nb_read_frames ({})",
                sum.video.len(),
                sum.frame_count
            ));
        }
    }
    let o_start = o.presentation_start();
    if o.start.abs() > tol || o_start.abs() > tol {
        p.push(format!(
            "output starts at {o_start:.4} s (container start_time {:.4} s), expected 0",
            o.start
        ));
    }
    let (st, ot) = (s.rel_times(), o.rel_times());
    let (Some(sf), Some(of)) = (st.first(), ot.first()) else {
        p.push("no decoded video frames".into());
        return;
    };
    if (sf - of).abs() > tol {
        p.push(format!(
            "first frame at {of:.4} s, source {sf:.4} s (from start; tol {tol:.4})"
        ));
    }
    let (sl, ol) = (st[st.len() - 1], ot[ot.len() - 1]);
    if (sl - ol).abs() > tol {
        p.push(format!(
            "last frame at {ol:.4} s, source {sl:.4} s (from start; tol {tol:.4})"
        ));
    }
    if st.len() == ot.len() {
        let bad: Vec<usize> = (0..st.len())
            .filter(|i| (st[*i] - ot[*i]).abs() > tol)
            .collect();
        if let Some(&i) = bad.first() {
            p.push(format!(
                "{} of {} frame timestamps off by > {tol:.4} s; first at frame {i}: output {:.4} s, source {:.4} s",
                bad.len(), st.len(), ot[i], st[i]
            ));
        }
    }
    if ot.windows(2).any(|w| w[1] <= w[0]) {
        p.push("output frame timestamps are not strictly increasing".into());
    }
}

fn check_audio(s: &Summary, o: &Summary, tol: f64, p: &mut Vec<String>) {
    if s.audio.len() != o.audio.len() {
        p.push(format!(
            "audio tracks: output {} != source {}",
            o.audio.len(),
            s.audio.len()
        ));
        return;
    }
    for (i, (sa, oa)) in s.audio.iter().zip(&o.audio).enumerate() {
        if oa.info.codec_name != "aac" {
            p.push(format!("audio {i}: codec {} != aac", oa.info.codec_name));
        }
        let lang = |l: &Option<String>| l.clone().filter(|l| l != "und");
        if lang(&sa.info.language) != lang(&oa.info.language) {
            p.push(format!(
                "audio {i}: language {:?} != source {:?}",
                oa.info.language, sa.info.language
            ));
        }
        if oa.frames.is_empty() {
            p.push(format!("audio {i}: no decoded frames"));
            continue;
        }
        let (so, oo) = (s.av_offset(i), o.av_offset(i));
        if (so - oo).abs() > tol || oo.is_nan() {
            p.push(format!(
                "audio {i}: A/V offset {oo:.4} s, source {so:.4} s (tol {tol:.4})"
            ));
        }
        if sa.info.channels != oa.info.channels {
            p.push(format!(
                "audio {i}: {:?} channels, source {:?}",
                oa.info.channels, sa.info.channels
            ));
        } else if let (Some(sl), Some(ol)) = (&sa.info.channel_layout, &oa.info.channel_layout) {
            if speakers(sl) != speakers(ol) {
                p.push(format!("audio {i}: channel layout {ol}, source {sl}"));
            }
        }
        let (sd, od) = (sa.duration(), oa.duration());
        if (sd - od).abs() > AUDIO_DURATION_TOLERANCE_S {
            p.push(format!("audio {i}: duration {od:.4} s, source {sd:.4} s"));
        }
    }
}

/// A channel layout's name without the side/back distinction of its surround pair: AAC's
/// channel configurations have one 5.1 (and one 7.1), so a 5.1(side) source is rightly coded
/// as AAC's 5.1, which is what FFmpeg's own AAC encoder does.
fn speakers(layout: &str) -> &str {
    layout
        .strip_suffix("(side)")
        .or_else(|| layout.strip_suffix("(back)"))
        .unwrap_or(layout)
}

/// Display aspects (width / height on screen) may differ by this share: the output's size is
/// rounded to even numbers, and a sample aspect is a ratio of small integers.
pub const DISPLAY_ASPECT_TOLERANCE: f64 = 0.01;

fn check_metadata(s: &StreamInfo, o: &StreamInfo, p: &mut Vec<String>) {
    if let (Some(sd), Some(od)) = (s.display_aspect(), o.display_aspect()) {
        if (od / sd - 1.0).abs() > DISPLAY_ASPECT_TOLERANCE {
            p.push(format!(
                "display aspect {od:.4} (sample aspect {:?}), source {sd:.4} (sample aspect {:?})",
                o.sample_aspect, s.sample_aspect
            ));
        }
    }
    let even = |v: Option<u64>| v.map(|v| v - v % 2);
    if o.width != even(s.width) || o.height != even(s.height) {
        p.push(format!(
            "output size {:?}x{:?}, expected {:?}x{:?} (source {:?}x{:?})",
            o.width,
            o.height,
            even(s.width),
            even(s.height),
            s.width,
            s.height
        ));
    }
    let rot = |r: Option<f64>| r.filter(|r| r.abs() > 0.5).map(|r| r.rem_euclid(360.0));
    if rot(s.rotation) != rot(o.rotation) {
        p.push(format!(
            "rotation {:?} != source {:?}",
            o.rotation, s.rotation
        ));
    }
    let colour = [
        ("color_primaries", &s.color_primaries, &o.color_primaries),
        ("color_transfer", &s.color_transfer, &o.color_transfer),
        ("color_space", &s.color_space, &o.color_space),
    ];
    for (name, sv, ov) in colour {
        if let Some(want) = known(sv) {
            if known(ov) != Some(want) {
                p.push(format!("{name} {ov:?} != source {want:?}"));
            }
        }
    }
    if s.color_range.as_deref() == Some("pc") && o.color_range.as_deref() != Some("pc") {
        p.push(format!(
            "color_range {:?} != source full range (pc)",
            o.color_range
        ));
    }
}
