"""The replay's control loop: every pollingInterval it reads the triggers' metrics from the
running farm, asks the scaler for the replica count, and makes the compose `worker` service
match it as a ReplicaSet would, except that a scale-down only ever drains (SIGTERM, idle
workers first) and waits; it never kills. Spot notices reach busy workers through the IMDS
stand-in; a noticed worker is replaced at once, like a pod on a reclaimed node.

Why its own thread: jobs are submitted, followed and restarted (the dispatcher) meanwhile.

Driver modules: farm.py (the compose project), imds.py (spot notices), store.py (S3 reads),
exact.py (frame checks), batch.py (inputs, jobs), report.py (log checks and figures),
__main__.py (the replay end to end).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from .farm import WORKER_METRICS_PORT, Farm, Worker
from .imds import Imds
from .scaler import Scaler
from .triggers import ScalerSpec, Trigger

HTTP_TIMEOUT = 5


@dataclass
class Gone:
    """A worker container that exited: how long it lived, why it left, its log."""
    name: str
    started: float
    finished: float
    exit_code: int
    reason: str
    log: str
    drain_seconds: float = 0.0


@dataclass
class State:
    """What the loop did, for the report."""
    gone: List[Gone] = field(default_factory=list)
    changes: List[str] = field(default_factory=list)
    peak: int = 0
    spot_notices: int = 0
    scale_down_drains: int = 0
    busy_drains: List[str] = field(default_factory=list)
    zero_reached: List[float] = field(default_factory=list)


class Driver:
    """Scales `farm`'s workers by `spec` until stopped."""

    def __init__(self, farm: Farm, spec: ScalerSpec, imds: Imds, spot_lead: float,
                 say: Callable[[str], None]):
        self.farm, self.spec, self.imds, self.say = farm, spec, imds, say
        self.scaler = Scaler(spec)
        self.spot_lead = spot_lead
        self.replicas = 0
        self.leaving: Dict[str, str] = {}
        # The address each noticed worker polled from: an exited container shows none, and
        # the next container may get it.
        self.noticed_ip: Dict[str, str] = {}
        self.asked_at: Dict[str, float] = {}
        self.spots_wanted = 0
        self.state = State()
        self.t0 = time.monotonic()
        self.stop = threading.Event()
        self.error: Optional[BaseException] = None
        user = farm.secret("rabbitmq.env", "RABBITMQ_DEFAULT_USER")
        password = farm.secret("rabbitmq.env", "RABBITMQ_DEFAULT_PASS")
        self.mgmt_auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        """Starts polling on its own thread."""
        self.thread.start()

    def spot(self, n: int = 1) -> None:
        """Give `n` more busy workers a spot notice, as soon as some are busy."""
        self.spots_wanted += n

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                began = time.monotonic()
                self.poll()
                self.stop.wait(max(0.0, self.spec.polling - (time.monotonic() - began)))
        except BaseException as e:  # reported by the main thread
            self.error = e

    # --- metrics -----------------------------------------------------------------------------

    def _get_json(self, url: str, auth: Optional[str] = None) -> Optional[dict]:
        req = urllib.request.Request(url, headers={"Authorization": auth} if auth else {})
        try:
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def metric(self, t: Trigger) -> Optional[float]:
        """The trigger's metric as KEDA reads it; None when it cannot be read."""
        if t.kind == "rabbitmq":
            q = urllib.parse.quote(t.source, safe="")
            v = self._get_json(f"http://127.0.0.1:{self.farm.ports['mgmt']}/api/queues/%2F/{q}",
                               self.mgmt_auth)
            # protocol http: `messages` = ready + unacknowledged.
            return None if v is None or "messages" not in v else float(v["messages"])
        # metrics-api: the manifest names the in-cluster Service; here the farm's API port.
        path = urllib.parse.urlparse(t.url or "").path
        v = self._get_json(f"http://127.0.0.1:{self.farm.ports['api']}{path}")
        for part in t.source.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        return None if v is None else float(v)

    def running_tasks(self, w: Worker) -> int:
        """tessera_worker_tasks_running of a worker's /metrics (0 when unreadable: starting)."""
        try:
            with urllib.request.urlopen(f"http://{w.ip}:{WORKER_METRICS_PORT}/metrics",
                                        timeout=HTTP_TIMEOUT) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("tessera_worker_tasks_running"):
                        return int(float(line.split()[-1]))
        except (OSError, ValueError):
            pass
        return 0

    def draining(self, w: Worker) -> bool:
        """Whether a worker's /readyz answers 503 (it drains: it has seen its notice)."""
        try:
            with urllib.request.urlopen(f"http://{w.ip}:{WORKER_METRICS_PORT}/readyz",
                                        timeout=HTTP_TIMEOUT):
                return False
        except urllib.error.HTTPError as e:
            return e.code == 503
        except OSError:
            return False

    # --- one poll ----------------------------------------------------------------------------

    def now(self) -> float:
        """Seconds since the driver was made: the scaler's clock."""
        return time.monotonic() - self.t0

    def poll(self) -> None:
        """One pollingInterval: metrics, the scaler's decision, then the workers to match."""
        metrics = {t.name: self.metric(t) for t in self.spec.triggers}
        d = self.scaler.step(self.now(), metrics, self.replicas)
        if d.replicas != self.replicas:
            shown = " ".join(f"{k}={'?' if v is None else int(v)}" for k, v in metrics.items())
            line = f"t={self.now():6.1f}s replicas {self.replicas} -> {d.replicas} ({d.reason}; {shown})"
            self.state.changes.append(line)
            self.say(line)
            if d.replicas == 0:
                self.state.zero_reached.append(self.now())
            self.replicas = d.replicas
        self.reconcile()

    def reconcile(self) -> None:
        """Reaps exited workers, then starts or drains workers until `replicas` stay."""
        workers = self.farm.workers()
        for w in workers:
            if not w.running and w.finished is not None:
                self._reap(w)
        running = [w for w in workers if w.running]
        # A noticed worker that drains has seen its notice: it is withdrawn, so that no later
        # container on the same address finds it.
        for w in running:
            if w.id in self.noticed_ip and self.draining(w):
                self.imds.forget(self.noticed_ip.pop(w.id))
        live = [w for w in running if w.id not in self.leaving]
        self.state.peak = max(self.state.peak, len(running))
        if self.spots_wanted:
            live = self._spot_notices(live)
        if len(live) < self.replicas:
            self.farm.scale_up(self.replicas - len(live))
        elif len(live) > self.replicas:
            busy = {w.id: self.running_tasks(w) for w in live}
            for w in sorted(live, key=lambda w: busy[w.id])[: len(live) - self.replicas]:
                self.say(f"t={self.now():6.1f}s drain {w.name} ({busy[w.id]} tasks running): SIGTERM")
                self.leaving[w.id] = "scale-down"
                self.asked_at[w.id] = time.time()
                self.state.scale_down_drains += 1
                if busy[w.id]:
                    self.state.busy_drains.append(
                        f"{w.name} at t={self.now():.0f}s (to {self.replicas} replicas)")
                self.farm.terminate(w.id)

    def _spot_notices(self, live: List[Worker]) -> List[Worker]:
        for w in live:
            if self.spots_wanted and self.imds.has_polled(w.ip) and self.running_tasks(w) > 0:
                self.say(f"t={self.now():6.1f}s spot notice to {w.name} (busy), "
                         f"{self.spot_lead:.0f} s before the machine goes")
                self.imds.notice(w.ip, self.spot_lead)
                self.noticed_ip[w.id] = w.ip
                self.leaving[w.id] = "spot"
                self.asked_at[w.id] = time.time()
                self.spots_wanted -= 1
                self.state.spot_notices += 1
        return [w for w in live if w.id not in self.leaving]

    def _reap(self, w: Worker) -> None:
        reason = self.leaving.pop(w.id, "exited unasked")
        asked = self.asked_at.pop(w.id, None)
        drain = (w.finished or 0.0) - asked if asked else 0.0
        log = self.farm.logs(w.id)
        self.state.gone.append(Gone(w.name, w.started or 0.0, w.finished or 0.0, w.exit_code,
                                    reason, log, drain))
        logs = self.farm.work / "logs"
        logs.mkdir(exist_ok=True)
        (logs / f"{len(self.state.gone):03d}-{w.name}.log").write_text(log)
        self.say(f"t={self.now():6.1f}s {w.name} left ({reason}), exit {w.exit_code}"
                 + (f", {drain:.1f} s after it was asked" if asked else ""))
        self.imds.forget(self.noticed_ip.pop(w.id, w.ip))
        self.farm.remove(w.id)

    def finish(self) -> None:
        """Stops the loop; drains what still runs (SIGTERM) and reaps it."""
        self.stop.set()
        self.thread.join(timeout=120)
        for w in self.farm.workers():
            if w.running:
                if w.id not in self.leaving:
                    self.leaving[w.id] = "end of replay"
                    self.asked_at[w.id] = time.time()
                self.farm.terminate(w.id)
        end = time.monotonic() + 150
        while time.monotonic() < end and any(w.running for w in self.farm.workers()):
            time.sleep(1)
        for w in self.farm.workers():
            if not w.running:
                self._reap(w)
