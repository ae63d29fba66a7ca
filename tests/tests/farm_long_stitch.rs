//! A stitch that outlasts the broker's consumer timeout (review M1): RabbitMQ takes back a
//! delivery held past `consumer_timeout` (30 min by default, global in 3.10) by closing the
//! channel, and redelivers it, so a long stitch ran again until its deliveries ran out
//! (`task_lost`), or twice on two workers. Here the two workers' channels open under a 2 s
//! consumer timeout checked every 0.5 s (broker-wide settings in 3.10, put back as soon as
//! they can be), and the stitch's reads of the encoded segments are answered 4 s late, so the
//! stitch outlasts it. The job must end done,
//! the stitch run once, and no delivery be taken back.

use std::time::{Duration, Instant};

use serde_json::json;
use tessera_tests::farm::{Farm, TOKEN};
use tessera_tests::rabbit::rabbitmqctl;
use tessera_tests::s3_faults::S3Faults;
use tessera_tests::{fixture, Fixture};

const JOB_TIMEOUT: Duration = Duration::from_secs(300);

/// A broker-wide setting of the `rabbit` application changed for a while; what was found is
/// put back on drop.
struct BrokerSetting {
    key: &'static str,
    found: String,
}

impl BrokerSetting {
    fn set(key: &'static str, value: u64) -> Self {
        let run = rabbitmqctl(&["eval", &format!("application:get_env(rabbit, {key}).")]);
        run.assert_success();
        // `{ok,1800000}` or `undefined`.
        let found = run
            .stdout
            .trim()
            .strip_prefix("{ok,")
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or("undefined")
            .to_string();
        // The test's own value found: a run killed before its drop left it (no broker runs
        // with it otherwise), and it would be put back. The broker's default is, instead.
        let found = match (
            found == value.to_string(),
            DEFAULTS.iter().find(|(k, _)| *k == key),
        ) {
            (true, Some((_, default))) => default.to_string(),
            _ => found,
        };
        set_env(key, &value.to_string());
        BrokerSetting { key, found }
    }
}

/// RabbitMQ's defaults of the settings this test changes (3.10 to 4.x).
const DEFAULTS: [(&str, &str); 2] = [
    ("consumer_timeout", "1800000"),
    ("channel_tick_interval", "60000"),
];

fn set_env(key: &str, value: &str) {
    let expr = if value == "undefined" {
        format!("application:unset_env(rabbit, {key}).")
    } else {
        format!("application:set_env(rabbit, {key}, {value}).")
    };
    rabbitmqctl(&["eval", &expr]).assert_success();
}

impl Drop for BrokerSetting {
    fn drop(&mut self) {
        set_env(self.key, &self.found);
    }
}

/// Waits until the vhost's stitch queue has `n` consumers (the workers' channels are open).
fn wait_for_stitch_consumers(vhost: &str, n: usize) {
    let started = Instant::now();
    loop {
        let run = rabbitmqctl(&["list_consumers", "-q", "-p", vhost, "queue_name"]);
        if run
            .stdout
            .lines()
            .filter(|l| l.trim() == "tessera.stitch")
            .count()
            >= n
        {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "fewer than {n} workers consume tessera.stitch: {}",
            run.describe()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_stitch_longer_than_the_consumer_timeout_runs_once_and_the_job_ends_done() {
    let mut farm = Farm::start("long-stitch", 0);
    farm.upload(&fixture(Fixture::ClosedGopH264), "input", "clip.mp4");
    let door = S3Faults::start(&farm.garage.endpoint);
    // Channels tick (and check their deliveries' age) every 0.5 s, each tick arming the next
    // with the setting of the moment, so it stays until the job ends; a channel takes the
    // consumer timeout when it opens, so the 2 s one is put back once the workers' are open.
    let tick = BrokerSetting::set("channel_tick_interval", 500);
    {
        let _short = BrokerSetting::set("consumer_timeout", 2000);
        for i in 0..2 {
            farm.add_worker_via(i, &[], &[("TESSERA_S3_ENDPOINT", &door.endpoint)], &[]);
        }
        wait_for_stitch_consumers(&farm.vhost.name, 2);
    }
    let body = json!({"input": "s3://input/clip.mp4", "segment_seconds": 2,
        "outputs": [{"destination": "s3://output/long.mp4", "preset": "veryfast"}]});
    // The stitch's reads of the encoded segments answered 4 s late; the segment tasks (well
    // under 2 s each) are not slowed.
    door.slow_reads("/encoded/", Duration::from_secs(4));
    let (code, job) = farm.http("POST", "/v1/jobs", Some(TOKEN), Some(&body.to_string()));
    assert_eq!(code, 202, "{job}");
    let id = job["id"].as_str().expect("job id").to_string();
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    drop(tick);
    let worker = farm.log("worker-0.log") + &farm.log("worker-1.log");
    assert_eq!(
        job["state"],
        "done",
        "{job}\n--- workers\n{}",
        tessera_tests::run::tail(&worker, 4000)
    );
    assert!(
        !worker.contains("timed out"),
        "the broker took a delivery back\n{}",
        tessera_tests::run::tail(&worker, 4000)
    );
    let stitched = worker.matches("QC gate passed").count();
    assert_eq!(
        stitched,
        1,
        "the stitch ran {stitched} times\n{}",
        tessera_tests::run::tail(&worker, 4000)
    );
    farm.assert_frame_exact(&fixture(Fixture::ClosedGopH264), "long.mp4");
}
