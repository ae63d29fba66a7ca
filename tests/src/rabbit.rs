//! The real RabbitMQ broker for tests: a fresh vhost per test, removed afterwards.
//!
//! Why: queue tests must run against the broker the farm uses (by default Debian 12's
//! RabbitMQ 3.10 at 127.0.0.1:5672, guest/guest) without seeing each other's queues; a vhost
//! per test gives each its own namespace, and deleting it cleans up queues, exchanges and
//! connections.
//!
//! Another broker (RabbitMQ 4.x in a container: `scripts/rabbit4.sh start`) is chosen by
//! `TESSERA_TEST_RABBIT_ADDR` (its AMQP address) and `TESSERA_TEST_RABBITMQCTL` (the command
//! that runs its `rabbitmqctl`, e.g. `docker exec tessera-rabbit4 rabbitmqctl`); such a
//! broker must already run, the tests never start it.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tessera_farm::queue::RabbitConfig;

use crate::run::{run_command, Run};

/// The default broker's AMQP address.
const DEFAULT_ADDR: &str = "127.0.0.1:5672";
/// The variable naming another broker's AMQP address.
pub const ADDR_ENV: &str = "TESSERA_TEST_RABBIT_ADDR";
/// The variable naming the command that runs that broker's `rabbitmqctl`.
pub const CTL_ENV: &str = "TESSERA_TEST_RABBITMQCTL";

/// The broker's AMQP address (`host:port`).
pub fn rabbit_addr() -> String {
    std::env::var(ADDR_ENV)
        .ok()
        .filter(|a| !a.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_ADDR.to_string())
}

/// Whether the tests run against a broker named by [`ADDR_ENV`] rather than the local one.
pub fn other_broker() -> bool {
    rabbit_addr() != DEFAULT_ADDR
}
/// Limit for one `rabbitmqctl` call.
const CTL_TIMEOUT: Duration = Duration::from_secs(60);
/// Limit for the broker to start.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Serialises the "is it running, else start it" check between the tests of one binary.
static BROKER: Mutex<bool> = Mutex::new(false);
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Runs the broker's `rabbitmqctl` ([`CTL_ENV`], else the local one) with a timeout.
pub fn rabbitmqctl(args: &[&str]) -> Run {
    let command = std::env::var(CTL_ENV).unwrap_or_default();
    let mut words = command.split_whitespace();
    let Some(program) = words.next() else {
        return run_command(Path::new("rabbitmqctl"), args, CTL_TIMEOUT);
    };
    let all: Vec<&str> = words.chain(args.iter().copied()).collect();
    run_command(Path::new(program), &all, CTL_TIMEOUT)
}

fn broker_listening() -> bool {
    let addr: SocketAddr = rabbit_addr().parse().expect("broker address");
    TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok()
}

/// Makes sure the broker runs: starts it with `rabbitmq-server -detached` and waits for
/// `rabbitmqctl await_startup` if nothing listens on 5672. Panics if it cannot be started.
pub fn ensure_broker() {
    let mut ready = BROKER.lock().unwrap_or_else(|p| p.into_inner());
    if *ready || broker_listening() {
        *ready = true;
        return;
    }
    assert!(
        !other_broker(),
        "no broker answers at {} ({ADDR_ENV}): start it first (scripts/rabbit4.sh start)",
        rabbit_addr()
    );
    let start = run_command(
        Path::new("rabbitmq-server"),
        ["-detached"],
        Duration::from_secs(60),
    );
    assert!(
        start.status.success(),
        "cannot start RabbitMQ\n{}",
        start.describe()
    );
    let timeout = START_TIMEOUT.as_secs().to_string();
    rabbitmqctl(&["await_startup", "--timeout", &timeout]).assert_success();
    let deadline = Instant::now() + START_TIMEOUT;
    while !broker_listening() {
        assert!(
            Instant::now() < deadline,
            "RabbitMQ does not listen on {DEFAULT_ADDR}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    *ready = true;
}

/// A vhost of its own on the real broker, deleted (with everything in it) on drop.
#[derive(Debug)]
pub struct TestVhost {
    /// The vhost name (letters, digits and `-` only, so it needs no URI encoding).
    pub name: String,
}

impl TestVhost {
    /// Creates `tessera-<tag>-<pid>-<n>-<time>` and gives `guest` full permissions on it.
    pub fn new(tag: &str) -> Self {
        ensure_broker();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "tessera-{tag}-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        // Drop removes the vhost even if creating it fails half-way.
        let vhost = TestVhost { name };
        vhost.create();
        vhost
    }

    /// (Re)creates the vhost with full permissions for `guest`.
    pub fn create(&self) {
        rabbitmqctl(&["add_vhost", &self.name]).assert_success();
        let perms = [
            "set_permissions",
            "-p",
            &self.name,
            "guest",
            ".*",
            ".*",
            ".*",
        ];
        rabbitmqctl(&perms).assert_success();
    }

    /// Deletes the vhost now (its queues, and the connections to it, go with it); `create`
    /// brings back an empty one.
    pub fn delete(&self) {
        rabbitmqctl(&["delete_vhost", &self.name]).assert_success();
    }

    /// The AMQP URI of this vhost as `guest`.
    pub fn uri(&self) -> String {
        self.uri_with_password("guest")
    }

    /// The AMQP URI of this vhost as `guest` with another password (to test refusals).
    pub fn uri_with_password(&self, password: &str) -> String {
        format!("amqp://guest:{password}@{}/{}", rabbit_addr(), self.name)
    }

    /// A queue config for this vhost with short timeouts for tests.
    /// `delivery_limit` is both the own-failure and the lost limit: the queue layer's tests
    /// count the broker's deliveries.
    pub fn config(&self, delivery_limit: u32) -> RabbitConfig {
        let mut cfg = RabbitConfig::new(self.uri());
        cfg.delivery_limit = delivery_limit;
        cfg.lost_limit = delivery_limit;
        cfg.connect_timeout = Duration::from_secs(10);
        cfg.op_timeout = Duration::from_secs(10);
        cfg
    }

    /// `name<TAB>type<TAB>arguments` of every queue in the vhost, one line each (to check the
    /// declared topology as the broker sees it).
    pub fn list_queues(&self) -> String {
        let args = [
            "list_queues",
            "-p",
            &self.name,
            "--silent",
            "name",
            "type",
            "arguments",
        ];
        let run = rabbitmqctl(&args);
        run.assert_success();
        run.stdout
    }

    /// `rabbitmqctl list_connections` of this vhost with the given info items, one line per
    /// connection, tab-separated (e.g. `["timeout"]` for the negotiated heartbeat).
    ///
    /// `list_connections` ignores `-p` and lists every vhost's connections, so this asks for
    /// the `vhost` item too and keeps only this vhost's lines (without that column).
    pub fn list_connections(&self, items: &[&str]) -> String {
        let mut args = vec!["list_connections", "--silent", "vhost"];
        args.extend_from_slice(items);
        let run = rabbitmqctl(&args);
        run.assert_success();
        run.stdout
            .lines()
            .map(|l| l.split_once('\t').unwrap_or((l, "")))
            .filter(|(vhost, _)| *vhost == self.name)
            .map(|(_, rest)| format!("{rest}\n"))
            .collect()
    }

    /// Deletes `queue` of this vhost, as a broker restart deletes its non-durable queues.
    pub fn delete_queue(&self, queue: &str) {
        rabbitmqctl(&["delete_queue", "-p", &self.name, queue]).assert_success();
    }

    /// Has the broker close every client connection to this vhost (a network failure as the
    /// client sees it).
    pub fn close_connections(&self) {
        rabbitmqctl(&[
            "close_all_connections",
            "--vhost",
            &self.name,
            "tessera test: simulated connection loss",
        ])
        .assert_success();
    }
}

/// Outages of this vhost only (the shared broker keeps running for other tests).
impl TestVhost {
    /// Refuses new client connections to this vhost (`max-connections` 0) and closes the
    /// open ones: as the clients see it, the broker is gone until [`TestVhost::unblock`].
    pub fn block(&self) {
        let limits = [
            "set_vhost_limits",
            "-p",
            &self.name,
            r#"{"max-connections": 0}"#,
        ];
        rabbitmqctl(&limits).assert_success();
        self.close_connections();
    }

    /// Lets clients connect to this vhost again after [`TestVhost::block`].
    pub fn unblock(&self) {
        rabbitmqctl(&["clear_vhost_limits", "-p", &self.name]).assert_success();
    }

    /// Empties `queue` of its ready messages (`rabbitmqctl purge_queue`): messages lost
    /// without being dead-lettered, as an operator's purge or a broker's data loss does.
    pub fn purge(&self, queue: &str) {
        rabbitmqctl(&["purge_queue", "-p", &self.name, queue]).assert_success();
    }

    /// Ready messages in `queue` (`rabbitmqctl list_queues`; 0 for a queue not declared).
    pub fn ready(&self, queue: &str) -> u64 {
        self.queue_column(queue, "messages_ready")
    }

    /// Consumers attached to `queue` now (0 for a queue not declared): whether every
    /// worker's consumer is back after an outage, before work is given to them.
    pub fn consumers(&self, queue: &str) -> u64 {
        self.queue_column(queue, "consumers")
    }

    /// Waits up to `timeout` until `queue` has at least `want` consumers (workers connected
    /// and consuming); on timeout, the count it had.
    pub fn wait_for_consumers(
        &self,
        queue: &str,
        want: u64,
        timeout: std::time::Duration,
    ) -> Result<(), u64> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let have = self.consumers(queue);
            if have >= want {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(have);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// One numeric column of `rabbitmqctl list_queues` for `queue`; 0 when it is not declared.
    fn queue_column(&self, queue: &str, column: &str) -> u64 {
        self.queue_info(queue, column)
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// One column of `rabbitmqctl list_queues` for `queue` as the broker prints it
    /// (`durable` gives `true`/`false`); `None` when the queue is not declared.
    pub fn queue_info(&self, queue: &str, column: &str) -> Option<String> {
        let run = rabbitmqctl(&["list_queues", "-p", &self.name, "--silent", "name", column]);
        run.assert_success();
        run.stdout
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .find(|(name, _)| *name == queue)
            .map(|(_, value)| value.trim().to_string())
    }

    /// How many client connections this vhost has now.
    pub fn connection_count(&self) -> usize {
        self.list_connections(&["name"]).lines().count()
    }
}

impl Drop for TestVhost {
    fn drop(&mut self) {
        let run = rabbitmqctl(&["delete_vhost", &self.name]);
        if !run.status.success() {
            eprintln!("could not delete vhost {}\n{}", self.name, run.describe());
        }
    }
}

/// How long something expected from the broker may take to arrive.
pub const ARRIVE: Duration = Duration::from_secs(15);

/// A queue connection to `vhost` with `delivery_limit` (both limits, [`TestVhost::config`]).
pub async fn connect(vhost: &TestVhost, delivery_limit: u32) -> tessera_farm::queue::RabbitQueue {
    tessera_farm::queue::RabbitQueue::connect(vhost.config(delivery_limit))
        .await
        .expect("connect to RabbitMQ")
}

/// The next delivery, which must arrive within [`ARRIVE`].
pub async fn next(c: &mut Box<dyn tessera_farm::queue::Consumer>) -> tessera_farm::queue::Delivery {
    tokio::time::timeout(ARRIVE, c.next())
        .await
        .expect("no delivery in time")
        .expect("consumer failed")
        .expect("consumer ended")
}

/// Polls `ready_len` until it equals `want` (dead-lettering and requeues are asynchronous).
pub async fn wait_ready_len(q: &tessera_farm::queue::RabbitQueue, queue: &str, want: u32) {
    let deadline = Instant::now() + ARRIVE;
    loop {
        let n = q.ready_len(queue).await.expect("ready_len");
        if n == want {
            return;
        }
        assert!(Instant::now() < deadline, "{queue}: {n} ready, want {want}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
