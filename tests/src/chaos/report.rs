//! What a chaos run found, and its figures as lines for logs and docs.

use super::faults::Fault;

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    /// Jobs done with every output frame-exact.
    pub done: usize,
    /// Jobs failed with a reason code.
    pub failed_with_reason: usize,
    /// Their codes (`job N: code`).
    pub failures: Vec<String>,
    /// Failed jobs that no fault was meant to fail (counted in `failed_with_reason` too
    /// when they have a reason): a transient fault must not end a job.
    pub failed_unexpectedly: usize,
    /// Jobs not final at the end.
    pub hung: usize,
    /// Done jobs with an output missing.
    pub lost: usize,
    /// Outputs whose frame count differs from the source's or with a frame that differs
    /// from the same job's output without faults.
    pub corrupt: usize,
    /// Which, and how many frames differ in each.
    pub corrupt_keys: Vec<String>,
    /// Decoded frames, over all outputs, that differ from the run without faults.
    pub frames_differing: usize,
    /// Outputs the dispatcher delivered more than once (its log, across restarts).
    pub duplicated: usize,
    /// Failed jobs with an output at a destination.
    pub partial: usize,
    /// Messages left on the farm's queues.
    pub queued_left: u64,
    /// Objects left in the work area.
    pub work_left: usize,
    /// The first few of them, for the report.
    pub work_left_keys: Vec<String>,
    /// Each fault injected, with what it did.
    pub faults: Vec<String>,
    /// (fault, seconds from its end until the farm made progress again); faults that came
    /// after every job had ended are not listed.
    pub recoveries: Vec<(Fault, f64)>,
}

impl Report {
    /// The figures as lines for logs and docs.
    pub fn table(&self) -> String {
        let mut out = format!(
            "done {} | failed with reason {} (unexpectedly {}) | hung {} | lost {} | duplicated {} | \
             corrupt {} | frames differing {} | partial {} | queued left {} | work objects left {}\n",
            self.done,
            self.failed_with_reason,
            self.failed_unexpectedly,
            self.hung,
            self.lost,
            self.duplicated,
            self.corrupt,
            self.frames_differing,
            self.partial,
            self.queued_left,
            self.work_left
        );
        let lines = [
            ("fault", &self.faults),
            ("failed", &self.failures),
            ("corrupt", &self.corrupt_keys),
            ("left in the work area", &self.work_left_keys),
        ];
        for (label, items) in lines {
            for item in items {
                out.push_str(&format!("{label}: {item}\n"));
            }
        }
        for (fault, secs) in &self.recoveries {
            out.push_str(&format!("recovery after {fault:?}: {secs:.1} s\n"));
        }
        out
    }
}
