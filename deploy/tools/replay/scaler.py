"""KEDA's ScaledObject controller and the HPA it drives, as pure logic: metrics and the
replica count in, the next replica count out. No clock, no I/O: the caller passes `now`.

Why pure: the replay scales real workers by it, and each documented rule (target per replica,
tolerance, activation, cooldown to zero, bounds, fallback, stabilization windows, rate
policies) has a unit test of its own (tests.py).

The rules, as KEDA (keda.sh, "ScaledObject specification", "Scaling Deployments") and the
Kubernetes HPA controller (kubernetes.io, "Horizontal Pod Autoscaling"; pkg/controller/
podautoscaler) document and implement them:
- KEDA polls every pollingInterval. A trigger is active when its metric is above its
  activation threshold. At 0 replicas an active trigger scales to max(minReplicaCount, 1);
  with every trigger inactive (and none failing) for cooldownPeriod since the last active
  poll, KEDA scales to minReplicaCount (0). Between 1 and maxReplicaCount the HPA decides.
- HPA, per metric: AverageValue (KEDA's default) proposes ceil(metric / target); Value
  proposes ceil(current * metric / target); a ratio within the tolerance (0.1) of 1 keeps
  the current count. The highest proposal wins. A failed metric never lets it scale down.
- KEDA fallback: a trigger failing failureThreshold polls in a row proposes
  fallback.replicas.
- HPA behavior: the stabilization window keeps the lowest recommendation of the scale-up
  window and the highest of the scale-down window; then the policies limit the change per
  period from the count at the period's start (selectPolicy Max: the largest change the
  policies allow, Min: the smallest, Disabled: none); then min/max replicas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .triggers import HPA_TOLERANCE, Rules, ScalerSpec, Trigger


@dataclass
class Decision:
    """One poll's outcome: the replica count to set and why."""
    replicas: int
    reason: str
    active: bool
    proposals: Dict[str, int] = field(default_factory=dict)


def metric_proposal(t: Trigger, metric: float, current: int,
                    tolerance: float = HPA_TOLERANCE) -> int:
    """The replica count the HPA proposes for one metric (current >= 1)."""
    if t.metric_type == "AverageValue":
        ratio = metric / (t.target * current)
        return current if abs(1.0 - ratio) <= tolerance else math.ceil(metric / t.target)
    if t.metric_type == "Value":
        ratio = metric / t.target
        return current if abs(1.0 - ratio) <= tolerance else math.ceil(ratio * current)
    raise ValueError(f"metricType {t.metric_type} is not replayed")


def _change_in_period(events: List[Tuple[float, int]], now: float, period: float) -> int:
    return sum(n for at, n in events if at > now - period)


def scale_up_limit(rules: Rules, current: int, ups: List[Tuple[float, int]],
                   downs: List[Tuple[float, int]], now: float) -> int:
    """The most replicas the scale-up policies allow now."""
    if rules.select == "Disabled":
        return current
    pick, result = (min, math.inf) if rules.select == "Min" else (max, -math.inf)
    for p in rules.policies:
        start = current - _change_in_period(ups, now, p.period) + \
            _change_in_period(downs, now, p.period)
        if p.kind == "Pods":
            proposed = start + p.value
        else:
            proposed = math.ceil(start * (1 + p.value / 100))
        result = pick(result, proposed)
    return int(result)


def scale_down_limit(rules: Rules, current: int, ups: List[Tuple[float, int]],
                     downs: List[Tuple[float, int]], now: float) -> int:
    """The fewest replicas the scale-down policies allow now."""
    if rules.select == "Disabled":
        return current
    # Max change = the lowest count; Min change = the highest.
    pick, result = (max, -math.inf) if rules.select == "Min" else (min, math.inf)
    for p in rules.policies:
        start = current - _change_in_period(ups, now, p.period) + \
            _change_in_period(downs, now, p.period)
        if p.kind == "Pods":
            proposed = start - p.value
        else:
            proposed = int(start * (1 - p.value / 100))
        result = pick(result, proposed)
    return int(result)


class Scaler:
    """The ScaledObject's state across polls: last active time, failures per trigger, the
    HPA's recommendations and scale events."""

    def __init__(self, spec: ScalerSpec):
        self.spec = spec
        self.last_active: Optional[float] = None
        self.failures: Dict[str, int] = {t.name: 0 for t in spec.triggers}
        self.recommendations: List[Tuple[float, int]] = []
        self.ups: List[Tuple[float, int]] = []
        self.downs: List[Tuple[float, int]] = []

    def step(self, now: float, metrics: Dict[str, Optional[float]], current: int) -> Decision:
        """One poll: `metrics` by trigger name (None: the metric could not be read)."""
        s = self.spec
        active, errored = False, False
        for t in s.triggers:
            m = metrics.get(t.name)
            self.failures[t.name] = self.failures[t.name] + 1 if m is None else 0
            active |= m is not None and m > t.activation
            errored |= m is None
        if active:
            self.last_active = now
        if current == 0:
            if active:
                return Decision(max(s.min_replicas, 1), "activated", True)
            return Decision(s.min_replicas, "inactive", False)
        cooled = self.last_active is None or now - self.last_active >= s.cooldown
        if not active and not errored and s.min_replicas == 0 and cooled:
            self.recommendations.clear()
            return Decision(0, "cooldown over: to zero", False)
        d = self._hpa(now, metrics, current)
        d.active = active
        return d

    def _hpa(self, now: float, metrics: Dict[str, Optional[float]], current: int) -> Decision:
        s = self.spec
        lo, hi = max(s.min_replicas, 1), s.max_replicas
        if current > hi:
            return self._record(now, current, hi, "above maxReplicaCount")
        if current < lo:
            return self._record(now, current, lo, "below the minimum")
        proposals: Dict[str, int] = {}
        failed = False
        for t in s.triggers:
            m = metrics.get(t.name)
            if m is not None:
                proposals[t.name] = metric_proposal(t, m, current)
            elif s.fallback_failures and self.failures[t.name] >= s.fallback_failures:
                proposals[t.name] = int(s.fallback_replicas or current)
            else:
                failed = True
        if not proposals:
            return Decision(current, "no metric", False)
        raw = max(proposals.values())
        if failed and raw < current:
            raw = current
        stable = self._stabilize(now, current, raw)
        new = self._rate_limit(now, current, stable, lo, hi)
        d = self._record(now, current, new, f"hpa raw {raw} stabilized {stable}")
        d.proposals = proposals
        return d

    def _stabilize(self, now: float, current: int, raw: int) -> int:
        s = self.spec
        up_rec, down_rec = raw, raw
        for at, rec in self.recommendations:
            if at > now - s.up.window:
                up_rec = min(up_rec, rec)
            if at > now - s.down.window:
                down_rec = max(down_rec, rec)
        keep = max(s.up.window, s.down.window)
        self.recommendations = [(at, r) for at, r in self.recommendations if at > now - keep]
        self.recommendations.append((now, raw))
        return min(max(current, up_rec), down_rec)

    def _rate_limit(self, now: float, current: int, desired: int, lo: int, hi: int) -> int:
        s = self.spec
        if desired > current:
            limit = max(scale_up_limit(s.up, current, self.ups, self.downs, now), current)
            return min(desired, hi, limit)
        if desired < current:
            limit = min(scale_down_limit(s.down, current, self.ups, self.downs, now), current)
            return max(desired, lo, limit)
        return desired

    def _record(self, now: float, current: int, new: int, reason: str) -> Decision:
        if new > current:
            self.ups.append((now, new - current))
        elif new < current:
            self.downs.append((now, current - new))
        horizon = max([p.period for p in self.spec.up.policies + self.spec.down.policies] + [0])
        self.ups = [e for e in self.ups if e[0] > now - horizon]
        self.downs = [e for e in self.downs if e[0] > now - horizon]
        return Decision(new, reason, True)
