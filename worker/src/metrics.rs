//! The worker's Prometheus metrics (served by the worker service's HTTP endpoint,
//! service/http.rs).
//!
//! Why: an operator scales workers on queue length but watches them here: tasks done and
//! failed, encode time against overhead, and per card the NVENC sessions in use against the
//! budget, utilization and health.

use std::sync::atomic::{AtomicU64, Ordering};

use tessera_model::wire::TaskRef;

use crate::gpu::Gpus;

/// Counters of one worker process.
#[derive(Debug, Default)]
pub struct WorkerMetrics {
    segments_done: AtomicU64,
    stitches_done: AtomicU64,
    tasks_failed: AtomicU64,
    frames: AtomicU64,
    media_micros: AtomicU64,
    overhead_micros: AtomicU64,
    running: AtomicU64,
    nvdec_fallback_frames: AtomicU64,
    started: StartTime,
}

/// When the worker started, Unix seconds (`tessera_worker_start_time_seconds`). Why: a
/// restarted container keeps its pod's labels and its counters start again at zero, so a
/// restart loop shows only as this value changing (`changes()` in the alert rules).
#[derive(Debug)]
struct StartTime(f64);

impl Default for StartTime {
    fn default() -> Self {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        StartTime(now.map_or(0.0, |d| d.as_secs_f64()))
    }
}

fn micros(seconds: f64) -> u64 {
    (seconds.max(0.0) * 1e6) as u64
}

impl WorkerMetrics {
    /// A task started.
    pub fn started(&self) {
        self.running.fetch_add(1, Ordering::Relaxed);
    }

    /// A task ended (whatever its outcome).
    pub fn ended(&self) {
        self.running.fetch_sub(1, Ordering::Relaxed);
    }

    /// A task finished and was reported.
    pub fn done(&self, task: TaskRef, frames: u64, media_s: f64, overhead_s: f64) {
        match task {
            // A whole input is counted with the segments: its frames were encoded here.
            TaskRef::Segment(_) | TaskRef::Whole => {
                self.segments_done.fetch_add(1, Ordering::Relaxed);
                self.frames.fetch_add(frames, Ordering::Relaxed);
                self.media_micros
                    .fetch_add(micros(media_s), Ordering::Relaxed);
                self.overhead_micros
                    .fetch_add(micros(overhead_s), Ordering::Relaxed);
            }
            TaskRef::Stitch(_) => {
                self.stitches_done.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// `frames` of a segment planned on NVDEC were decoded in software (failure 2 of the GPU
    /// re-review: a fallback nothing else shows).
    pub fn nvdec_fell_back(&self, frames: u64) {
        self.nvdec_fallback_frames
            .fetch_add(frames, Ordering::Relaxed);
    }

    /// A task attempt failed.
    pub fn failed(&self) {
        self.tasks_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// The exposition text.
    pub fn render(&self, gpus: Option<&Gpus>) -> String {
        let mut out = String::new();
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let secs = |a: &AtomicU64| get(a) as f64 / 1e6;
        let lines: [(&str, &str, &str, String); 9] = [
            (
                "tessera_worker_segments_done_total",
                "counter",
                "Segments encoded and reported.",
                get(&self.segments_done).to_string(),
            ),
            (
                "tessera_worker_stitches_done_total",
                "counter",
                "Outputs stitched and reported.",
                get(&self.stitches_done).to_string(),
            ),
            (
                "tessera_worker_task_failures_total",
                "counter",
                "Task attempts that failed (retried or final).",
                get(&self.tasks_failed).to_string(),
            ),
            (
                "tessera_worker_frames_encoded_total",
                "counter",
                "Frames encoded in reported segments.",
                get(&self.frames).to_string(),
            ),
            (
                "tessera_worker_encode_seconds_total",
                "counter",
                "Seconds spent decoding and encoding segments.",
                secs(&self.media_micros).to_string(),
            ),
            (
                "tessera_worker_overhead_seconds_total",
                "counter",
                "Seconds segments spent outside decode and encode.",
                secs(&self.overhead_micros).to_string(),
            ),
            (
                "tessera_worker_nvdec_fallback_frames_total",
                "counter",
                "Frames of segments planned on NVDEC that were decoded in software.",
                get(&self.nvdec_fallback_frames).to_string(),
            ),
            (
                "tessera_worker_tasks_running",
                "gauge",
                "Tasks running now.",
                get(&self.running).to_string(),
            ),
            (
                "tessera_worker_start_time_seconds",
                "gauge",
                "When this worker process started, Unix seconds.",
                self.started.0.to_string(),
            ),
        ];
        for (name, kind, help, value) in lines {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
            ));
        }
        out.push_str(&format!(
            "# HELP tessera_worker_gpus Cards this worker encodes on.\n# TYPE tessera_worker_gpus gauge\ntessera_worker_gpus {}\n",
            u8::from(gpus.is_some())
        ));
        if let Some(g) = gpus {
            g.render_metrics(&mut out);
        }
        tessera_farm::sandbox::ledger::render_metrics(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_as_prometheus_text() {
        let m = WorkerMetrics::default();
        m.started();
        m.done(TaskRef::Segment(0), 250, 2.5, 0.25);
        m.done(TaskRef::Stitch(0), 250, 0.1, 0.0);
        m.failed();
        let text = m.render(None);
        assert!(
            text.contains("tessera_worker_segments_done_total 1\n"),
            "{text}"
        );
        assert!(text.contains("tessera_worker_frames_encoded_total 250\n"));
        assert!(text.contains("tessera_worker_encode_seconds_total 2.5\n"));
        assert!(text.contains("tessera_worker_overhead_seconds_total 0.25\n"));
        assert!(text.contains("tessera_worker_task_failures_total 1\n"));
        assert!(text.contains("tessera_worker_tasks_running 1\n"));
        assert!(text.contains("tessera_worker_gpus 0\n"));
        assert!(text.contains("# TYPE tessera_media_cpu_seconds_total counter\n"));
        assert!(text.contains("# TYPE tessera_worker_stitches_done_total counter\n"));
        let start: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("tessera_worker_start_time_seconds "))
            .expect("start time exported")
            .parse()
            .unwrap();
        // Set when the metrics were made, in this century.
        assert!((1.6e9..4.1e9).contains(&start), "{start}");
        assert!(text.contains("# TYPE tessera_worker_start_time_seconds gauge\n"));
    }
}
