//! Progress display: a bar on a terminal, plain or JSON lines otherwise.
//!
//! Why: a long transcode must show frames, speed and ETA; scripts and CI logs need lines they
//! can read, not terminal escape codes.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::args::ProgressMode;

#[derive(Default)]
struct State {
    total: u64,
    segments: u32,
    segments_done: u32,
    /// Frames encoded so far, per segment (live counts, then the final count).
    frames: HashMap<u32, u64>,
    stitching: bool,
}

/// Shared progress counters fed by workers and the dispatcher, rendered by a ticker.
#[derive(Clone)]
pub struct Progress {
    state: Arc<Mutex<State>>,
    started: Instant,
    mode: ProgressMode,
    bar: Option<ProgressBar>,
}

/// One progress sample.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Sample {
    /// Frames encoded.
    pub frames: u64,
    /// Frames in the job.
    pub total: u64,
    /// Segments done.
    pub segments_done: u32,
    /// Segments in the job.
    pub segments: u32,
    /// Frames per second since the start.
    pub fps: f64,
    /// Estimated seconds left.
    pub eta_s: f64,
}

impl Progress {
    /// A display in `mode` (`Auto` picks a bar on a terminal).
    pub fn new(mode: ProgressMode) -> Self {
        let mode = match mode {
            ProgressMode::Auto if std::io::stderr().is_terminal() => ProgressMode::Bar,
            ProgressMode::Auto => ProgressMode::Plain,
            m => m,
        };
        let bar = (mode == ProgressMode::Bar).then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} frames {msg} ETA {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar
        });
        Progress {
            state: Arc::new(Mutex::new(State::default())),
            started: Instant::now(),
            mode,
            bar,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The job's size is known.
    pub fn planned(&self, total: u64, segments: u32) {
        self.with(|s| {
            s.total = total;
            s.segments = segments;
        });
        if let Some(bar) = &self.bar {
            bar.set_length(total);
        }
    }

    /// A worker reports frames encoded so far in a segment.
    pub fn segment_frames(&self, segment: u32, frames: u64) {
        self.with(|s| {
            let e = s.frames.entry(segment).or_default();
            *e = (*e).max(frames);
        });
    }

    /// A segment is done with its final frame count.
    pub fn segment_done(&self, segment: u32, frames: u64) {
        self.with(|s| {
            s.frames.insert(segment, frames);
            s.segments_done += 1;
        });
    }

    /// Every segment is in; the output is being stitched.
    pub fn stitching(&self) {
        self.with(|s| s.stitching = true);
    }

    /// The current figures.
    pub fn sample(&self) -> Sample {
        let elapsed = self.started.elapsed().as_secs_f64().max(1e-3);
        self.with(|s| {
            let frames: u64 = s.frames.values().sum();
            let fps = frames as f64 / elapsed;
            let left = s.total.saturating_sub(frames) as f64;
            Sample {
                frames,
                total: s.total,
                segments_done: s.segments_done,
                segments: s.segments,
                fps,
                eta_s: if fps > 0.0 { left / fps } else { 0.0 },
            }
        })
    }

    /// Renders one update in the chosen mode.
    pub fn render(&self) {
        let s = self.sample();
        let stitching = self.with(|st| st.stitching);
        match self.mode {
            ProgressMode::Bar => {
                if let Some(bar) = &self.bar {
                    bar.set_position(s.frames);
                    let what = if stitching { "stitching" } else { "encoding" };
                    bar.set_message(format!(
                        "{:.1} fps, {}/{} segments, {what}",
                        s.fps, s.segments_done, s.segments
                    ));
                }
            }
            ProgressMode::Plain => eprintln!(
                "progress: {}/{} frames, {}/{} segments, {:.1} fps, ETA {:.0} s{}",
                s.frames,
                s.total,
                s.segments_done,
                s.segments,
                s.fps,
                s.eta_s,
                if stitching { ", stitching" } else { "" }
            ),
            ProgressMode::Json => {
                let line =
                    serde_json::json!({"event": "progress", "stitching": stitching, "sample": s});
                eprintln!("{line}");
            }
            ProgressMode::None | ProgressMode::Auto => {}
        }
    }

    /// Renders every `period` until `stop` is cancelled.
    pub async fn tick(self, stop: tokio_util::sync::CancellationToken) {
        let period = match self.mode {
            ProgressMode::Bar => Duration::from_millis(200),
            _ => Duration::from_secs(1),
        };
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(period) => self.render(),
            }
        }
    }

    /// Final update and cleanup of the bar.
    pub fn finish(&self) {
        self.render();
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_the_max_live_value_and_final_counts() {
        let p = Progress::new(ProgressMode::None);
        p.planned(100, 2);
        p.segment_frames(0, 10);
        p.segment_frames(0, 5); // late, smaller report is ignored
        p.segment_frames(1, 20);
        assert_eq!(p.sample().frames, 30);
        p.segment_done(0, 50);
        let s = p.sample();
        assert_eq!((s.frames, s.segments_done, s.total), (70, 1, 100));
    }
}
