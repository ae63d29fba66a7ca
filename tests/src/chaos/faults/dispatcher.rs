//! The faults that reach the dispatcher and the broker: the dispatcher killed inside a
//! delivery (one copy, or a package's many), the broker and the dispatcher down together,
//! the dispatcher's clock jumping. Why apart: each is a sequence of steps with waits,
//! where the faults of `faults.rs` are one switch each.

use std::time::{Duration, Instant};

use super::Rig;
use crate::chaos::shape::Shape;
use crate::farm::Farm;
use crate::fixture::Fixture;
use crate::rabbit::rabbitmqctl;

impl Rig {
    pub(super) fn kill_while_delivering(&mut self) -> String {
        self.store_door.stall_copies("/output/chaos/");
        let by = Instant::now() + Duration::from_secs(60);
        while self.store_door.stalled().is_empty() && Instant::now() < by {
            std::thread::sleep(Duration::from_millis(100));
        }
        let caught = self.store_door.stalled();
        self.farm.kill_dispatcher();
        self.store_door.end_stall();
        self.farm.start_dispatcher();
        match caught.first() {
            Some(copy) => format!("dispatcher KILL with the copy to {copy} in flight"),
            None => "dispatcher KILL (no delivery came within 60 s)".into(),
        }
    }

    /// Submits a package job, holds its delivery once five of its copies went through, and
    /// kills the dispatcher with the sixth in flight; the restarted one must finish the
    /// package, not undo it (a delivering job never goes back).
    pub(super) fn kill_while_packaging(
        &mut self,
        submit: &mut impl FnMut(&Farm, Shape) -> usize,
    ) -> String {
        let i = submit(&self.farm, Shape::Package(Fixture::ClosedGopH264));
        self.store_door
            .stall_copies_after(&format!("/output/chaos/{i}/pkg/"), 5);
        // The package is encoded first, beside the other jobs on busy workers.
        let by = Instant::now() + Duration::from_secs(300);
        while self.store_door.stalled().is_empty() && Instant::now() < by {
            std::thread::sleep(Duration::from_millis(100));
        }
        let caught = self.store_door.stalled();
        let delivered = self.farm.list("output", &format!("chaos/{i}/pkg/")).len();
        self.farm.kill_dispatcher();
        self.store_door.end_stall();
        self.farm.start_dispatcher();
        match caught.first() {
            Some(copy) => format!(
                "job {i}: dispatcher KILL with {delivered} package files delivered and the \
                 copy to {copy} in flight"
            ),
            None => {
                format!("job {i}: dispatcher KILL (its package was not delivering within 300 s)")
            }
        }
    }

    pub(super) fn broker_and_dispatcher(&mut self) -> String {
        self.farm.kill_dispatcher();
        self.broker_down();
        let (real, name) = (self.restart_broker, self.farm.vhost.name.clone());
        let up = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(3));
            if real {
                rabbitmqctl(&["start_app"]).assert_success();
            } else {
                rabbitmqctl(&["clear_vhost_limits", "-p", &name]).assert_success();
            }
        });
        // The dispatcher exits when it cannot reach the broker at its start; like its
        // supervisor (systemd, Kubernetes, compose's `restart: unless-stopped`), start it
        // again a second later until it listens.
        let mut exits = 0;
        while !self.farm.try_start_dispatcher() {
            exits += 1;
            assert!(
                exits < 60,
                "the dispatcher never started after the broker came back"
            );
            std::thread::sleep(Duration::from_secs(1));
        }
        up.join().expect("broker back");
        format!(
            "dispatcher KILL and restarted while the broker was down 3 s \
             (it exited {exits} times at start; started again like a supervisor)"
        )
    }

    pub(super) fn broker_down(&self) {
        if self.restart_broker {
            rabbitmqctl(&["stop_app"]).assert_success();
        } else {
            // Tests of other binaries may share the broker (nextest runs them at once): as
            // this farm's clients see it, a blocked vhost is a broker that went away.
            self.farm.vhost.block();
        }
    }

    pub(super) fn broker_up(&self) {
        if self.restart_broker {
            rabbitmqctl(&["start_app"]).assert_success();
        } else {
            self.farm.vhost.unblock();
        }
    }

    pub(super) fn clock_jump(&mut self) -> String {
        let Some(file) = &self.clock else {
            return "skipped: libfaketime not installed (apt-get install faketime)".into();
        };
        std::fs::write(file, "+7200\n").expect("faketime file");
        // libfaketime reads the file again after a second; the API's Date header shows it.
        std::thread::sleep(Duration::from_secs(3));
        let seen = self.api_date();
        std::thread::sleep(self.hold().saturating_sub(Duration::from_secs(3)));
        std::fs::write(file, "+0\n").expect("faketime file");
        let hold = self.hold().as_secs();
        format!("dispatcher clock +2 h for {hold} s, then back (its Date header then: {seen})")
    }

    /// The `Date` header of the dispatcher's API (its wall clock), or why none came.
    pub(super) fn api_date(&self) -> String {
        let out = std::process::Command::new("curl")
            .args(["-sS", "-m", "10", "-o", "/dev/null", "-D", "-"])
            .arg(format!("{}/healthz", self.farm.api))
            .output();
        let head = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
        head.ok()
            .and_then(|h| {
                h.lines()
                    .find_map(|l| l.strip_prefix("date: ").or(l.strip_prefix("Date: ")))
                    .map(|d| d.trim().to_string())
            })
            .unwrap_or_else(|| "no Date header".into())
    }
}
