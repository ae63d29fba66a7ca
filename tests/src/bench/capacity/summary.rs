//! What a capacity run prints: the machine, the API's latency under the steady rate, the
//! time series, the rates the dispatcher sustained, its memory, CPU and database, and when
//! each part began to give out.

use super::drive::Outcome;
use super::report::{
    hottest_threads, latency_line, machine_busy, peak_rate, quantile, rate, series_row, Sample,
    SERIES_HEADER,
};
use super::CapacitySettings;
use crate::farm::Farm;

/// The run's headline figures (for the test's checks and the capacity table).
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// Jobs the API accepted.
    pub accepted: u64,
    /// Jobs that ended done, and failed, at the end.
    pub done: u64,
    /// See `done`.
    pub failed: u64,
    /// Submissions answered a second (all statuses), over the submission span.
    pub submit_rate: f64,
    /// API latency p50 and p99 (s), from each request's scheduled time.
    pub p50: f64,
    /// See `p50`.
    pub p99: f64,
    /// Jobs ended a second, first sample to the last job's end.
    pub jobs_per_s: f64,
    /// Events the dispatcher took from the queue a second, over the same span.
    pub events_per_s: f64,
    /// Largest dispatcher RSS seen (bytes).
    pub rss_max: u64,
    /// Database bytes at the end.
    pub db_bytes: u64,
}

/// Prints the run's summary and returns its figures.
pub fn print(settings: &CapacitySettings, outcome: &Outcome, farm: &Farm) -> Figures {
    let samples = &outcome.samples;
    let (first, last) = (
        samples.first().cloned().unwrap_or_default(),
        samples.last().cloned().unwrap_or_default(),
    );
    println!("\n==> machine: {}", machine());
    print_api(settings, outcome);
    print_series(samples);
    // The busy span: from the start to the sample where the last job had ended.
    let end = samples
        .iter()
        .find(|s| s.ended() >= outcome.accepted && outcome.accepted > 0)
        .cloned()
        .unwrap_or_else(|| last.clone());
    let jobs_per_s = rate(&first, &end, |s| s.ended() as f64);
    let events_per_s = rate(&first, &end, |s| s.events_taken() as f64);
    let rss_max = samples.iter().map(|s| s.rss).max().unwrap_or(0);
    println!(
        "jobs      accepted {}  done {}  failed {}  cancelled {}  in {:.1} s",
        outcome.accepted,
        last.state("done"),
        last.state("failed"),
        last.state("cancelled"),
        end.t - first.t
    );
    println!(
        "rates     jobs ended {:.2}/s (peak 30 s: {:.2}/s)  events taken {:.1}/s (peak 10 s: {:.1}/s)  segments {}  stitches {}  worker errors {}",
        jobs_per_s,
        peak_rate(samples, 30.0, |s| s.ended() as f64),
        events_per_s,
        peak_rate(samples, 10.0, |s| s.events_taken() as f64),
        outcome.workers.0,
        outcome.workers.1,
        outcome.workers.3,
    );
    println!(
        "memory    dispatcher RSS start {:.1} MiB  max {:.1} MiB  end {:.1} MiB;  database {:.2} MiB ({:.0} bytes a job)",
        first.rss as f64 / 1048576.0,
        rss_max as f64 / 1048576.0,
        last.rss as f64 / 1048576.0,
        last.db_bytes as f64 / 1048576.0,
        last.db_bytes as f64 / outcome.accepted.max(1) as f64
    );
    print_cpu(&first, &end);
    let per_job = |f: fn(&Sample) -> f64| (f(&end) - f(&first)) / (end.ended().max(1) as f64);
    println!(
        "cpu/job   dispatcher threads {:.1} ms  media children {:.1} ms  (CPU time per ended job)",
        per_job(Sample::process_cpu) * 1000.0,
        per_job(|s| s.children_cpu) * 1000.0
    );
    print_onsets(samples, outcome);
    if outcome.stalled {
        println!(
            "--- dispatcher log (tail)\n{}",
            crate::run::tail(&farm.log("dispatcher.log"), 3000)
        );
    }
    let api: Vec<f64> = outcome.submits.iter().map(|s| s.latency_s).collect();
    Figures {
        accepted: outcome.accepted,
        done: last.state("done"),
        failed: last.state("failed"),
        submit_rate: submit_rate(outcome),
        p50: quantile(&api, 0.5),
        p99: quantile(&api, 0.99),
        jobs_per_s,
        events_per_s,
        rss_max,
        db_bytes: last.db_bytes,
    }
}

/// The CPU model, cores and load average now.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!("{model}, {cores} cores, load average {}", load.join(" "))
}

/// Answers a second over the span from the first scheduled submission to the last answer.
fn submit_rate(outcome: &Outcome) -> f64 {
    let span = outcome
        .submits
        .iter()
        .map(|s| s.scheduled_s + s.latency_s)
        .fold(0.0, f64::max)
        - outcome
            .submits
            .iter()
            .map(|s| s.scheduled_s)
            .fold(f64::INFINITY, f64::min);
    outcome.submits.len() as f64 / span.max(1e-9)
}

fn print_api(settings: &CapacitySettings, outcome: &Outcome) {
    let mut statuses: Vec<(u16, usize)> = Vec::new();
    for s in &outcome.submits {
        match statuses.iter_mut().find(|(code, _)| *code == s.status) {
            Some((_, n)) => *n += 1,
            None => statuses.push((s.status, 1)),
        }
    }
    statuses.sort();
    println!(
        "api       {} submissions at {:.1}/s answered (target {}/s); statuses {:?}",
        outcome.submits.len(),
        submit_rate(outcome),
        settings.rate,
        statuses
    );
    let mut by_time = outcome.submits.clone();
    by_time.sort_by(|a, b| a.scheduled_s.total_cmp(&b.scheduled_s));
    let all: Vec<f64> = by_time.iter().map(|s| s.latency_s).collect();
    let service: Vec<f64> = by_time.iter().map(|s| s.service_s).collect();
    println!(
        "api       latency (from the scheduled time) {}",
        latency_line(&all)
    );
    println!(
        "api       service (from sending)           {}",
        latency_line(&service)
    );
    let third = by_time.len().div_ceil(3).max(1);
    for (i, part) in all.chunks(third).enumerate() {
        println!(
            "api       third {}                          {}",
            i + 1,
            latency_line(part)
        );
    }
    // The submission phase in ten slices: whether the answers kept up with the schedule.
    let span = by_time.last().map_or(0.0, |s| s.scheduled_s) + 1e-9;
    for slice in by_time.chunk_by(|a, b| {
        (a.scheduled_s * 10.0 / span) as u32 == (b.scheduled_s * 10.0 / span) as u32
    }) {
        let latency: Vec<f64> = slice.iter().map(|s| s.latency_s).collect();
        let service: Vec<f64> = slice.iter().map(|s| s.service_s).collect();
        println!(
            "api       from {:>5.1} s: {:>5} submitted  latency p50 {:>7.1} ms p99 {:>7.1} ms  service p50 {:>6.1} ms p99 {:>6.1} ms",
            slice[0].scheduled_s,
            slice.len(),
            quantile(&latency, 0.5) * 1000.0,
            quantile(&latency, 0.99) * 1000.0,
            quantile(&service, 0.5) * 1000.0,
            quantile(&service, 0.99) * 1000.0
        );
    }
}

fn print_series(samples: &[Sample]) {
    let step = samples.len().div_ceil(40).max(1);
    println!("series    (every {step} s; active = started, not ended; ev/s = events taken; cpu% = dispatcher, hot% = its busiest thread, kid% = its media children)");
    println!("{SERIES_HEADER}");
    let picked: Vec<&Sample> = samples.iter().step_by(step).chain(samples.last()).collect();
    for pair in picked.windows(2) {
        if pair[1].t > pair[0].t {
            println!("{}", series_row(pair[0], pair[1]));
        }
    }
}

fn print_cpu(first: &Sample, end: &Sample) {
    let hot: Vec<String> = hottest_threads(first, end, 4)
        .iter()
        .map(|(tid, name, share)| format!("{name}[{tid}] {:.0}%", share * 100.0))
        .collect();
    println!(
        "cpu       dispatcher {:.0}% of a core (threads: {})  media children {:.0}%  machine {:.0}% of all cores",
        rate(first, end, Sample::process_cpu) * 100.0,
        hot.join(", "),
        rate(first, end, |s| s.children_cpu) * 100.0,
        machine_busy(first, end) * 100.0
    );
}

/// When each part first gave out: the first second each sign was seen.
fn print_onsets(samples: &[Sample], outcome: &Outcome) {
    let mut onsets: Vec<(f64, String)> = Vec::new();
    let mut note = |t: Option<f64>, what: String| {
        if let Some(t) = t {
            onsets.push((t, what));
        }
    };
    let first_at = |f: &dyn Fn(&Sample, &Sample) -> bool| {
        samples.windows(2).find(|w| f(&w[0], &w[1])).map(|w| w[1].t)
    };
    note(
        first_at(&|_, b| b.state("queued") > 100),
        "jobs wait for admission: more than 100 queued (jobs end slower than they come)".into(),
    );
    note(
        first_at(&|_, b| b.ready.0 > 500),
        "the events queue backs up: more than 500 events ready".into(),
    );
    note(
        first_at(&|_, b| b.ready.1 > 2000),
        "the encode queue backs up: the fake workers are behind (a limit of the generator)".into(),
    );
    note(
        first_at(&|a, b| hottest_threads(a, b, 1).first().is_some_and(|h| h.2 > 0.9)),
        "a dispatcher thread is over 90% busy".into(),
    );
    note(
        first_at(&|a, b| machine_busy(a, b) > 0.95),
        "the machine's CPU is over 95% busy".into(),
    );
    note(
        first_at(&|_, b| b.metrics_s > 1.0),
        "/metrics takes over 1 s to answer".into(),
    );
    let mut by_time = outcome.submits.clone();
    by_time.sort_by(|a, b| a.scheduled_s.total_cmp(&b.scheduled_s));
    note(
        by_time
            .iter()
            .find(|s| s.latency_s - s.service_s > 0.1)
            .map(|s| s.scheduled_s),
        "the API falls behind the rate: a submission waited over 100 ms for a free connection"
            .into(),
    );
    note(
        by_time
            .chunks(100)
            .find(|c| quantile(&c.iter().map(|s| s.service_s).collect::<Vec<_>>(), 0.99) > 0.25)
            .map(|c| c[0].scheduled_s),
        "API p99 over 250 ms (100 submissions in a row, from sending)".into(),
    );
    onsets.sort_by(|a, b| a.0.total_cmp(&b.0));
    println!("gives out (first seen, in order):");
    if onsets.is_empty() {
        println!("  nothing: every sign stayed below its threshold");
    }
    for (t, what) in onsets {
        println!("  at {t:>6.0} s  {what}");
    }
}
