"""The autoscaling replay end to end (scripts/autoscale-replay.sh runs it):

1. reads the ScaledObject of deploy/k8s/overlays/$TESSERA_REPLAY_OVERLAY (cpu) as rendered,
   and divides its durations by $TESSERA_REPLAY_TIME_SCALE (30);
2. brings up the compose farm with no worker (project tessera-replay, its own ports);
3. submits the batch (short jobs, a long one whose stitch + QC outlasts the scaled cooldown,
   an HLS package), lets the scaler start and drain workers, gives busy workers spot
   notices, and restarts the dispatcher once the long job's segments are done;
4. waits for the pool to reach zero, submits one more job (activation from zero), waits
   for zero again;
5. checks every job done and frame-exact, no worker cut a task off on a scale-down, no
   delivery spent, every worker exited 0; prints worker-seconds against task times.

$TESSERA_REPLAY_JOBS: `full` (the batch above) or `sample` (one job of each kind: CI).
Exit 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import List

from . import batch, report, triggers
from .driver import Driver
from .farm import Farm
from .imds import Imds
from .store import S3

MODES = {
    # shorts (20 s each), the long job (seconds, size), spot notices. The long job's stitch
    # and QC must outlast the replayed cooldown (a check): with the release images a 240 s
    # 720p output stitched and checked in 6.5 s, under the 10 s of the default time scale,
    # so the long job is longer, and CI's sample replays 60x faster (cooldown 5 s).
    "full": (4, (720, "1280x720"), 2),
    "sample": (1, (480, "1280x720"), 1),
}


def say(msg: str) -> None:
    """A progress line, timestamped."""
    print(f"[replay {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port() -> int:
    """A free TCP port on this host (the farm's published ports, the IMDS)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def batch_items(mode: str, inputs: Path) -> List[batch.Item]:
    """The batch of `mode`, its inputs made if missing."""
    shorts, (long_s, long_size), _ = MODES[mode]
    inputs.mkdir(parents=True, exist_ok=True)
    items = [batch.Item(f"short{i}", batch.make_input(inputs / f"short{i}.mp4", 20 + 2 * i,
                                                      "320x240")) for i in range(shorts)]
    # Named by length and size: a sample run and a full one keep their own.
    long_file = inputs / f"long-{long_s}s-{long_size}.mp4"
    items.append(batch.Item("long", batch.make_input(long_file, long_s, long_size), long=True))
    items.append(batch.Item("package", batch.make_input(inputs / "package.mp4", 30, "320x240"),
                            package=True))
    return items


def wait_zero(driver: Driver, farm: Farm, limit: float) -> bool:
    """Whether the pool reaches 0 replicas with no worker running within `limit` s."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if driver.error:
            raise driver.error
        if driver.replicas == 0 and not any(w.running for w in farm.workers()):
            return True
        time.sleep(1)
    return False


def main() -> int:
    """The replay: settings from the environment, the farm up and down around `run`."""
    mode = os.environ.get("TESSERA_REPLAY_JOBS", "full")
    overlay = os.environ.get("TESSERA_REPLAY_OVERLAY", "cpu")
    scale = float(os.environ.get("TESSERA_REPLAY_TIME_SCALE", "30"))
    spot_lead = float(os.environ.get("TESSERA_REPLAY_SPOT_SECONDS", "30"))
    work = Path(os.environ.get("TESSERA_REPLAY_DIR", "/tmp/tessera-replay"))
    manifest = triggers.load(overlay)
    spec = manifest.scaled(scale)
    say(f"overlays/{overlay}: ScaledObject {spec.target}: triggers "
        + ", ".join(f"{t.name} ({t.kind} {t.source}, {t.metric_type} {t.target:g}, activation "
                    f"{t.activation:g})" for t in spec.triggers))
    say(f"manifest: polling {manifest.polling:g} s, cooldown {manifest.cooldown:g} s, "
        f"replicas {manifest.min_replicas}-{manifest.max_replicas}, scale-down window "
        f"{manifest.down.window:g} s; replayed {scale:g}x faster: polling {spec.polling:g} s, "
        f"cooldown {spec.cooldown:g} s, scale-down window {spec.down.window:g} s")
    items = batch_items(mode, work / "inputs")
    ports = {"api": free_port(), "s3": free_port(), "mgmt": free_port(), "imds": free_port()}
    farm = Farm(work / "farm", os.environ.get("TESSERA_REPLAY_PROJECT", "tessera-replay"), ports,
                {"TESSERA_SEGMENT_SECONDS": os.environ.get("TESSERA_SEGMENT_SECONDS", "10")})
    farm.prepare()
    keep = os.environ.get("TESSERA_REPLAY_KEEP") == "1"
    try:
        return run(mode, farm, spec, items, spot_lead, work)
    finally:
        (farm.work / "logs").mkdir(exist_ok=True)
        (farm.work / "logs" / "dispatcher.log").write_text(
            farm.compose("logs", "--no-color", "dispatcher", check=False).stdout)
        say(f"logs in {farm.work / 'logs'}")
        if not keep:
            say("compose down (the replay's own project, volumes included)")
            farm.down()


def run(mode, farm: Farm, spec, items, spot_lead: float, work: Path) -> int:
    """Steps 2 to 4 of the module doc, then the verdict."""
    say(f"compose up (project {farm.project}, API on {farm.ports['api']}), no worker")
    farm.up_core()
    farm.wait_api()
    imds = Imds(farm.ports["imds"])
    driver = Driver(farm, spec, imds, spot_lead, say)
    api = batch.Api(f"http://127.0.0.1:{farm.ports['api']}", farm.secret("client.env",
                                                                         "TESSERA_TOKEN"))
    driver.start()
    t_start = time.monotonic()
    for it in items:
        api.submit(it)
        say(f"submitted {it.name} ({it.source.name}): job {it.id}")
    spots = MODES[mode][2]
    driver.spot(1)
    restarted = []

    def on_poll(it: batch.Item, v: dict) -> None:
        """The second spot notice halfway through the long job; the dispatcher restart after its segments."""
        done, total = v.get("segments_done", 0), v.get("segments_total", 0)
        if it.long and spots > 1 and driver.state.spot_notices + driver.spots_wanted < spots \
                and total and done * 2 >= total:
            driver.spot(spots - 1)
        if it.long and not restarted and total and done >= total and v.get("state") != "done":
            say(f"{it.name}: {done}/{total} segments done: restarting the dispatcher")
            restarted.append(driver.now())
            farm.compose("restart", "dispatcher", timeout=180)

    batch.wait_all(api, items, 3600, on_poll)
    say(f"batch ended in {time.monotonic() - t_start:.0f} s: {batch.summary(items)}")
    failures: List[str] = []
    # Zero within the cooldown, the scale-down window and a drain's grace (with a margin).
    zero_limit = spec.cooldown + spec.down.window + report.GRACE_S + 30
    if not wait_zero(driver, farm, zero_limit):
        failures.append("the pool did not scale to zero after the batch")
    late = batch.Item("after-zero", items[0].source)
    api.submit(late)
    say(f"submitted {late.name} with no worker running: job {late.id}")
    batch.wait_all(api, [late], 900)
    items.append(late)
    if not wait_zero(driver, farm, zero_limit):
        failures.append("the pool did not scale to zero after the last job")
    driver.finish()
    if driver.error:
        raise driver.error
    return verdict(farm, driver, spec, items, restarted, failures, work)


def verdict(farm, driver, spec, items, restarted, failures: List[str], work: Path) -> int:
    """Step 5: every check and the figures; 0 when all passed."""
    s3 = S3(f"http://127.0.0.1:{farm.ports['s3']}", "garage",
            farm.secret("s3.env", "TESSERA_S3_ACCESS_KEY_ID"),
            farm.secret("s3.env", "TESSERA_S3_SECRET_ACCESS_KEY"))
    for it in items:
        if it.state != "done":
            failures.append(f"{it.name}: job {it.id} ended {it.state}")
            continue
        diff = batch.check_item(s3, it, work)
        say(f"{it.name}: {'frame-exact' if diff is None else 'NOT frame-exact: ' + diff}")
        if diff:
            failures.append(f"{it.name}: {diff}")
    if not restarted:
        failures.append("the dispatcher was never restarted after the long job's segments")
    if driver.state.spot_notices == 0:
        failures.append("no spot notice reached a busy worker")
    figures = report.analyse(driver.state.gone)
    failures += figures.failures
    if figures.longest_stitch <= spec.cooldown:
        failures.append(f"the longest stitch + QC ({figures.longest_stitch:.1f} s) did not "
                        f"outlast the replayed cooldown ({spec.cooldown:g} s)")
    say("scaling: " + "; ".join(driver.state.changes[:3]) + (" ..." if len(driver.state.changes) > 3 else ""))
    for line in [f"replica changes:        {len(driver.state.changes)}, peak {driver.state.peak} "
                 f"workers, {len(driver.state.zero_reached)} times to zero",
                 f"drains:                 {driver.state.scale_down_drains} on scale-down, "
                 f"{driver.state.spot_notices} on spot notices; busy when drained: "
                 f"{', '.join(driver.state.busy_drains) or 'none'}",
                 f"jobs:                   {batch.summary(items)}"] + report.lines(figures):
        print("  " + line, flush=True)
    for f in failures:
        say(f"FAIL: {f}")
    say("PASS" if not failures else f"{len(failures)} check(s) failed")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
