"""What the workers' logs say about the replay: the tasks they finished and how long each
took, the tasks drains gave back, and whether any task was cut off or spent a delivery;
then worker-seconds against task-seconds.

Why from the logs: each finished task logs `seconds` (start to done) and `attempt` (which
delivery: 1 when no delivery was spent before it), and a drain logs what it gave back; the
logs are what an operator has too.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from .driver import Gone

TASK = re.compile(r"(segment encoded|output stitched) job=(\S+) (?:segment|output)=(\d+) "
                  r"frames=(\d+) seconds=([0-9.]+) attempt=(\d+)")
GIVEN_BACK = "drained task given back"
REQUEUED = "drained task requeued"
CUT_OFF = "grace period over"
# TESSERA_GRACE_SECONDS of the replay's workers (docker/replay.override.yaml), and a margin
# to exit after it.
GRACE_S = int(os.environ.get("TESSERA_REPLAY_GRACE_SECONDS", "100"))
EXIT_MARGIN_S = 10


@dataclass
class Figures:
    """The replay's outcome in numbers, and every check that failed."""
    worker_seconds: float = 0.0
    task_seconds: float = 0.0
    segments: int = 0
    stitches: int = 0
    longest_stitch: float = 0.0
    given_back: int = 0
    duplicates: int = 0
    workers: int = 0
    failures: List[str] = field(default_factory=list)


def analyse(gone: List[Gone]) -> Figures:
    """Figures and failed checks from every worker that ran."""
    f = Figures(workers=len(gone))
    seen: Dict[Tuple[str, str, str], int] = {}
    for g in gone:
        f.worker_seconds += max(0.0, g.finished - g.started)
        if g.exit_code != 0:
            f.failures.append(f"{g.name} exited {g.exit_code} ({g.reason})")
        if g.reason == "exited unasked":
            f.failures.append(f"{g.name} exited without a drain or a notice")
        if g.drain_seconds > GRACE_S + EXIT_MARGIN_S:
            f.failures.append(f"{g.name}: left {g.drain_seconds:.0f} s after its {g.reason} "
                              f"drain began (grace {GRACE_S} s)")
        back = g.log.count(GIVEN_BACK)
        f.given_back += back
        if g.reason != "spot" and (back or CUT_OFF in g.log):
            f.failures.append(f"{g.name}: a {g.reason} drain cut {back} task(s) off")
        if REQUEUED in g.log:
            f.failures.append(f"{g.name}: a drained task was requeued, spending a delivery")
        for m in TASK.finditer(g.log):
            kind, job, n, _frames, secs, attempt = m.groups()
            f.task_seconds += float(secs)
            if kind == "output stitched":
                f.stitches += 1
                f.longest_stitch = max(f.longest_stitch, float(secs))
            else:
                f.segments += 1
            key = (kind, job, n)
            seen[key] = seen.get(key, 0) + 1
            if int(attempt) != 1:
                f.failures.append(f"{g.name}: {kind} {job}/{n} on delivery {attempt} "
                                  "(a delivery was spent)")
    f.duplicates = sum(n - 1 for n in seen.values())
    return f


def lines(f: Figures) -> List[str]:
    """The figures as the replay prints them."""
    share = f.task_seconds / f.worker_seconds if f.worker_seconds else 0.0
    return [
        f"worker containers:      {f.workers}",
        f"tasks done:             {f.segments} segments, {f.stitches} stitches "
        f"({f.duplicates} done twice), {f.given_back} given back by drains",
        f"longest stitch + QC:    {f.longest_stitch:.1f} s",
        f"worker-seconds used:    {f.worker_seconds:.1f} s",
        f"sum of task times:      {f.task_seconds:.1f} s ({100 * share:.0f} % of the "
        "worker-seconds)",
    ]
