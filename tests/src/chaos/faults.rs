//! The faults of the chaos run and the rig that injects them: the farm with a door in front
//! of the store for the dispatcher and for each worker (S3 trouble, partitions, stalled
//! deliveries, refused copies and deletes), doors between the broker and the dispatcher
//! (partitions, messages published twice) and the workers (messages published twice), and the dispatcher's clock under libfaketime where it is installed.

use std::path::PathBuf;
use std::time::Duration;

use super::shape::Shape;
use crate::amqp_door::AmqpDoor;
use crate::farm::Farm;
use crate::fixture::Fixture;
use crate::rabbit::rabbit_addr;
use crate::s3_faults::{Direction, S3Faults, Trouble};

mod dispatcher;

/// One fault the schedule can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL a random worker, start a new one.
    KillWorker,
    /// SIGTERM a random worker (it drains), start a new one.
    DrainWorker,
    /// `rabbitmqctl stop_app`, a few seconds, `start_app` (or, sharing the broker, the farm's
    /// vhost closed and refused for as long).
    RestartBroker,
    /// Stop Garage for a while, then start it again.
    StopStore,
    /// SIGKILL the dispatcher and start it again on the same database.
    KillDispatcher,
    /// SIGSTOP a random worker for a while, then SIGCONT: it hangs without dying.
    HangWorker,
    /// Every other S3 request of every process answered `503 SlowDown` for a while.
    StoreSlowDown,
    /// Every other S3 request answered `429` for a while.
    StoreTooMany,
    /// Every S3 request delayed by 500 ms for a while.
    StoreLatency,
    /// A job whose second copy is refused (403) while its deletes answer 503 for 10 s: its
    /// rollback must remove the first output through the outage.
    RollbackDeletesFail,
    /// The dispatcher SIGKILLed while a copy of a delivery is in flight, then restarted.
    KillDispatcherDelivering,
    /// A package job submitted, and the dispatcher SIGKILLed in the middle of its many
    /// delivery copies (some delivered, one in flight), then restarted.
    KillDispatcherPackaging,
    /// As [`Fault::KillDispatcherPackaging`], then, 0 to 15 s later (wherever its resume
    /// is: stitch, cut, upload or copies), the resumed dispatcher killed again while the
    /// broker is down, and restarted like a supervisor would.
    KillDispatcherPackagingTwice,
    /// The broker stopped while the dispatcher is killed and restarted (overlapping).
    BrokerAndDispatcherRestart,
    /// A partition between the dispatcher and the store (requests, responses or both held).
    StorePartition(Direction),
    /// A partition between the dispatcher and the broker (AMQP heartbeat 5 s).
    BrokerPartition(Direction),
    /// One worker cut off from the store only (the broker still reachable).
    WorkerCutFromStore,
    /// Every message published twice for a while (tasks, stitches, events).
    DeliveredTwice,
    /// The dispatcher's wall clock jumps 2 h forward for a while, then back (monotonic
    /// clocks untouched, as with an NTP step).
    ClockJump,
}

/// Every fault, the first five in the order of the CI sample (which takes the first few).
pub const ALL: [Fault; 23] = [
    Fault::KillWorker,
    Fault::DrainWorker,
    Fault::RestartBroker,
    Fault::StopStore,
    Fault::KillDispatcher,
    Fault::HangWorker,
    Fault::StoreSlowDown,
    Fault::StoreTooMany,
    Fault::StoreLatency,
    Fault::RollbackDeletesFail,
    Fault::KillDispatcherDelivering,
    Fault::KillDispatcherPackaging,
    Fault::BrokerAndDispatcherRestart,
    Fault::StorePartition(Direction::Up),
    Fault::StorePartition(Direction::Down),
    Fault::StorePartition(Direction::Both),
    Fault::BrokerPartition(Direction::Up),
    Fault::BrokerPartition(Direction::Down),
    Fault::BrokerPartition(Direction::Both),
    Fault::WorkerCutFromStore,
    Fault::DeliveredTwice,
    Fault::ClockJump,
    Fault::KillDispatcherPackagingTwice,
];

/// Where libfaketime's multi-threaded library is looked for (Debian's `faketime` package),
/// unless `TESSERA_CHAOS_FAKETIME_LIB` names it.
const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// The farm and its doors, as the faults reach them.
pub struct Rig {
    /// The farm (started without workers; the rig adds them behind their doors).
    pub farm: Farm,
    /// The dispatcher's door to the store.
    pub store_door: S3Faults,
    /// Each worker's door to the store, by worker number.
    pub worker_doors: Vec<S3Faults>,
    /// The dispatcher's door to the broker.
    pub broker_door: AmqpDoor,
    /// The workers' door to the broker.
    pub workers_broker_door: AmqpDoor,
    /// libfaketime's offset file for the dispatcher, when its clock can jump.
    pub clock: Option<PathBuf>,
    /// Numbers of the workers running.
    pub live: Vec<usize>,
    /// Whether the broker restarts are real (`stop_app`) or the vhost's.
    pub restart_broker: bool,
    /// Seconds a store outage lasts; the other faults hold at most 15 s.
    pub outage_secs: u64,
    /// The jobs (by number) a fault is meant to fail: the rollback job, whose second copy
    /// is refused. Any other failed job is a bad outcome: every fault is transient, so a
    /// job must come through once it is over.
    pub may_fail: Vec<usize>,
}

impl Rig {
    /// A farm of `workers` workers with every door in place; the dispatcher's clock under
    /// libfaketime when `fake_clock` and the library is installed.
    pub fn start(workers: usize, fake_clock: bool) -> Rig {
        let mut farm = Farm::start("chaos", 0);
        let store_door = S3Faults::start(&farm.garage.endpoint);
        let broker_door = AmqpDoor::start(&rabbit_addr());
        let workers_broker_door = AmqpDoor::start(&rabbit_addr());
        let uri = broker_door.uri(&farm.vhost.uri(), &rabbit_addr());
        farm.set_dispatcher_env("TESSERA_S3_ENDPOINT", &store_door.endpoint);
        farm.set_dispatcher_env("TESSERA_AMQP_URL", &format!("{uri}?heartbeat=5"));
        let lib = std::env::var("TESSERA_CHAOS_FAKETIME_LIB").unwrap_or(FAKETIME_LIB.into());
        let clock = (fake_clock && std::path::Path::new(&lib).is_file()).then(|| {
            let file = farm.dir.path().join("faketime");
            std::fs::write(&file, "+0\n").expect("faketime file");
            for (k, v) in [
                ("LD_PRELOAD", lib.as_str()),
                ("FAKETIME_TIMESTAMP_FILE", &file.to_string_lossy()),
                ("FAKETIME_CACHE_DURATION", "1"),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
                ("DONT_FAKE_MONOTONIC", "1"),
            ] {
                farm.set_dispatcher_env(k, v);
            }
            file
        });
        farm.start_dispatcher();
        let mut rig = Rig {
            farm,
            store_door,
            worker_doors: Vec::new(),
            broker_door,
            workers_broker_door,
            clock,
            live: Vec::new(),
            restart_broker: false,
            outage_secs: 8,
            may_fail: Vec::new(),
        };
        for _ in 0..workers {
            rig.add_worker();
        }
        rig
    }

    /// Starts the next worker behind a door of its own.
    pub fn add_worker(&mut self) {
        let i = self.worker_doors.len();
        let door = S3Faults::start(&self.farm.garage.endpoint);
        let amqp = self
            .workers_broker_door
            .uri(&self.farm.vhost.uri(), &rabbit_addr());
        let env = [
            ("TESSERA_S3_ENDPOINT", door.endpoint.as_str()),
            ("TESSERA_AMQP_URL", amqp.as_str()),
        ];
        self.farm.add_worker_via(i, &[], &env, &[]);
        self.worker_doors.push(door);
        self.live.push(i);
    }

    fn hold(&self) -> Duration {
        Duration::from_secs(self.outage_secs.min(15))
    }

    fn pick(&mut self, rng: &mut impl FnMut(u64) -> u64) -> usize {
        self.live[rng(self.live.len() as u64) as usize]
    }

    /// Injects `fault`; `rng(n)` draws below `n`; `submit(farm)` submits a job and returns
    /// its number (for [`Fault::RollbackDeletesFail`]). Returns a note for the report.
    pub fn inject(
        &mut self,
        fault: Fault,
        rng: &mut impl FnMut(u64) -> u64,
        submit: &mut impl FnMut(&Farm, Shape) -> usize,
    ) -> String {
        match fault {
            Fault::KillWorker | Fault::DrainWorker => {
                let victim = self.pick(rng);
                self.live.retain(|w| *w != victim);
                let signal = if fault == Fault::KillWorker {
                    "KILL"
                } else {
                    "TERM"
                };
                self.farm.signal_worker(victim, signal);
                self.add_worker();
                format!("worker {victim} {signal}")
            }
            Fault::RestartBroker => {
                self.broker_down();
                std::thread::sleep(Duration::from_secs(3));
                self.broker_up();
                "broker down 3 s".into()
            }
            Fault::StopStore => {
                self.farm.garage.stop();
                std::thread::sleep(Duration::from_secs(self.outage_secs));
                self.farm.garage.restart();
                format!("Garage stopped {} s", self.outage_secs)
            }
            Fault::KillDispatcher => {
                self.farm.kill_dispatcher();
                self.farm.start_dispatcher();
                "dispatcher KILL".into()
            }
            Fault::HangWorker => {
                let victim = self.pick(rng);
                self.farm.signal_worker(victim, "STOP");
                std::thread::sleep(self.hold());
                self.farm.signal_worker(victim, "CONT");
                format!("worker {victim} STOP {} s, CONT", self.hold().as_secs())
            }
            Fault::StoreSlowDown | Fault::StoreTooMany | Fault::StoreLatency => {
                self.store_trouble(fault)
            }
            Fault::RollbackDeletesFail => self.rollback_job(submit),
            Fault::KillDispatcherDelivering => self.kill_while_delivering(),
            Fault::KillDispatcherPackaging => self.kill_while_packaging(submit),
            Fault::KillDispatcherPackagingTwice => {
                let first = self.kill_while_packaging(submit);
                let later = Duration::from_millis(rng(31) * 500);
                std::thread::sleep(later);
                let second = self.broker_and_dispatcher();
                format!("{first}; {} ms later: {second}", later.as_millis())
            }
            Fault::BrokerAndDispatcherRestart => self.broker_and_dispatcher(),
            Fault::StorePartition(way) => {
                self.store_door.cut(way);
                std::thread::sleep(self.hold());
                self.store_door.mend();
                format!("dispatcher-store {way:?} held {} s", self.hold().as_secs())
            }
            Fault::BrokerPartition(way) => {
                self.broker_door.partition(way);
                std::thread::sleep(self.hold());
                self.broker_door.heal();
                format!("dispatcher-broker {way:?} held {} s", self.hold().as_secs())
            }
            Fault::WorkerCutFromStore => {
                let victim = self.pick(rng);
                self.worker_doors[victim].cut(Direction::Both);
                std::thread::sleep(self.hold());
                self.worker_doors[victim].mend();
                format!(
                    "worker {victim} cut from the store {} s",
                    self.hold().as_secs()
                )
            }
            Fault::DeliveredTwice => {
                let doors = [&self.broker_door, &self.workers_broker_door];
                doors.iter().for_each(|d| d.twice(true));
                std::thread::sleep(self.hold());
                doors.iter().for_each(|d| d.twice(false));
                let n: usize = doors.iter().map(|d| d.duplicated()).sum();
                format!(
                    "every message published twice for {} s ({n} so far)",
                    self.hold().as_secs()
                )
            }
            Fault::ClockJump => self.clock_jump(),
        }
    }

    /// Submits a job whose delivery is refused part way (its second copy) while deletes
    /// answer 503 for 10 s: it must fail and take back its first output. The one job a
    /// fault is meant to fail.
    fn rollback_job(&mut self, submit: &mut impl FnMut(&Farm, Shape) -> usize) -> String {
        let i = submit(&self.farm, Shape::Files(Fixture::ClosedGopH264));
        self.may_fail.push(i);
        let prefix = format!("/output/chaos/{i}/");
        self.store_door.refuse_copies(&prefix, 1);
        (self.store_door).unavailable_deletes(&prefix, Duration::from_secs(10));
        format!("job {i}: second copy refused, deletes 503 for 10 s")
    }

    fn store_trouble(&mut self, fault: Fault) -> String {
        let trouble = match fault {
            Fault::StoreSlowDown => Trouble::SlowDown,
            Fault::StoreTooMany => Trouble::TooMany,
            _ => Trouble::Latency(Duration::from_millis(500)),
        };
        let doors = std::iter::once(&self.store_door).chain(&self.worker_doors);
        let before: usize = doors.clone().map(S3Faults::troubled).sum();
        for door in doors.clone() {
            door.trouble(trouble, self.hold());
        }
        std::thread::sleep(self.hold());
        let hit = doors.map(S3Faults::troubled).sum::<usize>() - before;
        format!(
            "{trouble:?} {} s ({hit} requests met it)",
            self.hold().as_secs()
        )
    }
}
