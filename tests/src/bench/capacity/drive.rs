//! The run itself: fake workers on the broker, submissions at a steady rate over a pool of
//! kept-alive connections, a sample a second, until every accepted job has ended (or the
//! jobs stop ending).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tessera_farm::queue::RabbitQueue;
use tessera_farm::store::S3Client;
use tessera_model::wire::{QUEUE_ENCODE_CPU, QUEUE_EVENTS, QUEUE_STITCH};
use tokio::sync::{mpsc, watch};

use super::fake_workers::{FakeFleet, WorkerCounts};
use super::http::Conn;
use super::report::{Sample, Submit};
use super::{sampler, CapacitySettings};
use crate::farm::{Farm, TOKEN};

/// Everything a run recorded.
pub struct Outcome {
    /// Every submission, in no particular order.
    pub submits: Vec<Submit>,
    /// A sample a second, in order.
    pub samples: Vec<Sample>,
    /// Jobs the API accepted (202).
    pub accepted: u64,
    /// Whether the run stopped because jobs stopped ending, before all had ended.
    pub stalled: bool,
    /// What the fake workers did: (segments, stitches, events, errors).
    pub workers: (u64, u64, u64, u64),
}

/// What the sampler reads from.
struct Watched {
    pid: u32,
    db: PathBuf,
    api: String,
    queue: RabbitQueue,
    counts: Arc<WorkerCounts>,
    submitted: Arc<AtomicU64>,
    /// Submissions not accepted so far (only the first few are printed).
    refused: AtomicU64,
    started: Instant,
}

/// Runs the load against `farm` (its dispatcher running, no workers) with the uploaded
/// `inputs` (`s3://...` URIs).
pub async fn drive(farm: &Farm, settings: &CapacitySettings, inputs: &[String]) -> Outcome {
    let queue = RabbitQueue::connect(farm.vhost.config(3))
        .await
        .expect("load generator's broker connection");
    let s3 = S3Client::new(farm.garage.s3_config())
        .await
        .expect("load generator's store");
    let stand_in = farm.dir.path().join("stand-in.bin");
    std::fs::write(&stand_in, vec![0x5a; 4096]).expect("write the stand-in object");
    let counts = Arc::new(WorkerCounts::default());
    let fleet = FakeFleet {
        queue: queue.clone(),
        work: s3.store("work"),
        stand_in,
        counts: counts.clone(),
    };
    let (stop, stopped) = watch::channel(false);
    fleet
        .start(settings.encoders, settings.stitchers, &stopped)
        .await;
    let watched = Arc::new(Watched {
        pid: farm.dispatcher.id(),
        db: farm.dir.path().join(&farm.db),
        api: farm.api.clone(),
        queue,
        counts: counts.clone(),
        submitted: Arc::default(),
        refused: AtomicU64::new(0),
        started: Instant::now(),
    });
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let sampling = tokio::spawn(sample_every_second(
        watched.clone(),
        samples.clone(),
        stopped,
    ));
    let submits = submit_all(settings, inputs, &watched).await;
    let accepted = submits.iter().filter(|s| s.status == 202).count() as u64;
    println!(
        "==> submitted {} jobs in {:.1} s ({accepted} accepted); waiting for them to end",
        submits.len(),
        watched.started.elapsed().as_secs_f64()
    );
    let stalled = if settings.wait {
        wait_for_ends(&samples, accepted, settings.stall).await
    } else {
        tokio::time::sleep(Duration::from_secs(2)).await;
        false
    };
    let _ = stop.send(true);
    let _ = sampling.await;
    let samples = std::mem::take(&mut *samples.lock().expect("samples"));
    Outcome {
        submits,
        samples,
        accepted,
        stalled,
        workers: counts.snapshot(),
    }
}

/// Waits until `accepted` jobs have ended in the samples; true when none ended for `stall`.
async fn wait_for_ends(samples: &Mutex<Vec<Sample>>, accepted: u64, stall: Duration) -> bool {
    let mut last = (0, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let ended = samples
            .lock()
            .expect("samples")
            .last()
            .map_or(0, Sample::ended);
        if ended >= accepted {
            return false;
        }
        if ended != last.0 {
            last = (ended, Instant::now());
        } else if last.1.elapsed() > stall {
            println!("==> no job ended for {stall:?}: {ended} of {accepted} ended; stopping");
            return true;
        }
    }
}

/// Submits `settings.jobs` jobs at `settings.rate` a second over `settings.connections`
/// kept-alive connections; job `i` reads `inputs[i % len]`.
async fn submit_all(
    settings: &CapacitySettings,
    inputs: &[String],
    watched: &Arc<Watched>,
) -> Vec<Submit> {
    let (tx, rx) = mpsc::channel::<(usize, Instant)>(settings.jobs.max(1));
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let mut senders = Vec::new();
    for _ in 0..settings.connections {
        let (rx, watched) = (rx.clone(), watched.clone());
        let inputs = inputs.to_vec();
        senders.push(tokio::spawn(async move {
            let mut conn = Conn::new(&watched.api, Duration::from_secs(60));
            let mut done = Vec::new();
            loop {
                let next = rx.lock().await.recv().await;
                let Some((i, due)) = next else { break };
                done.push(submit_one(&mut conn, &watched, &inputs, i, due).await);
            }
            done
        }));
    }
    let period = Duration::from_secs_f64(1.0 / settings.rate.max(0.001));
    let start = tokio::time::Instant::now();
    for i in 0..settings.jobs {
        let due = start + period.mul_f64(i as f64);
        tokio::time::sleep_until(due).await;
        if tx.send((i, due.into_std())).await.is_err() {
            break;
        }
    }
    drop(tx);
    let mut all = Vec::with_capacity(settings.jobs);
    for s in senders {
        all.extend(s.await.expect("a submitting task panicked"));
    }
    all
}

/// One job through `POST /v1/jobs`.
async fn submit_one(
    conn: &mut Conn,
    watched: &Watched,
    inputs: &[String],
    i: usize,
    due: Instant,
) -> Submit {
    let body = serde_json::json!({
        "input": inputs[i % inputs.len()],
        "outputs": [{
            "destination": format!("s3://output/capacity/out-{i:06}.mp4"),
            "codec": "h264", "preset": "veryfast", "crf": 23,
        }],
    })
    .to_string();
    let sent = Instant::now();
    let answer = conn
        .request("POST", "/v1/jobs", TOKEN, body.as_bytes())
        .await;
    let end = Instant::now();
    watched.submitted.fetch_add(1, Ordering::Relaxed);
    let status = match answer {
        Ok((status, text)) => {
            // The first few refusals are shown; the summary counts them all.
            if status != 202 && watched.refused.fetch_add(1, Ordering::Relaxed) < 5 {
                eprintln!("job {i}: {status} {}", String::from_utf8_lossy(&text));
            }
            status
        }
        Err(e) => {
            if watched.refused.fetch_add(1, Ordering::Relaxed) < 5 {
                eprintln!("job {i}: {e}");
            }
            0
        }
    };
    Submit {
        scheduled_s: due.saturating_duration_since(watched.started).as_secs_f64(),
        latency_s: end.saturating_duration_since(due).as_secs_f64(),
        service_s: (end - sent).as_secs_f64(),
        status,
    }
}

/// A sample a second into `samples` until `stop` changes.
async fn sample_every_second(
    watched: Arc<Watched>,
    samples: Arc<Mutex<Vec<Sample>>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut metrics = Conn::new(&watched.api, Duration::from_secs(30));
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let sample = sample(&watched, &mut metrics).await;
        samples.lock().expect("samples").push(sample);
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {}
        }
    }
    // The last one after the end.
    let sample = sample(&watched, &mut metrics).await;
    samples.lock().expect("samples").push(sample);
}

async fn sample(w: &Watched, metrics: &mut Conn) -> Sample {
    let asked = Instant::now();
    let jobs = match metrics.request("GET", "/metrics", TOKEN, b"").await {
        Ok((200, text)) => sampler::jobs_by_state(&String::from_utf8_lossy(&text)),
        _ => Default::default(),
    };
    let metrics_s = asked.elapsed().as_secs_f64();
    let ready = |q: &'static str| async move { w.queue.ready_len(q).await.unwrap_or(0) };
    let (workers_events, pid) = (w.counts.snapshot().2, w.pid);
    Sample {
        t: w.started.elapsed().as_secs_f64(),
        rss: sampler::rss(pid),
        threads: sampler::threads(pid),
        children_cpu: sampler::reaped_cpu(pid) + sampler::children(pid),
        jobs,
        metrics_s,
        ready: (
            ready(QUEUE_EVENTS).await,
            ready(QUEUE_ENCODE_CPU).await,
            ready(QUEUE_STITCH).await,
        ),
        db_bytes: sampler::db_bytes(&w.db),
        machine: sampler::machine_ticks(),
        events_sent: workers_events,
        submitted: w.submitted.load(Ordering::Relaxed),
    }
}
