//! A rolling upgrade of the compose farm (`docker/compose.yaml`) under load, from an older
//! release's images to this tree's: the dispatcher replaced while old workers hold tasks, the
//! dispatcher rolled back while the workers are replaced one by one (each old one drained by
//! SIGTERM), then the new dispatcher again.
//!
//! Why: a farm is upgraded in place, with jobs in flight, one component at a time, so for a
//! while an old dispatcher talks to new workers and a new dispatcher to old workers, over the
//! same queues, the same work area and the same job database. What one version writes the
//! other must read; this drives that on real containers. `scripts/rolling-upgrade.sh` builds
//! the two sets of images (`tessera/{dispatcher,worker,cli}:upgrade-old` and `:upgrade-new`);
//! [`load`] keeps jobs flowing and checks what they produced.
//!
//! The compose file is used as it is: which release a service runs is `TESSERA_VERSION` at the
//! `compose up` that (re)creates its containers, so one `up --no-deps dispatcher` switches the
//! dispatcher, and `up --no-deps --no-recreate --scale worker=N+1 worker` adds a worker of the
//! new release beside the old ones, which are then stopped one at a time.

pub mod load;
pub mod report;

use std::time::{Duration, Instant};

use crate::docker_farm::{docker, docker_ok, Compose};
use crate::run::Run;

/// Limit of one `compose` command (a worker's drain may take its whole grace period).
const COMPOSE_TIMEOUT: Duration = Duration::from_secs(300);
/// A draining worker's limit, as compose's `stop_grace_period` for `worker`.
const DRAIN_LIMIT_S: u64 = 110;

/// The compose farm of one upgrade: a [`Compose`] project of its own (`tessera-upgrade<pid>`,
/// free ports), the two image tags, and how many workers it runs.
pub struct Upgrade {
    /// The compose project (secrets, ports, S3 access; taken down on drop).
    pub farm: Compose,
    /// The tag of the older release's images.
    pub old: String,
    /// The tag of this tree's images.
    pub new: String,
    /// The dispatcher's `TESSERA_SEGMENT_SECONDS`.
    segment_seconds: u32,
}

/// One worker replaced: the old container drained by SIGTERM and how it went.
#[derive(Debug, Clone)]
pub struct Rolled {
    /// The old container (12 characters of its id).
    pub container: String,
    /// Its exit code after `docker stop` (0: drained cleanly).
    pub exit_code: String,
    /// Seconds from SIGTERM to its exit.
    pub drain_s: u64,
}

impl Upgrade {
    /// A compose project of its own for images `tessera/*:{old}` and `tessera/*:{new}`.
    /// Panics when no Docker engine answers or an image is missing.
    pub fn prepare(old: &str, new: &str, segment_seconds: u32) -> Upgrade {
        let mut farm = Compose::prepare();
        farm.project = format!("tessera-upgrade{}", std::process::id());
        for tag in [old, new] {
            for image in ["dispatcher", "worker", "cli"] {
                let name = format!("tessera/{image}:{tag}");
                let found = docker(&["image", "inspect", &name]).status.success();
                assert!(
                    found,
                    "image {name} is missing: scripts/rolling-upgrade.sh builds it"
                );
            }
        }
        Upgrade {
            farm,
            old: old.to_string(),
            new: new.to_string(),
            segment_seconds,
        }
    }

    /// Runs `compose -f compose.yaml -p PROJECT ARGS` with `TESSERA_VERSION=version` (the
    /// release the containers it creates run), the farm's ports, its segment length and
    /// parallelism 2 (two workers of one slot).
    pub fn compose(&self, version: &str, args: &[&str]) -> Run {
        let seconds = self.segment_seconds.to_string();
        let env = [
            ("TESSERA_VERSION", version),
            ("TESSERA_SEGMENT_SECONDS", seconds.as_str()),
            ("TESSERA_PARALLELISM", "2"),
        ];
        let run = self.farm.compose_with(args, &env, COMPOSE_TIMEOUT);
        assert!(
            run.status.success() && !run.timed_out,
            "compose {args:?} (TESSERA_VERSION={version}) failed\n{}",
            run.describe()
        );
        run
    }

    /// The whole farm on the old release with `workers` CPU workers; waits for the API.
    pub fn up_old(&self, workers: usize) {
        let scale = format!("worker={workers}");
        self.compose(&self.old, &["up", "-d", "--scale", &scale]);
        self.farm.wait_api();
    }

    /// Replaces the dispatcher by one of release `tag` (compose stops the running one with
    /// SIGTERM, its database stays on its volume) and waits for the API; the seconds the API
    /// was away.
    pub fn switch_dispatcher(&self, tag: &str) -> f64 {
        let started = Instant::now();
        self.compose(tag, &["up", "-d", "--no-deps", "dispatcher"]);
        self.farm.wait_api();
        let images = self.images("dispatcher");
        let want = format!("tessera/dispatcher:{tag}");
        assert_eq!(images, vec![want], "the dispatcher runs another image");
        started.elapsed().as_secs_f64()
    }

    /// Replaces one old worker: first starts a worker of the new release beside it (the
    /// farm never has fewer workers), then stops the old one with `docker stop` (SIGTERM: it
    /// drains) and removes it. None when no old worker is left.
    pub fn roll_one_worker(&self) -> Option<Rolled> {
        let old_image = format!("tessera/worker:{}", self.old);
        let running = self.workers();
        let (old, _) = running.iter().find(|(_, image)| *image == old_image)?;
        let scale = format!("worker={}", running.len() + 1);
        let args = [
            "up",
            "-d",
            "--no-deps",
            "--no-recreate",
            "--scale",
            &scale,
            "worker",
        ];
        self.compose(&self.new, &args);
        let started = Instant::now();
        let limit = DRAIN_LIMIT_S.to_string();
        docker_ok(&["stop", "-t", &limit, old]);
        let drain_s = started.elapsed().as_secs();
        let exit_code = docker_ok(&["inspect", "-f", "{{.State.ExitCode}}", old]);
        docker_ok(&["rm", old]);
        Some(Rolled {
            container: old.chars().take(12).collect(),
            exit_code,
            drain_s,
        })
    }

    /// The running workers: (container id, image).
    pub fn workers(&self) -> Vec<(String, String)> {
        self.farm
            .containers("worker")
            .into_iter()
            .map(|id| {
                let image = docker_ok(&["inspect", "-f", "{{.Config.Image}}", &id]);
                (id, image)
            })
            .collect()
    }

    /// The images of `service`'s running containers, sorted.
    pub fn images(&self, service: &str) -> Vec<String> {
        let mut images: Vec<String> = self
            .farm
            .containers(service)
            .iter()
            .map(|id| docker_ok(&["inspect", "-f", "{{.Config.Image}}", id]))
            .collect();
        images.sort();
        images
    }

    /// Messages in the broker's queues (`rabbitmqctl list_queues` in its container): name and
    /// count, the dead-letter queues among them.
    pub fn queue_depths(&self) -> Vec<(String, u64)> {
        let Some(rabbit) = self.farm.containers("rabbitmq").into_iter().next() else {
            return Vec::new();
        };
        let args = [
            "exec",
            &rabbit,
            "rabbitmqctl",
            "-q",
            "list_queues",
            "name",
            "messages",
        ];
        let run = docker(&args);
        parse_queue_depths(&run.stdout)
    }
}

/// Rows `name<TAB>count` of `rabbitmqctl -q list_queues name messages`, sorted by name; the
/// header and lines that are not such rows are skipped.
pub fn parse_queue_depths(text: &str) -> Vec<(String, u64)> {
    let mut rows: Vec<(String, u64)> = text
        .lines()
        .filter_map(|line| {
            let (name, count) = line.trim().rsplit_once(char::is_whitespace)?;
            Some((name.trim().to_string(), count.trim().parse().ok()?))
        })
        .collect();
    rows.sort();
    rows
}

#[cfg(test)]
mod tests {
    use super::parse_queue_depths;

    #[test]
    fn queue_depths_are_read_from_rabbitmqctl() {
        let text = "name\tmessages\ntessera.events.dead\t3\ntessera.encode.cpu\t0\n";
        assert_eq!(
            parse_queue_depths(text),
            vec![
                ("tessera.encode.cpu".to_string(), 0),
                ("tessera.events.dead".to_string(), 3)
            ]
        );
    }
}
