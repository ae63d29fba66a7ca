//! The scaling signal: how many workers each pool needs to drain its backlog in a target
//! time (`tessera_desired_workers{pool}` and `GET /scaling`, which KEDA's `metrics-api`
//! scaler reads).
//!
//! Why not only the queue length: a queued message is a segment of any length, segments
//! waiting in the publish gate are not on the queue at all, and KEDA's AMQP mode does not see
//! the unacked ones being encoded. The dispatcher knows every segment it planned and which
//! ones are done, so the backlog here is in segment-seconds, gate and in-flight included,
//! and it is divided by what one worker actually encodes per second over the drain time the
//! operator wants. A segment's report measures one slot (one child encoding it); a worker
//! runs its slots at once, so one worker's throughput is that times its slots. The measure
//! is a mean that forgets: the last few minutes of video weigh most, so a slower preset or
//! slower nodes show within minutes, not after the history is outweighed.
//!
//! A job whose next task is not published yet still needs a worker: one whose segments are
//! all done waits for its stitches, which go to `tessera.stitch`, which only workers consume
//! (the CPU pool, present in every deployment; GPU workers take stitches too but are started
//! for GPU segments only); one that is still preparing (probing and splitting, or re-reading
//! its input and redoing its audio after a dispatcher restart) publishes its tasks within
//! minutes. From the start of its run until it delivers, such a job asks the CPU pool for
//! one worker, so a pool scaled to zero cannot leave it waiting forever, and the first
//! worker is up by the time its tasks are.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

/// A worker pool (the queue its segments go to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pool {
    /// CPU workers (`tessera.encode.cpu`).
    Cpu,
    /// GPU workers (`tessera.encode.gpu`).
    Gpu,
}

impl Pool {
    /// Both pools, in the order metrics list them.
    pub const ALL: [Pool; 2] = [Pool::Cpu, Pool::Gpu];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Pool::Cpu => "cpu",
            Pool::Gpu => "gpu",
        }
    }
}

/// Settings of the estimate.
#[derive(Debug, Clone, Copy)]
pub struct ScalingSettings {
    /// Seconds the backlog should take to drain.
    pub target_drain_seconds: f64,
    /// Media seconds one CPU worker encodes per second, until segments are measured.
    pub cpu_throughput: f64,
    /// Media seconds one GPU worker encodes per second, until segments are measured.
    pub gpu_throughput: f64,
    /// Segments a CPU worker encodes at once (its `TESSERA_SLOTS`): a measured segment is
    /// one slot's speed, a worker's is that times its slots.
    pub cpu_slots: u32,
    /// Segments a GPU worker encodes at once.
    pub gpu_slots: u32,
}

impl Default for ScalingSettings {
    fn default() -> Self {
        ScalingSettings {
            target_drain_seconds: 600.0,
            cpu_throughput: 0.5,
            gpu_throughput: 4.0,
            cpu_slots: DEFAULT_SLOTS[0].1,
            gpu_slots: DEFAULT_SLOTS[1].1,
        }
    }
}

/// One pool's figures, as `/scaling` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PoolFigures {
    /// Seconds of video in segments planned and not yet done (waiting in the gate, queued or
    /// being encoded).
    pub backlog_segment_seconds: f64,
    /// Those segments.
    pub backlog_segments: u64,
    /// Seconds since the job holding the pool's oldest segment not done planned its segments
    /// (0: none left): the age of the pool's queue, gate and in-flight included. On
    /// `/metrics` only (`tessera_backlog_oldest_seconds`): `/scaling` keeps its shape.
    #[serde(skip)]
    pub oldest_backlog_seconds: f64,
    /// Media seconds one worker encodes per second (measured, or the setting).
    pub worker_throughput: f64,
    /// Workers that drain the backlog in the target time (never more than its segments),
    /// and for the CPU pool at least one per job whose next task is still to be published
    /// (preparing, or waiting for its stitches).
    pub desired_workers: u64,
}

/// How many workers drain `backlog_seconds` (in `segments` segments) within `target_s`
/// when each encodes `throughput` media seconds per second: at least one while anything is
/// left, at most one per segment (a segment is not shared). Pure.
pub fn desired_workers(backlog_seconds: f64, segments: u64, throughput: f64, target_s: f64) -> u64 {
    if segments == 0 {
        return 0;
    }
    let per_worker = throughput.max(1e-6) * target_s.max(1.0);
    let need = (backlog_seconds.max(0.0) / per_worker).ceil() as u64;
    need.clamp(1, segments)
}

#[derive(Debug)]
struct JobBacklog {
    pool: Pool,
    /// Seconds of each segment not done yet.
    left: HashMap<u32, f64>,
    /// Seconds of every planned segment (to measure throughput when one is done).
    planned: HashMap<u32, f64>,
    /// Delivery started: every output is stitched, the rest is the dispatcher's own work.
    delivering: bool,
    /// When its segments were planned (or its run started, until then).
    since: Instant,
}

impl JobBacklog {
    /// No segment left (all done, or none planned yet) and not delivering: the job's next
    /// task (a stitch, or its segments) is still to be published, and a worker must be
    /// there to take it.
    fn awaits_worker(&self) -> bool {
        self.left.is_empty() && !self.delivering
    }
}

/// Exponentially weighted sums of a pool's done segments: each older segment's weight
/// halves with every [`HALF_LIFE_SECONDS`] of video done after it.
#[derive(Debug, Default, Clone, Copy)]
struct Measured {
    media_seconds: f64,
    encode_seconds: f64,
}

impl Measured {
    /// Adds a segment of `media` seconds encoded in `encode` seconds, older ones fading.
    fn add(&mut self, media: f64, encode: f64) {
        let keep = 0.5f64.powf(media / HALF_LIFE_SECONDS);
        self.media_seconds = self.media_seconds * keep + media;
        self.encode_seconds = self.encode_seconds * keep + encode;
    }
}

/// The backlog of every running job and the measured throughput of each pool.
#[derive(Debug)]
pub struct Scaling {
    settings: ScalingSettings,
    /// Segments one worker of each pool encodes at once.
    slots: HashMap<Pool, u32>,
    jobs: Mutex<HashMap<String, JobBacklog>>,
    measured: Mutex<HashMap<Pool, Measured>>,
    /// Seconds of video in every segment done since the start, per pool.
    encoded: Mutex<HashMap<Pool, f64>>,
}

/// One exposed series: name, help, and its value in a pool's figures.
type Series = (&'static str, &'static str, fn(&PoolFigures) -> f64);

/// Segments that count toward a pool's measurement before it replaces the setting.
const MIN_MEASURED_SECONDS: f64 = 10.0;

/// Seconds of video done after a segment that halve its weight in the measurement.
const HALF_LIFE_SECONDS: f64 = 300.0;

/// Segments one worker encodes at once until told otherwise: a CPU worker's default
/// `TESSERA_SLOTS` (1, as deploy/k8s sets it), and a T4's encode sessions for a GPU worker
/// (the GPU ScaledJob's segments per Job).
const DEFAULT_SLOTS: [(Pool, u32); 2] = [(Pool::Cpu, 1), (Pool::Gpu, 4)];

impl Scaling {
    /// An empty backlog.
    pub fn new(settings: ScalingSettings) -> Self {
        Scaling {
            settings,
            slots: [
                (Pool::Cpu, settings.cpu_slots.max(1)),
                (Pool::Gpu, settings.gpu_slots.max(1)),
            ]
            .into_iter()
            .collect(),
            jobs: Mutex::default(),
            measured: Mutex::default(),
            encoded: Mutex::default(),
        }
    }

    /// Workers of `pool` encode `slots` segments at once (at least 1). Why: a segment's
    /// report measures one slot, and the dispatcher cannot see a worker's slots (its events
    /// name the worker, not its slots); a worker of 4 slots counted as one slot asks for 4
    /// times the workers needed.
    pub fn with_slots(mut self, pool: Pool, slots: u32) -> Self {
        self.slots.insert(pool, slots.max(1));
        self
    }

    /// A job's run started (a new job, or one resumed after a restart): until it is planned,
    /// it asks the CPU pool for one worker (module doc). Keeps what a job already planned.
    pub fn started(&self, job: &str) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.entry(job.to_string()).or_insert_with(|| JobBacklog {
            pool: Pool::Cpu,
            left: HashMap::new(),
            planned: HashMap::new(),
            delivering: false,
            since: Instant::now(),
        });
    }

    /// A job planned its segments (seconds each) for `pool`; `done` were finished by an
    /// earlier run. Replaces what the job had (a job planned again after a fallback).
    pub fn planned(&self, job: &str, pool: Pool, seconds: &[f64], done: &[u32]) {
        let planned: HashMap<u32, f64> = (0u32..).zip(seconds.iter().copied()).collect();
        let mut left = planned.clone();
        for d in done {
            left.remove(d);
        }
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.insert(
            job.to_string(),
            JobBacklog {
                pool,
                left,
                planned,
                delivering: false,
                since: Instant::now(),
            },
        );
    }

    /// A segment is done after `encode_seconds` of decode and encode.
    pub fn segment_done(&self, job: &str, segment: u32, encode_seconds: f64) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let Some(b) = jobs.get_mut(job) else { return };
        if b.left.remove(&segment).is_none() {
            return;
        }
        let (pool, Some(&media)) = (b.pool, b.planned.get(&segment)) else {
            return;
        };
        drop(jobs);
        let mut encoded = self.encoded.lock().unwrap_or_else(|e| e.into_inner());
        *encoded.entry(pool).or_default() += media;
        drop(encoded);
        if encode_seconds > 0.0 {
            let mut m = self.measured.lock().unwrap_or_else(|e| e.into_inner());
            m.entry(pool).or_default().add(media, encode_seconds);
        }
    }

    /// The job's outputs are stitched and delivery started: it needs no worker any more.
    /// Why apart from `ended`: delivering a large package can take minutes of the
    /// dispatcher's copies, during which a worker kept up for the job would sit idle.
    pub fn delivering(&self, job: &str) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = jobs.get_mut(job) {
            b.delivering = true;
        }
    }

    /// The job ended (done, failed or cancelled): nothing of it is left to encode.
    pub fn ended(&self, job: &str) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.remove(job);
    }

    /// Media seconds one worker of `pool` encodes per second: one slot's measured rate
    /// times the worker's slots, or the setting until enough is measured.
    fn throughput(&self, pool: Pool) -> f64 {
        let m = self.measured.lock().unwrap_or_else(|e| e.into_inner());
        let slots = f64::from(self.slots.get(&pool).copied().unwrap_or(1));
        match m.get(&pool) {
            Some(x) if x.media_seconds >= MIN_MEASURED_SECONDS && x.encode_seconds > 0.0 => {
                slots * x.media_seconds / x.encode_seconds
            }
            _ => match pool {
                Pool::Cpu => self.settings.cpu_throughput,
                Pool::Gpu => self.settings.gpu_throughput,
            },
        }
    }

    /// Seconds of video in the segments of `pool` done since the start.
    pub fn encoded_seconds(&self, pool: Pool) -> f64 {
        let encoded = self.encoded.lock().unwrap_or_else(|e| e.into_inner());
        encoded.get(&pool).copied().unwrap_or(0.0)
    }

    /// The figures of `pool` now.
    pub fn figures(&self, pool: Pool) -> PoolFigures {
        self.figures_at(pool, Instant::now())
    }

    /// The figures of `pool` at `now`.
    fn figures_at(&self, pool: Pool, now: Instant) -> PoolFigures {
        let (seconds, segments, stitching, oldest) = {
            let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
            let stitching = jobs.values().filter(|b| b.awaits_worker()).count() as u64;
            let (seconds, segments, oldest) = jobs
                .values()
                .filter(|b| b.pool == pool && !b.left.is_empty())
                .fold((0.0, 0u64, 0.0f64), |(s, n, o), b| {
                    let age = now.saturating_duration_since(b.since).as_secs_f64();
                    let left = b.left.values().sum::<f64>();
                    (s + left, n + b.left.len() as u64, o.max(age))
                });
            (seconds, segments, stitching, oldest)
        };
        let throughput = self.throughput(pool);
        let for_segments = desired_workers(
            seconds,
            segments,
            throughput,
            self.settings.target_drain_seconds,
        );
        // A worker takes one stitch at a time beside its segment slots: one per job whose
        // stitches wait (or whose tasks are being prepared), counted within the workers the
        // segments need.
        let for_stitches = if pool == Pool::Cpu { stitching } else { 0 };
        PoolFigures {
            backlog_segment_seconds: seconds,
            backlog_segments: segments,
            oldest_backlog_seconds: oldest,
            worker_throughput: throughput,
            desired_workers: for_segments.max(for_stitches),
        }
    }

    /// Appends the Prometheus text of both pools' figures.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let series: [Series; 5] = [
            (
                "tessera_desired_workers",
                "Workers that drain the pool's backlog in the target time.",
                |f| f.desired_workers as f64,
            ),
            (
                "tessera_backlog_segment_seconds",
                "Seconds of video in segments not done (gate, queue, encoding).",
                |f| f.backlog_segment_seconds,
            ),
            (
                "tessera_backlog_segments",
                "Segments not done (gate, queue, encoding).",
                |f| f.backlog_segments as f64,
            ),
            (
                "tessera_backlog_oldest_seconds",
                "Seconds since the job holding the oldest segment not done planned it.",
                |f| f.oldest_backlog_seconds,
            ),
            (
                "tessera_worker_throughput_ratio",
                "Media seconds one worker encodes per second (measured or configured).",
                |f| f.worker_throughput,
            ),
        ];
        // Each pool's figures once: every series reads the same snapshot.
        let figures = Pool::ALL.map(|pool| (pool, self.figures(pool)));
        for (name, help, value) in series {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (pool, f) in &figures {
                let v = value(f);
                let _ = writeln!(out, "{name}{{pool=\"{}\"}} {v}", pool.as_str());
            }
        }
        let name = "tessera_video_seconds_encoded_total";
        let help = "Seconds of source video in the segments done (each segment once).";
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for pool in Pool::ALL {
            let v = self.encoded_seconds(pool);
            let _ = writeln!(out, "{name}{{pool=\"{}\"}} {v}", pool.as_str());
        }
    }

    /// The target drain time, seconds.
    pub fn target_drain_seconds(&self) -> f64 {
        self.settings.target_drain_seconds
    }
}

#[cfg(test)]
mod tests;
