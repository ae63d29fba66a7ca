//! The batch benchmark's arithmetic: percentiles, one round's figures (makespan ratio, CPU per
//! output minute, latency, the dispatcher's share and time per segment) and their medians
//! against the targets of issue 31. Pure, so it is tested on known samples below.

use crate::bench::median;

/// Makespan target: the farm finishes the batch no later than `xargs -P 2 ffmpeg`.
pub const MAKESPAN_TARGET: f64 = 1.00;
/// CPU target: the farm's CPU-seconds per output minute over ffmpeg's.
pub const CPU_TARGET: f64 = 1.05;
/// Dispatcher CPU per segment target (ms).
pub const SEGMENT_TARGET_MS: f64 = 20.0;

/// The `p`th percentile (0-100) of `values`, interpolated linearly between the nearest ranks
/// (numpy's default); NaN for none.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        1 => v[0],
        n => {
            let rank = (p / 100.0).clamp(0.0, 1.0) * (n - 1) as f64;
            let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
            v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
        }
    }
}

/// One side of a round (the farm, or `xargs -P 2 ffmpeg`).
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// First submit (or start) to the last output delivered (s).
    pub makespan_s: f64,
    /// CPU-seconds spent on the batch.
    pub cpu_s: f64,
    /// Each job's submit (or start) to delivered (s).
    pub latencies_s: Vec<f64>,
}

impl Side {
    /// CPU-seconds per minute of output.
    pub fn cpu_per_min(&self, output_min: f64) -> f64 {
        self.cpu_s / output_min
    }

    /// `(p50, p95)` of the latencies (s).
    pub fn latency(&self) -> (f64, f64) {
        (
            percentile(&self.latencies_s, 50.0),
            percentile(&self.latencies_s, 95.0),
        )
    }
}

/// Where the farm's CPU went in a round (CPU-seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FarmCpu {
    /// The dispatcher process itself (API, planning, publishing, bookkeeping, S3 I/O).
    pub dispatcher: f64,
    /// The dispatcher's media children (probe, audio, and the split where workers do not cut).
    pub dispatcher_children: f64,
    /// The workers and their media children.
    pub workers: f64,
    /// Of `workers`, the worker processes themselves (task loop, S3 and broker I/O).
    pub worker_processes: f64,
    /// The farm's Garage.
    pub garage: f64,
    /// RabbitMQ (shared with whatever else uses the broker on this machine).
    pub rabbitmq: f64,
}

impl FarmCpu {
    /// The farm's whole CPU.
    pub fn total(&self) -> f64 {
        self.dispatcher + self.dispatcher_children + self.workers + self.garage + self.rabbitmq
    }

    /// What was spent between `before` and `self`.
    pub fn since(&self, before: &FarmCpu) -> FarmCpu {
        FarmCpu {
            dispatcher: self.dispatcher - before.dispatcher,
            dispatcher_children: self.dispatcher_children - before.dispatcher_children,
            workers: self.workers - before.workers,
            worker_processes: self.worker_processes - before.worker_processes,
            garage: self.garage - before.garage,
            rabbitmq: self.rabbitmq - before.rabbitmq,
        }
    }
}

/// One round: the farm and ffmpeg on the same batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// Whether the farm ran first this round.
    pub farm_first: bool,
    /// The farm's side (`cpu_s` is `cpu.total()`).
    pub farm: Side,
    /// The farm's CPU, by part.
    pub cpu: FarmCpu,
    /// ffmpeg's side.
    pub ffmpeg: Side,
    /// Minutes of output (the inputs' durations).
    pub output_min: f64,
    /// Segments the farm's jobs were cut into.
    pub segments: u64,
    /// The farm's media CPU by operation.
    pub ops: super::media_ops::MediaOps,
    /// CPU-seconds of one decode of each of ffmpeg's outputs (`ffmpeg -f null`, the loop
    /// filter skipped as the farm's QC gate does): what checking ffmpeg's outputs as the
    /// farm checks its own would add to ffmpeg's side.
    pub ffmpeg_check_cpu_s: f64,
}

impl Round {
    /// Farm makespan over ffmpeg's.
    pub fn makespan_ratio(&self) -> f64 {
        self.farm.makespan_s / self.ffmpeg.makespan_s
    }

    /// Farm CPU per output minute over ffmpeg's.
    pub fn cpu_ratio(&self) -> f64 {
        self.farm.cpu_per_min(self.output_min) / self.ffmpeg.cpu_per_min(self.output_min)
    }

    /// The farm's CPU over ffmpeg's plus a decode of each of its outputs: the ratio against a
    /// per-file pipeline that checks what it delivers as the farm's QC gate does.
    pub fn cpu_ratio_with_check(&self) -> f64 {
        self.farm.cpu_s / (self.ffmpeg.cpu_s + self.ffmpeg_check_cpu_s)
    }

    /// [`Round::cpu_ratio`] without RabbitMQ's CPU: the broker on this machine may serve
    /// other users too, whose traffic would otherwise count as the farm's.
    pub fn cpu_ratio_without_broker(&self) -> f64 {
        (self.cpu.total() - self.cpu.rabbitmq) / self.ffmpeg.cpu_s
    }

    /// `(the dispatcher process's share, with its media children)` of the farm's CPU.
    pub fn dispatcher_share(&self) -> (f64, f64) {
        let total = self.cpu.total();
        (
            self.cpu.dispatcher / total,
            (self.cpu.dispatcher + self.cpu.dispatcher_children) / total,
        )
    }

    /// `(the dispatcher process's, with its media children)` CPU per segment (ms).
    pub fn dispatcher_ms_per_segment(&self) -> (f64, f64) {
        let per = |s: f64| s * 1000.0 / self.segments.max(1) as f64;
        (
            per(self.cpu.dispatcher),
            per(self.cpu.dispatcher + self.cpu.dispatcher_children),
        )
    }

    /// The round's lines: makespans, CPU, latency, the dispatcher.
    pub fn lines(&self, n: usize) -> Vec<String> {
        let order = if self.farm_first {
            "farm first"
        } else {
            "ffmpeg first"
        };
        let (fp50, fp95) = self.farm.latency();
        let (xp50, xp95) = self.ffmpeg.latency();
        let (share, share_all) = self.dispatcher_share();
        let (ms, ms_all) = self.dispatcher_ms_per_segment();
        let c = &self.cpu;
        vec![
            format!(
                "round {n} ({order}): makespan farm {:.1} s  ffmpeg {:.1} s  ratio {:.3}",
                self.farm.makespan_s,
                self.ffmpeg.makespan_s,
                self.makespan_ratio()
            ),
            format!(
                "round {n}: CPU-s per output minute farm {:.1}  ffmpeg {:.1}  ratio {:.3} ({:.3} without RabbitMQ)  ({:.2} output min)",
                self.farm.cpu_per_min(self.output_min),
                self.ffmpeg.cpu_per_min(self.output_min),
                self.cpu_ratio(),
                self.cpu_ratio_without_broker(),
                self.output_min
            ),
            format!(
                "round {n}: farm CPU-s dispatcher {:.1} + its media children {:.1}, workers {:.1} (the worker processes {:.1}), garage {:.1}, rabbitmq {:.1}; ffmpeg {:.1}",
                c.dispatcher, c.dispatcher_children, c.workers, c.worker_processes, c.garage, c.rabbitmq, self.ffmpeg.cpu_s
            ),
            format!(
                "round {n}: latency p50/p95 farm {fp50:.1}/{fp95:.1} s  ffmpeg {xp50:.1}/{xp95:.1} s"
            ),
            format!(
                "round {n}: dispatcher {:.1}% of farm CPU ({:.1}% with its media children); {:.1} ms per segment ({:.1} ms with them), {} segments",
                share * 100.0,
                share_all * 100.0,
                ms,
                ms_all,
                self.segments
            ),
            format!(
                "round {n}: ffmpeg's outputs decoded once {:.1} CPU-s; CPU ratio against ffmpeg with that check {:.3}",
                self.ffmpeg_check_cpu_s,
                self.cpu_ratio_with_check()
            ),
        ]
        .into_iter()
        .chain(self.ops.lines(n, self.output_min))
        .collect()
    }
}

/// The medians of a benchmark's rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Median makespan ratio.
    pub makespan_ratio: f64,
    /// Median farm CPU-s per output minute.
    pub farm_cpu_per_min: f64,
    /// Median ffmpeg CPU-s per output minute.
    pub ffmpeg_cpu_per_min: f64,
    /// Median CPU ratio.
    pub cpu_ratio: f64,
    /// Median CPU ratio without RabbitMQ.
    pub cpu_ratio_without_broker: f64,
    /// Median CPU ratio against ffmpeg with a decode of each output.
    pub cpu_ratio_with_check: f64,
    /// Median farm latency p50 and p95 (s).
    pub farm_latency: (f64, f64),
    /// Median ffmpeg latency p50 and p95 (s).
    pub ffmpeg_latency: (f64, f64),
    /// Median dispatcher share (process, with its children).
    pub dispatcher_share: (f64, f64),
    /// Median dispatcher ms per segment (process, with its children).
    pub dispatcher_ms: (f64, f64),
}

impl Summary {
    /// Summarises `rounds`.
    pub fn of(rounds: &[Round]) -> Summary {
        let m = |f: &dyn Fn(&Round) -> f64| median(rounds.iter().map(f));
        Summary {
            makespan_ratio: m(&Round::makespan_ratio),
            farm_cpu_per_min: m(&|r| r.farm.cpu_per_min(r.output_min)),
            ffmpeg_cpu_per_min: m(&|r| r.ffmpeg.cpu_per_min(r.output_min)),
            cpu_ratio: m(&Round::cpu_ratio),
            cpu_ratio_without_broker: m(&Round::cpu_ratio_without_broker),
            cpu_ratio_with_check: m(&Round::cpu_ratio_with_check),
            farm_latency: (m(&|r| r.farm.latency().0), m(&|r| r.farm.latency().1)),
            ffmpeg_latency: (m(&|r| r.ffmpeg.latency().0), m(&|r| r.ffmpeg.latency().1)),
            dispatcher_share: (
                m(&|r| r.dispatcher_share().0),
                m(&|r| r.dispatcher_share().1),
            ),
            dispatcher_ms: (
                m(&|r| r.dispatcher_ms_per_segment().0),
                m(&|r| r.dispatcher_ms_per_segment().1),
            ),
        }
    }

    /// The median lines, each target PASS or MISS.
    pub fn lines(&self, rounds: usize) -> Vec<String> {
        let mark = |ok: bool| if ok { "PASS" } else { "MISS" };
        let (ms, ms_all) = self.dispatcher_ms;
        vec![
            format!(
                "median makespan ratio (farm / xargs -P 2 ffmpeg, {rounds} rounds)  {:.3}   target <= {MAKESPAN_TARGET:.2}  {}",
                self.makespan_ratio,
                mark(self.makespan_ratio <= MAKESPAN_TARGET)
            ),
            format!(
                "median CPU-s per output minute  farm {:.1}  ffmpeg {:.1}  ratio {:.3}   target <= {CPU_TARGET:.2}  {}",
                self.farm_cpu_per_min,
                self.ffmpeg_cpu_per_min,
                self.cpu_ratio,
                mark(self.cpu_ratio <= CPU_TARGET)
            ),
            format!(
                "median CPU ratio without RabbitMQ (a broker other users may share)  {:.3}",
                self.cpu_ratio_without_broker
            ),
            format!(
                "median latency p50/p95  farm {:.1}/{:.1} s  ffmpeg {:.1}/{:.1} s",
                self.farm_latency.0, self.farm_latency.1, self.ffmpeg_latency.0, self.ffmpeg_latency.1
            ),
            format!(
                "median dispatcher share of farm CPU  {:.1}%  ({:.1}% with its media children)",
                self.dispatcher_share.0 * 100.0,
                self.dispatcher_share.1 * 100.0
            ),
            format!(
                "median dispatcher CPU per segment  {ms:.1} ms   target < {SEGMENT_TARGET_MS:.0} ms  {}",
                mark(ms < SEGMENT_TARGET_MS)
            ),
            format!(
                "median dispatcher CPU per segment with its media children (probe, audio; split where workers do not cut)  {ms_all:.1} ms   target < {SEGMENT_TARGET_MS:.0} ms  {}",
                mark(ms_all < SEGMENT_TARGET_MS)
            ),
            format!(
                "median CPU ratio against ffmpeg plus a decode of each of its outputs (the check the farm's QC gate makes)  {:.3}",
                self.cpu_ratio_with_check
            ),
        ]
    }
}

#[cfg(test)]
mod tests;
