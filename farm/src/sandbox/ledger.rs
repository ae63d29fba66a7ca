//! What the media children have spent, by operation: CPU-seconds as each child measured them
//! (`getrusage` of itself, every thread), wall time and counts, since this process started.
//!
//! Why: a farm is judged by CPU-seconds per minute of output, and most of a worker's and a
//! dispatcher's CPU is spent in their media children, where `/proc` of the parent only shows
//! one sum once a child is reaped (and a warm child is never reaped between operations).
//! A serving child's start-up (exec, dynamic linking, FFmpeg's set-up) is kept as `start`.
//! Kept per operation name, the figures say which step (encode, audio, the stitch and its QC
//! gate, probe, split) a change made cheaper or dearer; both services export them on
//! `/metrics` (`tessera_media_cpu_seconds_total{op}`) and the batch benchmark prints them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use super::ChildStats;

/// One operation name's totals.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OpTotals {
    /// Operations finished (a media error counts: its CPU was spent too).
    pub operations: u64,
    /// CPU-seconds the children reported for them.
    pub cpu_seconds: f64,
    /// Wall seconds as the parent saw them.
    pub wall_seconds: f64,
}

static LEDGER: Mutex<BTreeMap<&'static str, OpTotals>> = Mutex::new(BTreeMap::new());

/// Adds one finished operation named `op` to this process's ledger.
pub(crate) fn record(op: &'static str, stats: &ChildStats) {
    add(op, stats.cpu_seconds, stats.wall_seconds);
    tracing::debug!(
        op,
        cpu_s = stats.cpu_seconds,
        wall_s = stats.wall_seconds,
        "media operation finished"
    );
}

/// Adds a serving child's start-up CPU (before its first request) under the name `start`:
/// what a fresh child costs, paid once per child rather than per operation.
pub(crate) fn record_start(cpu_seconds: f64) {
    add("start", cpu_seconds, 0.0);
}

fn add(op: &'static str, cpu_seconds: f64, wall_seconds: f64) {
    let mut ledger = LEDGER.lock().unwrap_or_else(|p| p.into_inner());
    let t = ledger.entry(op).or_default();
    t.operations += 1;
    t.cpu_seconds += cpu_seconds;
    t.wall_seconds += wall_seconds;
}

/// This process's totals by operation name, in name order.
pub fn totals() -> Vec<(&'static str, OpTotals)> {
    let ledger = LEDGER.lock().unwrap_or_else(|p| p.into_inner());
    ledger.iter().map(|(k, v)| (*k, *v)).collect()
}

/// The ledger as Prometheus text: `tessera_media_cpu_seconds_total`,
/// `tessera_media_wall_seconds_total` and `tessera_media_operations_total`, each by `op`.
pub fn render_metrics(out: &mut String) {
    render(out, &totals());
}

/// One exported family: its name, its help, and how an operation's totals give its value.
type Family = (&'static str, &'static str, fn(&OpTotals) -> String);

fn render(out: &mut String, totals: &[(&'static str, OpTotals)]) {
    let families: [Family; 3] = [
        (
            "tessera_media_cpu_seconds_total",
            "CPU-seconds spent by media children (all their threads), by operation.",
            |t| format!("{:.3}", t.cpu_seconds),
        ),
        (
            "tessera_media_wall_seconds_total",
            "Wall seconds of media operations as the parent saw them, by operation.",
            |t| format!("{:.3}", t.wall_seconds),
        ),
        (
            "tessera_media_operations_total",
            "Media operations finished (with a result or a media error), by operation.",
            |t| t.operations.to_string(),
        ),
    ];
    for (name, help, value) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (op, t) in totals {
            let label = op.replace(' ', "_");
            let _ = writeln!(out, "{name}{{op=\"{label}\"}} {}", value(t));
        }
    }
}

/// CPU-seconds (user and system, every thread) this process has spent so far.
pub(crate) fn own_cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage struct into the pointer it is given, which points to
    // zeroed memory of that type; RUSAGE_SELF is always a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return 0.0;
    }
    // SAFETY: getrusage returned 0, so it filled the struct (and it was zeroed before).
    let usage = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_name_each_operation_with_its_sums() {
        let t = |operations, cpu_seconds, wall_seconds| OpTotals {
            operations,
            cpu_seconds,
            wall_seconds,
        };
        let mut out = String::new();
        render(
            &mut out,
            &[
                ("encode", t(3, 12.5, 7.25)),
                ("segment package", t(1, 0.5, 1.0)),
            ],
        );
        assert!(out.contains("tessera_media_cpu_seconds_total{op=\"encode\"} 12.500\n"));
        assert!(out.contains("tessera_media_wall_seconds_total{op=\"encode\"} 7.250\n"));
        assert!(out.contains("tessera_media_operations_total{op=\"segment_package\"} 1\n"));
        assert_eq!(out.matches("# TYPE").count(), 3);
    }

    #[test]
    fn recorded_operations_add_up_and_own_cpu_grows_with_work() {
        let before = totals()
            .into_iter()
            .find(|(op, _)| *op == "ledger test")
            .map(|(_, t)| t)
            .unwrap_or_default();
        let stats = ChildStats {
            peak_rss_bytes: 0,
            wall_seconds: 2.0,
            cpu_seconds: 1.5,
        };
        record("ledger test", &stats);
        record("ledger test", &stats);
        let after = totals()
            .into_iter()
            .find(|(op, _)| *op == "ledger test")
            .map(|(_, t)| t)
            .expect("recorded");
        assert_eq!(after.operations - before.operations, 2);
        assert!((after.cpu_seconds - before.cpu_seconds - 3.0).abs() < 1e-9);
        let start = own_cpu_seconds();
        let mut x = 0u64;
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(200) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(
            own_cpu_seconds() - start > 0.05,
            "a 200 ms spin shows as CPU"
        );
    }
}
