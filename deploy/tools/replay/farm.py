"""The replay's compose project: docker/compose.yaml plus docker/replay.override.yaml in a
directory of its own, with its own secrets, project name and ports, and the worker
containers as the scaler sees them.

Why a copy: make-secrets.sh writes next to the compose file, and the replay must neither
touch docker/secrets/ nor another farm running on the same engine (another project name,
other ports; only its own containers and volumes are removed).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from k8s_validate.paths import ROOT

DOCKER_TIMEOUT = 300
PROJECT_FILES = ["compose.yaml", "garage.toml", "garage-init.sh", "make-secrets.sh",
                 "replay.override.yaml"]
WORKER_METRICS_PORT = 9464


def _when(s: str) -> Optional[float]:
    """A Docker timestamp (RFC 3339, nanoseconds) as epoch seconds; None for the zero time."""
    if not s or s.startswith("0001-"):
        return None
    head, _, frac = s.rstrip("Z").partition(".")
    t = datetime.datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    return t + float("0." + frac[:6]) if frac else t


@dataclass
class Worker:
    """One worker container as `docker inspect` shows it."""
    id: str
    name: str
    running: bool
    ip: str
    started: Optional[float]
    finished: Optional[float]
    exit_code: int


def env_value(path: Path, key: str) -> str:
    """`KEY=value` of an env file."""
    for line in path.read_text().splitlines():
        if line.startswith(key + "="):
            return line.split("=", 1)[1]
    raise KeyError(f"{key} not in {path}")


class Farm:
    """One compose project (`project`) in `work`."""

    def __init__(self, work: Path, project: str, ports: Dict[str, int], extra_env: Dict[str, str]):
        self.work, self.project, self.ports = work, project, ports
        self.env = dict(os.environ)
        self.env.update({
            "TESSERA_API_PORT": str(ports["api"]), "TESSERA_S3_PORT": str(ports["s3"]),
            "TESSERA_REPLAY_MGMT_PORT": str(ports["mgmt"]),
            "TESSERA_REPLAY_IMDS_PORT": str(ports["imds"]), **extra_env})

    def prepare(self) -> None:
        """The project files and fresh secrets in `work`."""
        self.work.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.work / "logs", ignore_errors=True)
        for name in PROJECT_FILES:
            shutil.copy(ROOT / "docker" / name, self.work / name)
        # The official image and the Debian stand-in both read this file.
        (self.work / "replay-enabled-plugins").write_text("[rabbitmq_management].\n")
        subprocess.run(["sh", str(self.work / "make-secrets.sh")], check=True,
                       timeout=DOCKER_TIMEOUT, capture_output=True)

    def secret(self, file: str, key: str) -> str:
        """A value of one of the project's secrets/*.env files."""
        return env_value(self.work / "secrets" / file, key)

    def compose(self, *args: str, timeout: float = DOCKER_TIMEOUT,
                check: bool = True) -> subprocess.CompletedProcess:
        """`docker-compose -f compose.yaml -f replay.override.yaml -p PROJECT ARGS` with the
        project's ports; raises on failure when `check`."""
        cmd = ["docker-compose", "-f", str(self.work / "compose.yaml"),
               "-f", str(self.work / "replay.override.yaml"), "-p", self.project, *args]
        out = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[5:])}: {out.stderr.strip()[-2000:]}")
        return out

    def up_core(self) -> None:
        """RabbitMQ, Garage (laid out by garage-init) and the dispatcher; no worker."""
        self.compose("up", "-d", "--no-build", "--scale", "worker=0", "rabbitmq", "garage", "garage-init",
                     "dispatcher", timeout=600)

    def wait_api(self, limit: float = 180) -> None:
        """Until the dispatcher answers /readyz."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['api']}/readyz",
                                            timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(1)
        raise RuntimeError("the dispatcher did not become ready")

    def workers(self) -> List[Worker]:
        """Every worker container of the project, running or exited."""
        ids = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={self.project}",
             "--filter", "label=com.docker.compose.service=worker"],
            capture_output=True, text=True, timeout=DOCKER_TIMEOUT, check=True).stdout.split()
        if not ids:
            return []
        out = subprocess.run(["docker", "inspect", *ids], capture_output=True, text=True,
                             timeout=DOCKER_TIMEOUT)
        found = []
        for c in json.loads(out.stdout or "[]"):
            st = c["State"]
            nets = c["NetworkSettings"]["Networks"] or {}
            ip = next((n["IPAddress"] for n in nets.values() if n.get("IPAddress")), "")
            found.append(Worker(c["Id"][:12], c["Name"].lstrip("/"), st["Running"], ip,
                                _when(st["StartedAt"]), _when(st["FinishedAt"]),
                                st["ExitCode"]))
        return found

    def scale_up(self, more: int) -> bool:
        """Starts `more` new worker containers (`compose run -d`, side by side), as a
        ReplicaSet makes new pods. Why not `compose up --scale N`: it brings the service to N
        by starting exited containers again, and a worker that ends its spot drain while that
        call runs (seconds on a loaded host) was started again with the notice withdrawn, and
        worked on until the end of the replay (seen: left 411 s after its notice)."""
        errors: List[BaseException] = []

        def one() -> None:
            try:
                self.compose("run", "-d", "--no-deps", "worker")
            except BaseException as e:  # reported below, on the caller's thread
                errors.append(e)

        threads = [threading.Thread(target=one) for _ in range(more)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return True

    def terminate(self, wid: str) -> None:
        """SIGTERM: the worker drains (finishes or gives back what it holds) and exits 0."""
        subprocess.run(["docker", "kill", "-s", "TERM", wid], capture_output=True,
                       timeout=DOCKER_TIMEOUT)

    def logs(self, wid: str) -> str:
        """A container's whole log (stdout and stderr)."""
        out = subprocess.run(["docker", "logs", wid], capture_output=True, text=True,
                             timeout=DOCKER_TIMEOUT)
        return out.stdout + out.stderr

    def remove(self, wid: str) -> None:
        """An exited worker's container (never a running one: no -f)."""
        subprocess.run(["docker", "rm", wid], capture_output=True, timeout=DOCKER_TIMEOUT)

    def down(self) -> None:
        """The project's containers, network and volumes (its own only)."""
        self.compose("down", "-v", "--remove-orphans", "-t", "120", timeout=600, check=False)
