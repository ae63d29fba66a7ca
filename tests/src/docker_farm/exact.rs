//! Frame-exactness of the compose farm's outputs, read back from its S3 store: an output has
//! exactly its source's video frames, each at its source frame's time (within a millisecond),
//! none twice, and its source's audio duration (within 50 ms). Plus the other end states the
//! fault test asserts: every job done, the workers that went away exited 0.

use std::path::Path;

use super::Compose;
use crate::probe::{ffprobe_json, num, packets};

/// A video timestamp may differ from its source frame's by this much (s).
pub const PTS_TOLERANCE_S: f64 = 0.001;
/// The audio may last this much more or less than the source's (s).
pub const AUDIO_TOLERANCE_S: f64 = 0.05;

/// Downloads `s3://tessera-media/{key}` into the project's directory as `{name}.mp4` and
/// checks it against the local `src`; panics saying what differs. Prints what it found.
pub fn check_output(farm: &Compose, key: &str, src: &Path, name: &str) {
    let out = farm.work.join(format!("{name}.mp4"));
    if let Err(e) = farm.download(key, &out) {
        panic!("{name} ({key}) cannot be read back: {e}");
    }
    let (src_pts, out_pts) = (video_pts(src), video_pts(&out));
    if let Err(e) = same_frames(&src_pts, &out_pts) {
        panic!("{name}: {e}");
    }
    let (a_src, a_out) = (audio_seconds(src), audio_seconds(&out));
    if let Err(e) = same_audio_duration(a_src, a_out) {
        panic!("{name}: {e}");
    }
    println!(
        "[docker-farm] {name}: {} frames at the source's timestamps, audio {a_out} s",
        out_pts.len()
    );
}

/// The presentation times of the first video stream's packets, in order of time.
pub fn video_pts(path: &Path) -> Vec<f64> {
    let mut pts: Vec<f64> = packets(path, "v:0").iter().map(|p| p.pts).collect();
    pts.sort_by(f64::total_cmp);
    pts
}

/// The first audio stream's duration (s), as its container says; NaN when it has none.
pub fn audio_seconds(path: &Path) -> f64 {
    let v = ffprobe_json(
        path,
        &["-select_streams", "a:0", "-show_entries", "stream=duration"],
    );
    num(&v["streams"][0]["duration"]).unwrap_or(f64::NAN)
}

/// Whether `out` (sorted) has exactly the frames of `src` (sorted): as many, each within
/// [`PTS_TOLERANCE_S`] of its source frame, no time twice. Err says the first difference.
pub fn same_frames(src: &[f64], out: &[f64]) -> Result<(), String> {
    if src.len() != out.len() {
        return Err(format!(
            "{} frames, the source has {}",
            out.len(),
            src.len()
        ));
    }
    for (i, (s, o)) in src.iter().zip(out).enumerate() {
        if (s - o).abs() > PTS_TOLERANCE_S || o.is_nan() {
            return Err(format!(
                "timestamps differ from the source: frame {} at {o} s, source {s} s",
                i + 1
            ));
        }
    }
    if let Some(w) = out.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("a timestamp appears twice ({} s)", w[0]));
    }
    Ok(())
}

/// Whether the output's audio lasts as long as the source's, within [`AUDIO_TOLERANCE_S`].
pub fn same_audio_duration(src: f64, out: f64) -> Result<(), String> {
    if (src - out).abs() < AUDIO_TOLERANCE_S {
        Ok(())
    } else {
        Err(format!("audio lasts {out} s, the source {src} s"))
    }
}

/// Whether `states` (sorted) are `n` jobs, each done.
pub fn all_done(states: &[String], n: usize) -> Result<(), String> {
    if states.len() == n && states.iter().all(|s| s == "done") {
        Ok(())
    } else {
        Err(format!(
            "the dispatcher's jobs are not {n} done jobs: {states:?}"
        ))
    }
}

/// Whether the exit codes of containers that went away are `n` times 0.
pub fn all_exited_zero(codes: &[String], n: usize) -> Result<(), String> {
    if codes.len() == n && codes.iter().all(|c| c == "0") {
        Ok(())
    } else {
        Err(format!("exit codes {codes:?}, not {n} times 0"))
    }
}

#[cfg(test)]
mod tests;
