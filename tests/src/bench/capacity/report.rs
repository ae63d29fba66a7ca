//! The capacity run's figures: what each sample and each submission recorded, and the
//! summary printed from them (rates, percentiles, the time series and what gave out first).
//!
//! Why apart from the run: the arithmetic is tested on known samples, without a farm.

use std::collections::HashMap;

use super::sampler::ThreadCpu;

/// One submission through the API.
#[derive(Debug, Clone, PartialEq)]
pub struct Submit {
    /// Seconds from the start at which the steady rate scheduled it.
    pub scheduled_s: f64,
    /// Seconds from its scheduled time to its answer (waiting for a free connection
    /// included: an open-loop measure, so a slow server cannot hide its backlog).
    pub latency_s: f64,
    /// Seconds from sending it to its answer.
    pub service_s: f64,
    /// The HTTP status (0: no answer).
    pub status: u16,
}

/// What the sampler saw at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Seconds from the start.
    pub t: f64,
    /// Dispatcher resident set (bytes).
    pub rss: u64,
    /// CPU seconds of each dispatcher thread so far.
    pub threads: ThreadCpu,
    /// CPU seconds of the dispatcher's media children so far (reaped and live).
    pub children_cpu: f64,
    /// Jobs by state, from `/metrics` (empty when it did not answer).
    pub jobs: HashMap<String, u64>,
    /// Seconds `/metrics` took to answer.
    pub metrics_s: f64,
    /// Messages ready in the events, encode and stitch queues.
    pub ready: (u32, u32, u32),
    /// Database bytes on disk (with WAL).
    pub db_bytes: u64,
    /// The machine's busy and total CPU ticks so far.
    pub machine: (u64, u64),
    /// Events the fake workers published so far.
    pub events_sent: u64,
    /// Jobs submitted so far (answered or not).
    pub submitted: u64,
}

impl Sample {
    /// Jobs that have ended (done, failed or cancelled).
    pub fn ended(&self) -> u64 {
        ["done", "failed", "cancelled"]
            .iter()
            .filter_map(|s| self.jobs.get(*s))
            .sum()
    }

    /// Jobs in `state`.
    pub fn state(&self, state: &str) -> u64 {
        self.jobs.get(state).copied().unwrap_or(0)
    }

    /// CPU seconds of all dispatcher threads.
    pub fn process_cpu(&self) -> f64 {
        self.threads.values().sum()
    }

    /// Events the dispatcher has taken from the events queue (sent minus still ready).
    pub fn events_taken(&self) -> u64 {
        self.events_sent.saturating_sub(u64::from(self.ready.0))
    }
}

/// The `q` quantile (0..=1) of `values`, nearest rank; NaN for none.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = (q * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// `p50 A ms  p99 B ms  max C ms (N)` of latencies in seconds.
pub fn latency_line(values: &[f64]) -> String {
    let ms = |q: f64| quantile(values, q) * 1000.0;
    format!(
        "p50 {:.1} ms  p90 {:.1} ms  p99 {:.1} ms  max {:.1} ms ({})",
        ms(0.5),
        ms(0.9),
        ms(0.99),
        ms(1.0),
        values.len()
    )
}

/// Per second between two samples: how fast `f` grew.
pub fn rate(a: &Sample, b: &Sample, f: impl Fn(&Sample) -> f64) -> f64 {
    let dt = b.t - a.t;
    if dt <= 0.0 {
        return 0.0;
    }
    (f(b) - f(a)) / dt
}

/// The highest rate of `f` over any window of `window_s` seconds of `samples`.
pub fn peak_rate(samples: &[Sample], window_s: f64, f: impl Fn(&Sample) -> f64) -> f64 {
    let mut best: f64 = 0.0;
    let mut start = 0;
    for end in 0..samples.len() {
        while samples[end].t - samples[start].t > window_s && start < end {
            start += 1;
        }
        if samples[end].t - samples[start].t >= window_s * 0.8 {
            best = best.max(rate(&samples[start], &samples[end], &f));
        }
    }
    best
}

/// The busiest threads between two samples: `(tid, name, share of one core)`, busiest first.
pub fn hottest_threads(a: &Sample, b: &Sample, n: usize) -> Vec<(u32, String, f64)> {
    let dt = (b.t - a.t).max(1e-9);
    let mut out: Vec<(u32, String, f64)> = b
        .threads
        .iter()
        .map(|((tid, name), cpu)| {
            let before = a.threads.get(&(*tid, name.clone())).copied().unwrap_or(0.0);
            (*tid, name.clone(), (cpu - before) / dt)
        })
        .collect();
    out.sort_by(|x, y| y.2.total_cmp(&x.2));
    out.truncate(n);
    out
}

/// The machine's busy share between two samples (0..=1 of all its cores).
pub fn machine_busy(a: &Sample, b: &Sample) -> f64 {
    let busy = b.machine.0.saturating_sub(a.machine.0) as f64;
    let total = b.machine.1.saturating_sub(a.machine.1) as f64;
    if total > 0.0 {
        busy / total
    } else {
        0.0
    }
}

/// One row of the time series between two samples.
pub fn series_row(a: &Sample, b: &Sample) -> String {
    let hot = hottest_threads(a, b, 1)
        .first()
        .map_or(0.0, |(_, _, share)| *share);
    format!(
        "{:>6.0} {:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7.1} {:>6.0} {:>5.0} {:>5.0} {:>5.0} {:>8.1} {:>7.0}",
        b.t,
        b.submitted,
        b.state("done"),
        b.state("queued"),
        b.jobs.values().sum::<u64>() - b.ended() - b.state("queued"),
        b.ready.0,
        b.ready.1,
        b.ready.2,
        b.rss as f64 / (1 << 20) as f64,
        rate(a, b, |s| s.events_taken() as f64),
        rate(a, b, Sample::process_cpu) * 100.0,
        hot * 100.0,
        rate(a, b, |s| s.children_cpu) * 100.0,
        b.db_bytes as f64 / (1 << 20) as f64,
        b.metrics_s * 1000.0,
    )
}

/// The header of [`series_row`]'s columns.
pub const SERIES_HEADER: &str = "     t    subm    done queued active ev_rdy enc_rdy st_rdy  rss_MB  ev/s  cpu%  hot%  kid%   db_MB  met_ms";

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, done: u64, events: u64, cpu: f64) -> Sample {
        let mut s = Sample {
            t,
            events_sent: events,
            ..Sample::default()
        };
        s.jobs.insert("done".into(), done);
        s.jobs.insert("queued".into(), 5);
        s.threads.insert((1, "tokio-runtime-w".into()), cpu);
        s.threads.insert((2, "main".into()), cpu / 10.0);
        s
    }

    #[test]
    fn quantiles_take_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 1.0), 100.0);
        assert_eq!(quantile(&[3.0], 0.99), 3.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn rates_and_peaks_follow_the_samples() {
        let samples: Vec<Sample> = (0..=20)
            .map(|i| {
                let t = f64::from(i);
                // 10 jobs/s for the first 10 s, then 30 jobs/s.
                let done = if i <= 10 { i * 10 } else { 100 + (i - 10) * 30 };
                sample(t, done as u64, done as u64 * 4, t * 0.5)
            })
            .collect();
        let all = rate(&samples[0], &samples[20], |s| s.ended() as f64);
        assert!((all - 20.0).abs() < 1e-9, "{all}");
        let peak = peak_rate(&samples, 5.0, |s| s.ended() as f64);
        assert!((peak - 30.0).abs() < 1e-9, "{peak}");
        let hot = hottest_threads(&samples[0], &samples[10], 1);
        assert_eq!(hot[0].1, "tokio-runtime-w");
        assert!((hot[0].2 - 0.5).abs() < 1e-9);
        assert_eq!(samples[3].events_taken(), 120);
    }

    #[test]
    fn machine_busy_is_a_share() {
        let mut a = Sample::default();
        let mut b = Sample::default();
        a.machine = (100, 1000);
        b.machine = (250, 1200);
        assert!((machine_busy(&a, &b) - 0.75).abs() < 1e-9);
        assert_eq!(machine_busy(&b, &b), 0.0);
    }
}
