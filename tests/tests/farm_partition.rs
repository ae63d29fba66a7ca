//! A network partition without a TCP reset (issue 9): a worker in its own network namespace
//! (veth to the host; CI runs as root) loses its link in the middle of a segment, as a
//! reclaimed spot VM does. The broker hears nothing more from it, so the segment must come
//! back through the AMQP heartbeat (set to 5 s here) and be done by another worker; the job
//! ends frame-exact while the link is still down; when the link returns the worker
//! reconnects and takes work again.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_tests::farm::Farm;
use tessera_tests::fixture::{fixture, Fixture};

const JOB_TIMEOUT: Duration = Duration::from_secs(300);
/// The partitioned worker's AMQP heartbeat.
const HEARTBEAT_S: u64 = 5;

fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{args:?} failed (the partition test needs root and iproute2, as CI has): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace joined to the host by a veth pair: host side `.1`, worker side `.2`.
struct Partition {
    ns: String,
    host_if: String,
    host_addr: String,
    user: String,
}

impl Partition {
    fn new() -> Partition {
        let n = std::process::id() % 250;
        let p = Partition {
            ns: format!("tsr-part-{}", std::process::id()),
            host_if: format!("tsrh{n}"),
            host_addr: format!("10.213.{n}.1"),
            user: format!("tessera-part-{}", std::process::id()),
        };
        let worker_if = format!("tsrw{n}");
        let _ = Command::new("ip")
            .args(["link", "del", &p.host_if])
            .output();
        let ns_run = |args: &[&str]| {
            let mut all = vec!["ip", "netns", "exec", p.ns.as_str()];
            all.extend_from_slice(args);
            run(&all);
        };
        run(&["ip", "netns", "add", &p.ns]);
        let peer = ["peer", "name", worker_if.as_str()];
        run(&[
            &["ip", "link", "add", &p.host_if, "type", "veth"],
            &peer[..],
        ]
        .concat());
        run(&["ip", "link", "set", &worker_if, "netns", &p.ns]);
        run(&[
            "ip",
            "addr",
            "add",
            &format!("{}/30", p.host_addr),
            "dev",
            &p.host_if,
        ]);
        run(&["ip", "link", "set", &p.host_if, "up"]);
        let worker_addr = format!("10.213.{n}.2/30");
        ns_run(&["ip", "addr", "add", &worker_addr, "dev", &worker_if]);
        ns_run(&["ip", "link", "set", &worker_if, "up"]);
        ns_run(&["ip", "link", "set", "lo", "up"]);
        p
    }

    /// Cuts the link: packets vanish both ways, nobody sends a reset.
    fn cut(&self) {
        run(&["ip", "link", "set", &self.host_if, "down"]);
    }

    fn heal(&self) {
        run(&["ip", "link", "set", &self.host_if, "up"]);
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_if])
            .output();
        let _ = Command::new("rabbitmqctl")
            .args(["delete_user", &self.user])
            .output();
    }
}

/// Forwards connections to `listen_on:port` (port chosen here) to `target`, so the
/// namespaced worker reaches a store that listens on the host's loopback only.
fn forward(listen_on: &str, target: String) -> u16 {
    let listener = TcpListener::bind((listen_on, 0)).expect("bind forwarder");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for client in listener.incoming().map_while(Result::ok) {
            let Ok(server) = TcpStream::connect(&target) else {
                continue;
            };
            let pipe = |mut from: TcpStream, mut to: TcpStream| {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 || to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            };
            if let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) {
                pipe(client, s2);
                pipe(server, c2);
            }
        }
    });
    port
}

/// The segment index worker `i` holds (from its staging directory names).
fn held_segment(farm: &Farm, i: usize, job: &str) -> Option<u32> {
    let entries = std::fs::read_dir(farm.worker_staging(i)).ok()?;
    entries.flatten().find_map(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let rest = name.strip_prefix(&format!("{job}-"))?;
        rest.get(..6)?.parse().ok()
    })
}

fn submit(farm: &Farm, kind: Fixture, key: &str) -> String {
    let name = format!("{key}.src.mp4");
    farm.upload(&fixture(kind), "input", &name);
    farm.submit(
        &format!("s3://input/{name}"),
        &format!("s3://output/{key}"),
        json!({"preset": "medium"}),
        json!({"segment_seconds": 1}),
    )
}

#[test]
fn a_worker_cut_off_without_a_reset_loses_its_segment_to_another_and_recovers() {
    let mut farm = Farm::start("partition", 0);
    let part = Partition::new();
    let password = "partition-password-1";
    run(&["rabbitmqctl", "add_user", &part.user, password]);
    let vhost_path = farm
        .vhost
        .uri()
        .rsplit_once('/')
        .expect("vhost")
        .1
        .to_string();
    let vhost = vhost_path.replace("%2F", "/").replace("%2f", "/");
    run(&[
        "rabbitmqctl",
        "set_permissions",
        "-p",
        &vhost,
        &part.user,
        ".*",
        ".*",
        ".*",
    ]);
    let amqp = format!(
        "amqp://{}:{password}@{}:5672/{vhost_path}?heartbeat={HEARTBEAT_S}",
        part.user, part.host_addr
    );
    let store = farm
        .garage
        .endpoint
        .trim_start_matches("http://")
        .to_string();
    let s3 = format!(
        "http://{}:{}",
        part.host_addr,
        forward(&part.host_addr, store)
    );
    let wrapper = ["ip", "netns", "exec", part.ns.as_str()];
    let env = [
        ("TESSERA_AMQP_URL", amqp.as_str()),
        ("TESSERA_S3_ENDPOINT", s3.as_str()),
    ];
    farm.add_worker_via(0, &wrapper, &env, &[]);

    let id = submit(&farm, Fixture::Hd720Long, "partition.mp4");
    farm.wait_for_segment_in_progress(0, JOB_TIMEOUT);
    let segment = held_segment(&farm, 0, &id).expect("the segment worker 0 holds");
    part.cut();
    let cut_at = Instant::now();
    farm.add_worker(1);
    // The broker gives the segment to worker 1 once worker 0's heartbeats stop.
    let redelivered = loop {
        if held_segment(&farm, 1, &id) == Some(segment)
            || farm
                .log("worker-1.log")
                .contains(&format!("segment={segment} "))
        {
            break cut_at.elapsed();
        }
        assert!(
            cut_at.elapsed() < JOB_TIMEOUT,
            "segment {segment} never came back:\n{}",
            farm.log("worker-1.log")
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    println!("partition: segment {segment} redelivered {redelivered:?} after the cut");
    assert!(
        redelivered < Duration::from_secs(3 * HEARTBEAT_S + 5),
        "segment {segment} came back only after {redelivered:?}"
    );
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    farm.assert_frame_exact(&fixture(Fixture::Hd720Long), "partition.mp4");

    // The link returns: worker 0 reconnects and, alone on the farm, does the next job.
    part.heal();
    farm.signal_worker(1, "KILL");
    farm.wait_worker_exit(1, Duration::from_secs(10));
    let next = submit(&farm, Fixture::ClosedGopH264, "after-partition.mp4");
    let job = farm.wait_job(&next, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}\n{}", farm.log("worker-0.log"));
    farm.assert_frame_exact(&fixture(Fixture::ClosedGopH264), "after-partition.mp4");
    assert!(
        farm.worker_log_count(0, &["segment encoded", &next]) > 0,
        "worker 0 did not take work after the link returned:\n{}",
        farm.log("worker-0.log")
    );
}
