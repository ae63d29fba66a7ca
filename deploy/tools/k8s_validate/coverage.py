"""Every queue a worker consumes must wake some worker pool that consumes it: a KEDA trigger
of a scaler whose workers consume that queue must watch it.

Why: a pool scaled to zero wakes only for what its triggers count. A queue that workers
consume but no trigger watches (the stitch queue was one, review gap 1) strands its tasks
whenever the pools reach zero: the job waits for unrelated work to bring a worker back.

Which queues a worker consumes is read from the code, not listed here: worker/src/service.rs
builds the worker's config with `queue:` (the CPU segment queue, consumed without a GPU, or
with one when TESSERA_DRAIN_CPU_QUEUE is true, or when TESSERA_GPU=auto finds no usable
card), `gpu_queue:` (with a GPU), `stitch_queue:` (always), `whole_queue:` (CPU workers:
short inputs sent whole while the fleet is busy) and `cut_queue:` (CPU workers: segments cut
from the job's source by the worker), each a QUEUE_* constant of
model/src/wire.rs (or its wire/ modules). A rabbitmq trigger watches its queueName; a metrics-api trigger on the
dispatcher's GET /scaling watches what that pool's desired_workers counts (SCALING_POOLS).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Set

from .objects import Obj
from .paths import ROOT

WORKER_CONFIG = ROOT / "worker" / "src" / "service.rs"
WIRE = ROOT / "model" / "src" / "wire.rs"

# The roles (config fields above) whose tasks each pool of GET /scaling counts:
# dispatcher/src/scaling.rs, whose CPU pool also asks for a worker per job whose stitch (or
# whose first task) is still to come. A whole-input task is a job planned in one CPU segment
# (engine/src/whole.rs records it so), counted in the CPU backlog until it is done.
SCALING_POOLS = {
    "cpu": {"queue", "stitch_queue", "whole_queue", "cut_queue"},
    "gpu": {"gpu_queue"},
}

# Queues whose deliveries a worker acks when the task starts (worker/src/stitch.rs: a stitch
# heartbeats instead of holding its delivery past the broker's consumer timeout, review M1).
# A queue trigger stops counting such a task once it runs, so a scaled Deployment can be
# scaled to zero under it: only the dispatcher's /scaling (a worker per job waiting for its
# stitch) keeps its worker. ScaledJob pods run to completion and are not taken this way.
ACKED_AT_START = {"stitch_queue"}


def running(queue: str) -> str:
    """The pseudo-queue of the tasks of `queue` that are running, acked at their start."""
    return f"{queue} (tasks running, acked when they start)"


def queue_roles() -> Optional[Dict[str, str]]:
    """{config field: queue name} of the worker's queues, from the worker's and the model's
    sources; None without the sources (the manifests checked alone). With the sources but
    without the fields, the check fails loudly instead of being skipped."""
    if not WORKER_CONFIG.is_file() or not WIRE.is_file():
        if any(ROOT.glob("*/src/**/*.rs")):
            raise SystemExit(f"k8s_validate: {WORKER_CONFIG} or {WIRE} not found: the queue "
                             "coverage check cannot run (update coverage.py)")
        return None
    wire = [WIRE, *sorted((WIRE.parent / "wire").glob("*.rs"))]
    consts = dict(re.findall(r'pub const (QUEUE_[A-Z_]+): &str = "([^"]+)"',
                             "\n".join(p.read_text(encoding="utf-8") for p in wire)))
    fields = re.findall(r"^\s*([a-z_]*queue): (?:Some\()?(QUEUE_[A-Z_]+)\.to_string\(\)",
                        WORKER_CONFIG.read_text(encoding="utf-8"), re.M)
    roles = {field: consts[c] for field, c in fields if c in consts}
    if not {"queue", "gpu_queue", "stitch_queue"} <= set(roles):
        raise SystemExit(f"k8s_validate: the worker's queues (queue, gpu_queue, stitch_queue) "
                         f"not found in {WORKER_CONFIG}: found {roles}")
    return roles


def is_worker(container: Obj) -> bool:
    """A tessera worker container: its image's name (last path part, without tag or digest)
    is a worker image (tessera/worker, tessera/worker-gpu, a registry's tessera-worker)."""
    name = str(container.get("image", "")).rsplit("/", 1)[-1]
    name = re.split(r"[:@]", name, maxsplit=1)[0]
    return name.startswith("worker") or name.startswith("tessera-worker")


def container_env(c: Obj, cms: Dict[str, Obj]) -> Dict[str, str]:
    """The plain settings a container gets (ConfigMaps through envFrom, then env values)."""
    env: Dict[str, str] = {}
    for ef in c.get("envFrom", []):
        ref = ef.get("configMapRef")
        if ref and ref.get("name") in cms:
            env.update({k: str(v) for k, v in (cms[ref["name"]].get("data") or {}).items()})
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = str(e["value"])
    return env


def consumed(c: Obj, cms: Dict[str, Obj]) -> Set[str]:
    """The roles (config fields) a worker container consumes, from TESSERA_GPU (or --gpu;
    the worker's default is auto) and TESSERA_DRAIN_CPU_QUEUE."""
    env = container_env(c, cms)
    gpu = env.get("TESSERA_GPU", "auto")
    args = [str(a) for a in c.get("args", [])]
    for i, a in enumerate(args):
        if a.startswith("--gpu="):
            gpu = a.split("=", 1)[1]
        elif a == "--gpu" and i + 1 < len(args):
            gpu = args[i + 1]
    # A worker without cards also takes whole inputs and cut segments (worker/src/forward.rs).
    if gpu == "off":
        return {"queue", "stitch_queue", "whole_queue", "cut_queue"}
    roles = {"gpu_queue", "stitch_queue"}
    # auto without a usable card becomes a CPU worker; require exits instead.
    if gpu == "auto":
        roles |= {"queue", "whole_queue", "cut_queue"}
    if env.get("TESSERA_DRAIN_CPU_QUEUE", "false").lower() in ("true", "1"):
        roles.add("queue")
    return roles


def watched(trigger: Obj, roles: Dict[str, str]) -> Set[str]:
    """The queue names a KEDA trigger wakes its pool for."""
    meta = trigger.get("metadata") or {}
    if trigger.get("type") == "rabbitmq" and meta.get("queueName"):
        return {meta["queueName"]}
    if trigger.get("type") == "metrics-api" and "/scaling" in str(meta.get("url", "")):
        m = re.match(r"pools\.([a-z]+)\.desired_workers$", str(meta.get("valueLocation", "")))
        if m and m.group(1) in SCALING_POOLS:
            pool = SCALING_POOLS[m.group(1)]
            return {roles[r] for r in pool} | {running(roles[r]) for r in pool & ACKED_AT_START}
    return set()


def uncovered_queues(objs: List[Obj], pods: List[tuple], cms: Dict[str, Obj]) -> Dict[int, List[str]]:
    """Problems per object index: each worker workload (Deployment, ScaledJob...) that
    consumes a queue no scaler of workers consuming it watches. `pods` are the (owner, pod
    template) pairs of the render."""
    roles = queue_roles()
    if roles is None:
        return {}
    # Queues each worker workload consumes, by (kind, name).
    consumes: Dict[tuple, Set[str]] = {}
    for owner, tmpl in pods:
        for c in (tmpl.get("spec") or {}).get("containers", []):
            if is_worker(c):
                key = (owner.get("kind"), (owner.get("metadata") or {}).get("name"))
                mine = consumed(c, cms)
                consumes.setdefault(key, set()).update(roles[r] for r in mine)
                if key[0] == "Deployment":
                    consumes[key].update(running(roles[r]) for r in mine & ACKED_AT_START)
    # Queues that wake a pool whose workers consume them.
    covered: Set[str] = set()
    for o in objs:
        spec, kind = o.get("spec") or {}, o.get("kind")
        if kind == "ScaledObject":
            ref = spec.get("scaleTargetRef") or {}
            target = (ref.get("kind", "Deployment"), ref.get("name"))
        elif kind == "ScaledJob":
            target = ("ScaledJob", (o.get("metadata") or {}).get("name"))
        else:
            continue
        for t in spec.get("triggers", []):
            covered |= watched(t, roles) & consumes.get(target, set())
    problems: Dict[int, List[str]] = {}
    for i, o in enumerate(objs):
        key = (o.get("kind"), (o.get("metadata") or {}).get("name"))
        for q in sorted(consumes.get(key, set()) - covered):
            problems.setdefault(i, []).append(
                f"its workers consume {q}, but no KEDA trigger of a pool that consumes it "
                "watches it: its tasks wait whenever the pools are at zero")
    return problems
