//! Job queries of the test farm: the API's view of jobs, the uploads' ETags, waiting for
//! progress, and counting worker log lines (for the bucket-upload and outage tests).

use std::time::{Duration, Instant};

use crate::farm::{Farm, TOKEN};

/// Helpers for the bucket-upload tests.
impl Farm {
    /// The ETag (without quotes) of `s3://bucket/key`; panics if it does not exist.
    pub fn etag(&self, bucket: &str, key: &str) -> String {
        self.with_store(bucket, |s| async move {
            let info = s.head(key).await.expect("head").expect("object exists");
            info.etag
        })
    }

    /// Every job the API lists (newest first, up to 500).
    pub fn jobs(&self) -> Vec<serde_json::Value> {
        self.newest_jobs(500)
    }

    /// The `n` newest jobs (at most 500): what a client polling its latest batch asks for,
    /// without the dispatcher rendering every earlier job on each poll.
    pub fn newest_jobs(&self, n: usize) -> Vec<serde_json::Value> {
        let path = format!("/v1/jobs?limit={}", n.clamp(1, 500));
        let (code, list) = self.http("GET", &path, Some(TOKEN), None);
        assert_eq!(code, 200, "GET {path}: {list}");
        list["jobs"].as_array().cloned().unwrap_or_default()
    }

    /// The jobs whose input is `s3://bucket/key`.
    pub fn jobs_for(&self, bucket: &str, key: &str) -> Vec<serde_json::Value> {
        let input = serde_json::json!({"bucket": bucket, "key": key});
        self.jobs()
            .into_iter()
            .filter(|j| j["input"] == input)
            .collect()
    }
}

/// Helpers for the outage tests.
impl Farm {
    /// The API's view of job `id` (`state`, `segments_done`, `segments_total`, ...).
    pub fn job(&self, id: &str) -> serde_json::Value {
        let (code, job) = self.http("GET", &format!("/v1/jobs/{id}"), Some(TOKEN), None);
        assert_eq!(code, 200, "GET job: {job}");
        job
    }

    /// Waits until job `id` has at least `n` segments done; returns its view then.
    pub fn wait_segments_done(&self, id: &str, n: u64, timeout: Duration) -> serde_json::Value {
        let started = Instant::now();
        loop {
            let job = self.job(id);
            if job["segments_done"].as_u64().unwrap_or(0) >= n {
                return job;
            }
            assert!(
                started.elapsed() < timeout,
                "job {id} has fewer than {n} segments done after {timeout:?}: {job}\n{}",
                crate::run::tail(&self.log("worker-0.log"), 4000)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How many lines of worker `i`'s log contain every one of `needles`.
    pub fn worker_log_count(&self, i: usize, needles: &[&str]) -> usize {
        self.log(&format!("worker-{i}.log"))
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .count()
    }
}

/// Helpers for the long runs (chaos, soak).
impl Farm {
    /// Submits `body` as the admin, retrying every `pause` up to `tries` times while the API
    /// refuses it (a dispatcher restarting, a tenant at its quota); the job id, if accepted.
    pub fn submit_retrying(
        &self,
        body: &serde_json::Value,
        tries: usize,
        pause: Duration,
    ) -> Option<String> {
        for _ in 0..tries {
            let (code, resp) = self.http("POST", "/v1/jobs", Some(TOKEN), Some(&body.to_string()));
            if code == 202 {
                return resp["id"].as_str().map(str::to_string);
            }
            std::thread::sleep(pause);
        }
        None
    }
}

/// Helpers for the broker tests.
impl Farm {
    /// Runs `f` with a RabbitMQ connection to the farm's vhost on a one-off runtime, with the
    /// farm's delivery limit (3), so queue declarations agree with the farm's.
    pub fn with_broker<R, F>(&self, f: impl FnOnce(tessera_farm::queue::RabbitQueue) -> F) -> R
    where
        F: std::future::Future<Output = R>,
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        rt.block_on(async {
            let q = tessera_farm::queue::RabbitQueue::connect(self.vhost.config(3))
                .await
                .expect("connect to RabbitMQ");
            let out = f(q.clone()).await;
            q.close().await;
            out
        })
    }

    /// One sample of the dispatcher's `/metrics`, the series written as exposed (labels
    /// included); panics when the series is absent.
    pub fn metric(&self, series: &str) -> f64 {
        let out = std::process::Command::new("curl")
            .args(["-sS", "-m", "20"])
            .arg(format!("{}/metrics", self.api))
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in /metrics:\n{text}"))
    }

    /// Uploads the 12 s 720p fixture and submits it in 2 s segments with the `medium` preset
    /// (slow enough to catch a worker mid-segment); the job id.
    pub fn start_slow_job(&self, key: &str) -> String {
        let src = crate::fixture::fixture(crate::fixture::Fixture::Hd720Long);
        self.upload(&src, "input", "long.mp4");
        self.submit(
            "s3://input/long.mp4",
            &format!("s3://output/{key}"),
            serde_json::json!({"preset": "medium"}),
            serde_json::json!({"segment_seconds": 2}),
        )
    }
}
