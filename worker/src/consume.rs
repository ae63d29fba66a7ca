//! The worker's loop: consume its queues, run each delivery as a task, drain on the way out.
//!
//! Why one loop for every queue: segment slots, the GPU queue and the stitch queue share one
//! shutdown, one drain and one idle clock, whatever queue and store the caller passes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_farm::queue::{Delivery, Queue};
use tessera_farm::sandbox::Sandbox;
use tessera_farm::store::Store;
use tessera_farm::FarmError;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::forward::{forward, sources, Event, Kind};
use crate::give_back::GiveBack;
use crate::{DrainReason, ProgressFn, SegmentRunner, WorkerConfig};

/// Runs the worker until `shutdown` is cancelled or the queue closes. In-flight segments get
/// `config.grace` to finish; the rest are aborted and their tasks given back as fresh
/// messages, like the deliveries that waited unstarted (give_back.rs: a drain spends no
/// delivery), and the staging directory is emptied. With GPUs it
/// consumes the GPU queue (and the CPU queue too when told to drain it), else the CPU queue.
pub async fn run(
    config: WorkerConfig,
    queue: Arc<dyn Queue>,
    store: Arc<dyn Store>,
    sandbox: Sandbox,
    progress: Option<ProgressFn>,
    shutdown: CancellationToken,
) -> Result<(), FarmError> {
    let (_lock, own_dir) = crate::staging::claim(&config.staging_dir, &config.id)?;
    let mut config = config;
    config.staging_dir = own_dir;
    let runner = Arc::new(SegmentRunner::new(
        config.clone(),
        queue.clone(),
        store,
        sandbox,
        progress,
    ));
    if config.cut_queue.is_some() {
        tokio::spawn(runner.clone().sweep_sources(shutdown.clone()));
    }
    let slots = u16::try_from(config.slots.max(1)).unwrap_or(u16::MAX);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (sources, primary) = sources(&config, &queue, slots);
    let mut forwarders = Vec::new();
    for s in sources {
        let c = queue.consume(&s.name, s.prefetch()).await?;
        forwarders.push(forward(s, c, tx.clone(), runner.fitness.clone()));
    }
    if primary == Kind::Cpu && !runner.sandbox.reuses_children() {
        // Encode children start now, so the first segments find them ready.
        (runner.encoders).warm(None, usize::from(slots), config.limits);
    }
    drop(tx);
    let book = Arc::new(crate::status::Book::default());
    let reports = CancellationToken::new();
    let reporter = config.status_every.map(|every| {
        let (config, book, fitness) = (config.clone(), book.clone(), runner.fitness.clone());
        let primary_queue = queue_of(&config, primary).to_string();
        let make = move || crate::status::report(&config, &book, &primary_queue, fitness.reason());
        let reporting = crate::status::report_every(every, queue.clone(), make, reports.clone());
        tokio::spawn(reporting)
    });
    let mut tasks = Tasks {
        config: &config,
        runner,
        primary,
        running: JoinSet::new(),
        last_busy: Instant::now(),
        held: GiveBack::new(queue.clone()),
        cpu_slots: Arc::new(tokio::sync::Semaphore::new(usize::from(slots))),
        book,
    };
    let outcome = tasks.dispatch(&mut rx, &shutdown).await;
    // Stop consuming; deliveries not started go back to their queues.
    for f in &forwarders {
        f.abort();
    }
    // Deliveries that waited for the loop go back without spending a delivery.
    while let Ok(event) = rx.try_recv() {
        if let Event::Work(kind, d) = event {
            tasks
                .held
                .give_back_unstarted(d, queue_of(&config, kind))
                .await;
        }
    }
    drop(rx);
    // A spot notice's deadline may leave less than the configured grace.
    tasks.drain(config.drain.grace(config.grace)).await;
    // The last report says the worker drained with nothing in hand.
    reports.cancel();
    if let Some(r) = reporter {
        let _ = r.await;
    }
    let _ = std::fs::remove_dir_all(&config.staging_dir);
    outcome
}

/// The tasks a worker runs, and since when none has run (for `exit_when_idle`).
struct Tasks<'a> {
    config: &'a WorkerConfig,
    runner: Arc<SegmentRunner>,
    /// The kind whose queue's end stops the worker.
    primary: Kind,
    running: JoinSet<()>,
    last_busy: Instant,
    /// The running tasks' deliveries, given back if the drain cuts them off.
    held: GiveBack,
    /// The segment slots the CPU and cut queues share: each queue's prefetch is the slot
    /// count, so a delivery of one waits here while the other's tasks fill the slots (both
    /// queues carry work only while a dispatcher sends split and cut runs at once).
    cpu_slots: Arc<tokio::sync::Semaphore>,
    /// The tasks in hand, for the status report (status.rs).
    book: Arc<crate::status::Book>,
}

/// The queue a delivery of `kind` came from.
fn queue_of(config: &WorkerConfig, kind: Kind) -> &str {
    match kind {
        Kind::Cpu => &config.queue,
        Kind::Gpu => &config.gpu_queue,
        Kind::Stitch => config.stitch_queue.as_deref().unwrap_or(&config.queue),
        Kind::Whole => config.whole_queue.as_deref().unwrap_or(&config.queue),
        Kind::Cut => config.cut_queue.as_deref().unwrap_or(&config.queue),
    }
}

impl Tasks<'_> {
    /// Starts a task for each delivery until shutdown, a drain, the idle time, the end of the
    /// primary queue or a consumer's failure (the error returned).
    async fn dispatch(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<Event>,
        shutdown: &CancellationToken,
    ) -> Result<(), FarmError> {
        let config = self.config;
        let drained = config.drain.stopped();
        loop {
            // The idle clock runs only while nothing runs.
            let idle_at = config
                .exit_when_idle
                .filter(|_| self.running.is_empty())
                .map(|idle| tokio::time::Instant::from_std(self.last_busy + idle));
            let event = match next_step(&mut self.running, rx, idle_at, shutdown, &drained).await {
                Step::Stop => break,
                Step::Reaped => {
                    self.last_busy = Instant::now();
                    self.held.prune();
                    continue;
                }
                Step::Idle => {
                    tracing::info!(
                        idle_s = config.exit_when_idle.map(|d| d.as_secs()),
                        "no work for the idle time: stopping"
                    );
                    config.drain.begin(DrainReason::Idle, None);
                    break;
                }
                Step::Next(e) => e,
            };
            let (kind, delivery) = match event {
                None => break,
                Some(Event::Work(kind, d)) => (kind, d),
                Some(Event::Ended(kind)) if kind == self.primary => break,
                Some(Event::Ended(_)) => continue,
                Some(Event::Failed(e)) => return Err(e),
            };
            self.last_busy = Instant::now();
            self.start(kind, delivery);
        }
        Ok(())
    }

    /// Runs one delivery as a task of its kind.
    fn start(&mut self, kind: Kind, delivery: Delivery) {
        let runner = self.runner.clone();
        let gpus = self.config.gpus.clone();
        let span = task_span(&self.config.id, &delivery.body);
        let origin = queue_of(self.config, kind).to_string();
        let place = self.book.enter(&delivery.body, &origin);
        let delivery = self.held.track(delivery, &origin);
        let slots = self.cpu_slots.clone();
        let task = async move {
            let _place = place;
            match (kind, gpus) {
                (Kind::Gpu, Some(gpus)) => runner.handle_gpu(delivery, gpus).await,
                (Kind::Stitch, _) => runner.handle_stitch(delivery).await,
                (Kind::Whole, _) => runner.handle_whole(delivery).await,
                _ => {
                    let _slot = slots.acquire_owned().await;
                    runner.handle(delivery, &origin).await
                }
            }
        };
        self.running
            .spawn(tracing::Instrument::instrument(task, span));
    }

    /// Lets the running tasks finish within `grace`, then aborts the rest and gives their
    /// unsettled deliveries back as fresh messages (give_back.rs).
    async fn drain(&mut self, grace: Duration) {
        let tasks = &mut self.running;
        if !tasks.is_empty() {
            tracing::info!(running = tasks.len(), grace_s = grace.as_secs(), "draining");
        }
        let drained = tokio::time::timeout(grace, async {
            while let Some(done) = tasks.join_next().await {
                if let Err(e) = done {
                    tracing::error!(error = %e, "segment task panicked");
                }
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                left = tasks.len(),
                "grace period over: aborting and giving back in-flight tasks"
            );
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        self.held.give_back_all().await;
    }
}

/// The span a delivery's task runs in: the worker and, when the message can be read, its job,
/// plan (16 hex digits, as in its store keys) and task (`segment` for a segment), so every
/// line the task logs names them (JSON logs, docs/operations.md). An unreadable message's
/// task still names the worker.
fn task_span(worker: &str, body: &[u8]) -> tracing::Span {
    use tracing::field::Empty;
    let span = tracing::info_span!(
        "task",
        worker,
        job = Empty,
        plan = Empty,
        task = Empty,
        segment = Empty
    );
    if let Some((job, plan, task)) = tessera_model::wire::task_identity(body) {
        span.record("job", job.as_str());
        // As in store keys (jobs/{job}/{plan:016x}/): 64 bits lose digits as a JSON number.
        span.record("plan", tracing::field::display(format_args!("{plan:016x}")));
        span.record("task", tracing::field::display(task));
        if let tessera_model::wire::TaskRef::Segment(segment) = task {
            span.record("segment", segment);
        }
    }
    span
}

/// What the consume loop does next.
enum Step {
    /// Shutdown or a drain: stop taking work.
    Stop,
    /// A task finished (the idle clock restarts).
    Reaped,
    /// Nothing ran or arrived for the idle time.
    Idle,
    /// What a forwarder sent (`None`: every forwarder is gone).
    Next(Option<Event>),
}

/// Waits for the consume loop's next step: shutdown, a drain, a finished task, an event from
/// the forwarders, or the idle deadline `idle_at`, in that order when several are ready.
///
/// Why this order (a biased select): a delivery already in the channel must run rather than
/// lose to the idle exit, which would hand it back with its delivery count raised (review
/// N13); shutdown and a drain still win over new work, and the idle exit comes only when
/// nothing else is ready.
async fn next_step(
    running: &mut JoinSet<()>,
    rx: &mut mpsc::UnboundedReceiver<Event>,
    idle_at: Option<tokio::time::Instant>,
    shutdown: &CancellationToken,
    drained: &CancellationToken,
) -> Step {
    tokio::select! {
        biased;
        _ = shutdown.cancelled() => Step::Stop,
        _ = drained.cancelled() => Step::Stop,
        Some(done) = running.join_next(), if !running.is_empty() => {
            if let Err(e) = done {
                tracing::error!(error = %e, "task panicked");
            }
            Step::Reaped
        }
        e = rx.recv() => Step::Next(e),
        _ = sleep_until(idle_at), if idle_at.is_some() => Step::Idle,
    }
}

/// Sleeps until `at`, or forever when there is no `at` (the select arm is then disabled).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_farm::queue::MemoryQueue;

    /// An idle deadline the timer has passed for sure: a second before a moment the runtime's
    /// clock has already moved past (a deadline of "now" is rounded up to the next tick).
    async fn passed() -> Option<tokio::time::Instant> {
        let before = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_millis(2)).await;
        Some(before.checked_sub(Duration::from_secs(1)).unwrap_or(before))
    }

    /// A delivery of a one-message queue, as a forwarder sends it.
    async fn delivery(queue: &MemoryQueue) -> Event {
        queue.publish("w", b"task".to_vec()).await.unwrap();
        let mut consumer = queue.consume("w", 1).await.unwrap();
        Event::Work(Kind::Cpu, consumer.next().await.unwrap().unwrap())
    }

    #[tokio::test]
    async fn a_waiting_delivery_wins_over_the_idle_exit() {
        let (shutdown, drained) = (CancellationToken::new(), CancellationToken::new());
        // Every round the idle deadline has passed and a delivery waits: a select that picks
        // at random leaves on about half of them, spending the delivery.
        for round in 0..64 {
            let queue = MemoryQueue::new(5);
            let (tx, mut rx) = mpsc::unbounded_channel();
            tx.send(delivery(&queue).await).unwrap();
            let idle_at = passed().await;
            let mut running = JoinSet::new();
            match next_step(&mut running, &mut rx, idle_at, &shutdown, &drained).await {
                Step::Next(Some(Event::Work(_, d))) => {
                    assert_eq!(d.redeliveries, 0);
                    d.acker.ack().await.unwrap();
                }
                Step::Idle => panic!("round {round}: idle exit taken with a delivery waiting"),
                _ => panic!("round {round}: not the delivery"),
            }
            assert_eq!(queue.ready_len("w"), 0, "round {round}: requeued");
        }
    }

    #[tokio::test]
    async fn the_idle_exit_comes_when_nothing_waits() {
        let (shutdown, drained) = (CancellationToken::new(), CancellationToken::new());
        let (_tx, mut rx) = mpsc::unbounded_channel();
        let idle_at = passed().await;
        let step = next_step(&mut JoinSet::new(), &mut rx, idle_at, &shutdown, &drained).await;
        assert!(matches!(step, Step::Idle));
        // A drain beats a waiting delivery: it is left for the queue to hand elsewhere.
        let queue = MemoryQueue::new(5);
        let (tx, mut rx) = mpsc::unbounded_channel();
        tx.send(delivery(&queue).await).unwrap();
        drained.cancel();
        let step = next_step(&mut JoinSet::new(), &mut rx, None, &shutdown, &drained).await;
        assert!(matches!(step, Step::Stop));
    }

    /// A writer into a shared buffer (the JSON log lines a test reads back).
    #[derive(Clone, Default)]
    struct Capture(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_task_logs_its_worker_job_plan_and_segment() {
        let capture = Capture::default();
        let sink = capture.clone();
        let subscriber = tessera_farm::signals::json_subscriber("info", move || sink.clone());
        let subscriber = subscriber.unwrap();
        tracing::subscriber::with_default(subscriber, || {
            let body = br#"{"v":1,"job_id":"job-7","plan":99,"segment":4,"chunk":"k"}"#;
            task_span("w-1", body).in_scope(|| tracing::info!("segment encoded"));
            task_span("w-1", br#"{"v":1,"job_id":"job-7","plan":99,"output":1}"#)
                .in_scope(|| tracing::info!("stitched"));
            task_span("w-1", b"not json").in_scope(|| tracing::warn!("unreadable"));
        });
        let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        let segment = &lines[0];
        assert_eq!(segment["worker"], "w-1", "{segment}");
        assert_eq!(segment["job"], "job-7");
        assert_eq!(segment["plan"], "0000000000000063", "{segment}");
        assert_eq!(segment["segment"], 4);
        assert_eq!(segment["task"], "segment 4");
        assert_eq!(lines[1]["task"], "stitch of output 1");
        assert!(lines[1].get("segment").is_none(), "{}", lines[1]);
        assert_eq!(lines[2]["worker"], "w-1");
        assert!(lines[2].get("job").is_none(), "{}", lines[2]);
    }
}
