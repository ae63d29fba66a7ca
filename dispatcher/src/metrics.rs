//! The dispatcher's Prometheus metrics, served unauthenticated at `/metrics` in the text
//! exposition format 0.0.4.
//!
//! Why hand-written: the dispatcher needs a handful of counters, gauges and histograms; a
//! small registry of atomics and mutex-guarded buckets renders them without a dependency.
//! Counters live in memory and restart at zero with the process (Prometheus' `rate()` and
//! `increase()` handle resets); jobs by state come from the database at every scrape.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::db::{Db, JobState};
use tessera_engine::dead_letters::{DROPPED, NAMED_JOB};
use tessera_engine::{GateCounts, JobReport};

mod idle;
pub use idle::{jobs_idle, unix_now};

/// Distinct label values a labelled counter keeps; later new values count under `other`.
/// Why: error codes come from workers over the wire, and a scrape must stay small.
const MAX_SERIES: usize = 64;

/// Upper bounds of the job wall-time buckets: seconds to hours.
const JOB_WALL_BUCKETS: &[f64] = &[
    5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0,
];

/// Upper bounds of the per-segment overhead buckets (staging, upload: normally sub-second).
const SEGMENT_OVERHEAD_BUCKETS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Upper bounds of the per-segment decode+encode buckets.
const SEGMENT_MEDIA_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// A monotonically increasing count.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The current count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down (an `f64` kept as its bits).
#[derive(Debug, Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    /// Sets the value.
    pub fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

/// Counters split by one label (outcome, error code, result).
#[derive(Debug)]
pub struct LabelledCounter {
    label: &'static str,
    values: Mutex<BTreeMap<String, u64>>,
}

impl LabelledCounter {
    /// A counter over `label` whose `seeded` values are shown (as 0) before they first occur,
    /// so dashboards and alerts see the series from the start.
    pub fn new(label: &'static str, seeded: &[&str]) -> Self {
        let values = seeded.iter().map(|v| (v.to_string(), 0)).collect();
        LabelledCounter {
            label,
            values: Mutex::new(values),
        }
    }

    /// Adds one to the series of `value` (`other` once [`MAX_SERIES`] values exist).
    pub fn inc(&self, value: &str) {
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        let key = if values.contains_key(value) || values.len() < MAX_SERIES {
            value
        } else {
            "other"
        };
        *values.entry(key.to_string()).or_default() += 1;
    }

    /// The count of `value`.
    pub fn get(&self, value: &str) -> u64 {
        let values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        values.get(value).copied().unwrap_or(0)
    }

    fn render(&self, out: &mut String, name: &str) {
        let values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        for (value, n) in values.iter() {
            let v = escape_label(value);
            let _ = writeln!(out, "{name}{{{}=\"{v}\"}} {n}", self.label);
        }
    }
}

/// A histogram with fixed bucket bounds; `+Inf` is implied.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    state: Mutex<HistogramState>,
}

#[derive(Debug, Default)]
struct HistogramState {
    /// Observations per bucket (not cumulative), one more than `bounds` for `+Inf`.
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    /// A histogram over ascending upper bounds `bounds`.
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            state: Mutex::new(HistogramState {
                buckets: vec![0; bounds.len() + 1],
                ..HistogramState::default()
            }),
        }
    }

    /// Records one value (NaN is ignored: it would poison the sum).
    pub fn observe(&self, v: f64) {
        if v.is_nan() {
            return;
        }
        let i = self.bounds.partition_point(|b| *b < v);
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.buckets[i] += 1;
        s.sum += v;
        s.count += 1;
    }

    fn render(&self, out: &mut String, name: &str) {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut cumulative = 0;
        for (i, n) in s.buckets.iter().enumerate() {
            cumulative += n;
            let le = self.bounds.get(i).map_or("+Inf".into(), |b| fmt_f64(*b));
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_sum {}", fmt_f64(s.sum));
        let _ = writeln!(out, "{name}_count {}", s.count);
    }
}

/// What the scrape reads from elsewhere at the moment it is served.
#[derive(Debug, Clone, Default)]
pub struct Live {
    /// Jobs per state from the database (`None`: the database did not answer).
    pub jobs_by_state: Option<Vec<(JobState, u64)>>,
    /// Seconds without a change of each unfinished state's oldest job (idle.rs).
    pub jobs_idle: Option<Vec<(JobState, u64)>>,
    /// Jobs this dispatcher is running.
    pub running: usize,
    /// The priority gate's window and occupancy.
    pub gate: Option<GateCounts>,
}

/// The dispatcher's metrics registry; one per process, shared by the runner and the API.
#[derive(Debug)]
pub struct Metrics {
    /// Jobs that ended in this process, by `outcome` (done, failed, cancelled).
    pub jobs_finished: LabelledCounter,
    /// Failed jobs by error `code`, to alert on a kind of failure.
    pub jobs_failed: LabelledCounter,
    /// Wall time of done jobs, submission of work to delivered outputs.
    pub job_wall_seconds: Histogram,
    /// Output frames per wall second of the last done job.
    pub last_job_encode_fps: Gauge,
    /// Bytes of all outputs delivered.
    pub output_bytes: Counter,
    /// Frames encoded by the farm (per segment, counted once whatever the outputs).
    pub frames_encoded: Counter,
    /// Segments reported done by workers.
    pub segments_done: Counter,
    /// Seconds each segment spent in a worker outside decode/encode (staging, upload).
    pub segment_overhead_seconds: Histogram,
    /// Seconds each segment spent decoding and encoding in a worker's child.
    pub segment_media_seconds: Histogram,
    /// Webhooks by final `result` (ok, failed) after their retries.
    pub webhook_deliveries: LabelledCounter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            jobs_finished: LabelledCounter::new("outcome", &["done", "failed", "cancelled"]),
            jobs_failed: LabelledCounter::new("code", &[]),
            job_wall_seconds: Histogram::new(JOB_WALL_BUCKETS),
            last_job_encode_fps: Gauge::default(),
            output_bytes: Counter::default(),
            frames_encoded: Counter::default(),
            segments_done: Counter::default(),
            segment_overhead_seconds: Histogram::new(SEGMENT_OVERHEAD_BUCKETS),
            segment_media_seconds: Histogram::new(SEGMENT_MEDIA_BUCKETS),
            webhook_deliveries: LabelledCounter::new("result", &["ok", "failed"]),
        }
    }
}

impl Metrics {
    /// A job ended done with `report`.
    pub fn job_done(&self, report: &JobReport) {
        self.jobs_finished.inc("done");
        self.job_wall_seconds.observe(report.wall_s);
        self.last_job_encode_fps.set(report.encode_fps);
        self.output_bytes.add(report.bytes);
    }

    /// A job failed with error `code`.
    pub fn job_failed(&self, code: &str) {
        self.jobs_finished.inc("failed");
        self.jobs_failed.inc(code);
    }

    /// A job was cancelled.
    pub fn job_cancelled(&self) {
        self.jobs_finished.inc("cancelled");
    }

    /// A worker reported a segment done.
    pub fn segment_done(&self, frames: u64, media_seconds: f64, overhead_seconds: f64) {
        self.segments_done.add(1);
        self.frames_encoded.add(frames);
        self.segment_media_seconds.observe(media_seconds);
        self.segment_overhead_seconds.observe(overhead_seconds);
    }

    /// A webhook was delivered (`ok`) or given up.
    pub fn webhook(&self, ok: bool) {
        self.webhook_deliveries
            .inc(if ok { "ok" } else { "failed" });
    }

    /// The whole exposition: this registry plus the `live` figures.
    pub fn render(&self, live: &Live) -> String {
        let mut out = String::with_capacity(4096);
        let o = &mut out;
        header(
            o,
            "tessera_build_info",
            "gauge",
            "Dispatcher version (always 1).",
        );
        let version = escape_label(env!("CARGO_PKG_VERSION"));
        let _ = writeln!(o, "tessera_build_info{{version=\"{version}\"}} 1");

        header(o, "tessera_jobs", "gauge", "Jobs in the database by state.");
        for (state, n) in live.jobs_by_state.iter().flatten() {
            let _ = writeln!(o, "tessera_jobs{{state=\"{}\"}} {n}", state.as_str());
        }
        let help = "Jobs running in this dispatcher.";
        gauge(o, "tessera_jobs_running", help, live.running as f64);
        if let Some(idle) = &live.jobs_idle {
            idle::render(o, idle);
        }

        let help = "Jobs ended in this process by outcome (done, failed, cancelled).";
        header(o, "tessera_jobs_finished_total", "counter", help);
        self.jobs_finished.render(o, "tessera_jobs_finished_total");
        let help = "Failed jobs by error code.";
        header(o, "tessera_jobs_failed_total", "counter", help);
        self.jobs_failed.render(o, "tessera_jobs_failed_total");
        let help = "Wall time of done jobs, from start to delivered outputs.";
        header(o, "tessera_job_wall_seconds", "histogram", help);
        self.job_wall_seconds.render(o, "tessera_job_wall_seconds");
        let help = "Output frames per wall second of the last done job.";
        let fps = self.last_job_encode_fps.get();
        gauge(o, "tessera_last_job_encode_fps", help, fps);
        let help = "Bytes of all outputs of done jobs.";
        counter(
            o,
            "tessera_output_bytes_total",
            help,
            self.output_bytes.get(),
        );

        let help = "Frames encoded by the farm (each segment's frames once, whatever the outputs).";
        counter(
            o,
            "tessera_frames_encoded_total",
            help,
            self.frames_encoded.get(),
        );
        let help = "Segments reported done by workers.";
        counter(
            o,
            "tessera_segments_done_total",
            help,
            self.segments_done.get(),
        );
        let help = "Seconds a segment spent in a worker outside decode and encode.";
        header(o, "tessera_segment_overhead_seconds", "histogram", help);
        self.segment_overhead_seconds
            .render(o, "tessera_segment_overhead_seconds");
        let help = "Seconds a segment spent decoding and encoding in a worker.";
        header(o, "tessera_segment_media_seconds", "histogram", help);
        self.segment_media_seconds
            .render(o, "tessera_segment_media_seconds");

        if let Some(g) = live.gate {
            let help = "Segments admitted to the encode queue and not yet done.";
            gauge(o, "tessera_gate_admitted_segments", help, g.admitted as f64);
            let help = "Segments waiting in the dispatcher for admission by priority.";
            gauge(o, "tessera_gate_waiting_segments", help, g.waiting as f64);
            let help = "Segments that may be queued or encoding at once (the window).";
            gauge(o, "tessera_gate_window_segments", help, g.window as f64);
        }

        let help = "Dead letters by what they named (job: its job was told; dropped: none).";
        header(o, "tessera_dead_letters_total", "counter", help);
        for (kind, n) in [("job", &NAMED_JOB), ("dropped", &DROPPED)] {
            let n = n.load(std::sync::atomic::Ordering::Relaxed);
            let _ = writeln!(o, "tessera_dead_letters_total{{kind=\"{kind}\"}} {n}");
        }
        let help = "Job webhooks by final result after retries (ok, failed).";
        header(o, "tessera_webhook_deliveries_total", "counter", help);
        self.webhook_deliveries
            .render(o, "tessera_webhook_deliveries_total");
        tessera_farm::sandbox::ledger::render_metrics(o);
        out
    }
}

/// Jobs per state, every state listed (0 when none), in one query.
pub fn jobs_by_state(db: &Db) -> Result<Vec<(JobState, u64)>, tessera_farm::FarmError> {
    let found: BTreeMap<String, u64> = db.with(|c| {
        let mut stmt = c.prepare("SELECT state, COUNT(*) FROM jobs GROUP BY state")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u64>(1)?)))?;
        rows.collect()
    })?;
    Ok(ALL_STATES
        .iter()
        .map(|s| (*s, found.get(s.as_str()).copied().unwrap_or(0)))
        .collect())
}

/// Every job state, in lifecycle order.
pub(crate) const ALL_STATES: [JobState; 8] = [
    JobState::Queued,
    JobState::Splitting,
    JobState::Encoding,
    JobState::Stitching,
    JobState::Delivering,
    JobState::Done,
    JobState::Failed,
    JobState::Cancelled,
];

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn gauge(out: &mut String, name: &str, help: &str, v: f64) {
    header(out, name, "gauge", help);
    let _ = writeln!(out, "{name} {}", fmt_f64(v));
}

fn counter(out: &mut String, name: &str, help: &str, v: u64) {
    header(out, name, "counter", help);
    let _ = writeln!(out, "{name} {v}");
}

/// A label value with `\`, `"` and newlines escaped as the text format requires.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A sample value as Prometheus writes it (`+Inf`, `-Inf`, `NaN`).
fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests;
