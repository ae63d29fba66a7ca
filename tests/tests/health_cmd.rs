//! `tessera-worker health` and `tessera-dispatcher health`, the container HEALTHCHECK of the
//! minimal images (which have no curl): against the running services of a real farm they
//! exit 0; against an address where nothing listens, or a worker that serves no /healthz,
//! they exit non-zero with a message naming the address (or the missing setting). The
//! address is read like the service reads it: flags, `TESSERA_*` variables, the config file.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tessera_tests::farm::Farm;
use tessera_tests::imds::{free_port, get_status};
use tessera_tests::run::{run_command_env, tessera_bin, Run};

fn bin(name: &str) -> PathBuf {
    tessera_bin().with_file_name(name)
}

/// `NAME ARGS...` with `env` over this process's environment.
fn health(name: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    run_command_env(&bin(name), args, env, Duration::from_secs(30))
}

fn assert_refused(run: &Run, needle: &str) {
    assert!(
        !run.status.success(),
        "expected a failure\n{}",
        run.describe()
    );
    assert!(
        run.stderr.contains(needle),
        "stderr should name {needle}\n{}",
        run.describe()
    );
}

#[test]
fn health_answers_for_running_services_and_names_a_dead_address() {
    let mut farm = Farm::start("health-cmd", 0);
    let metrics = format!("127.0.0.1:{}", free_port());
    farm.add_worker_with(0, &["--metrics-listen", &metrics]);
    let port: u16 = metrics.rsplit(':').next().unwrap().parse().unwrap();
    let started = Instant::now();
    while get_status(port, "/healthz") != Some(200) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the worker's /healthz did not come up:\n{}",
            farm.log("worker-0.log")
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The worker: by flag, by variable, by config file, and a wildcard address on loopback.
    let by_flag = health(
        "tessera-worker",
        &["--metrics-listen", &metrics, "health"],
        &[],
    );
    by_flag.assert_success();
    assert_eq!(
        by_flag.stdout.trim(),
        format!("healthy: http://{metrics}/healthz")
    );
    health(
        "tessera-worker",
        &["health"],
        &[("TESSERA_METRICS_LISTEN", &format!("0.0.0.0:{port}"))],
    )
    .assert_success();
    let config = farm.dir.path().join("worker.toml");
    std::fs::write(
        &config,
        format!("[worker]\nmetrics_listen = \"{metrics}\"\n"),
    )
    .unwrap();
    health(
        "tessera-worker",
        &["--config", config.to_str().unwrap(), "health"],
        &[],
    )
    .assert_success();

    // The dispatcher, on the port it picked (it was started on port 0).
    let api = farm.api.trim_start_matches("http://").to_string();
    health("tessera-dispatcher", &["--listen", &api, "health"], &[]).assert_success();
    health(
        "tessera-dispatcher",
        &["health"],
        &[("TESSERA_LISTEN", &api)],
    )
    .assert_success();

    // Nothing listening: non-zero, the address named.
    let dead = format!("127.0.0.1:{}", free_port());
    let run = health("tessera-dispatcher", &["--listen", &dead, "health"], &[]);
    assert_refused(&run, &format!("http://{dead}/healthz: cannot connect"));
    let run = health(
        "tessera-worker",
        &["--metrics-listen", &dead, "health"],
        &[],
    );
    assert_refused(&run, &format!("http://{dead}/healthz: cannot connect"));

    // A worker that serves no /healthz cannot be asked: the message says what to set.
    let out = std::process::Command::new(bin("tessera-worker"))
        .arg("health")
        .env_remove("TESSERA_METRICS_LISTEN")
        .env_remove("TESSERA_CONFIG")
        .output()
        .expect("run tessera-worker health");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected a failure: {stderr}");
    assert!(stderr.contains("TESSERA_METRICS_LISTEN"), "{stderr}");
}
