"""Unit tests of the scaler, one per documented rule, and of reading the triggers from the
rendered overlays.

  PYTHONPATH=deploy/tools python3 -m unittest replay.tests
"""

from __future__ import annotations

import copy
import unittest

from .scaler import Scaler, metric_proposal
from .triggers import load, spec_of

QUEUE = {"type": "rabbitmq", "name": "encode",
         "metadata": {"mode": "QueueLength", "value": "1", "queueName": "q.encode"}}
BASE = {"kind": "ScaledObject", "spec": {
    "scaleTargetRef": {"name": "w"}, "pollingInterval": 15, "cooldownPeriod": 300,
    "minReplicaCount": 0, "maxReplicaCount": 20, "triggers": [QUEUE]}}


def so(**spec):
    """A ScaledObject: BASE with `spec` fields replaced."""
    o = copy.deepcopy(BASE)
    o["spec"].update(spec)
    return o


def run(scaler, polls):
    """Steps `scaler` through (now, metrics) polls from its decisions; the last count."""
    n = 0
    for now, m in polls:
        n = scaler.step(now, m, n).replicas
    return n


class TargetPerReplica(unittest.TestCase):
    def test_average_value_is_the_metric_over_the_target(self):
        t = spec_of(so()).triggers[0]
        self.assertEqual(metric_proposal(t, 7, 2), 7)
        t2 = spec_of(so(triggers=[{**QUEUE, "metadata": {**QUEUE["metadata"], "value": "3"}}]))
        self.assertEqual(metric_proposal(t2.triggers[0], 7, 1), 3)

    def test_value_metric_scales_the_current_count(self):
        t = spec_of(so(triggers=[{**QUEUE, "metricType": "Value"}])).triggers[0]
        self.assertEqual(metric_proposal(t, 3, 2), 6)

    def test_a_ratio_within_the_tolerance_keeps_the_count(self):
        t = spec_of(so()).triggers[0]
        self.assertEqual(metric_proposal(t, 10.5, 10), 10)
        self.assertEqual(metric_proposal(t, 11.5, 10), 12)
        self.assertEqual(metric_proposal(t, 8.9, 10), 9)

    def test_the_highest_trigger_wins(self):
        stitch = {**QUEUE, "name": "stitch", "metadata": {**QUEUE["metadata"], "queueName": "s"}}
        s = Scaler(spec_of(so(triggers=[QUEUE, stitch])))
        d = s.step(0, {"encode": 0, "stitch": 1}, 0)
        self.assertEqual((d.replicas, d.active), (1, True))
        d = s.step(15, {"encode": 0, "stitch": 3}, 1)
        self.assertEqual(d.replicas, 3)


class ActivationAndZero(unittest.TestCase):
    def test_nothing_above_the_activation_stays_at_zero(self):
        s = Scaler(spec_of(so()))
        self.assertEqual(s.step(0, {"encode": 0}, 0).replicas, 0)
        self.assertEqual(s.step(15, {"encode": 1}, 0).replicas, 1)

    def test_an_activation_threshold_must_be_exceeded(self):
        t = {**QUEUE, "metadata": {**QUEUE["metadata"], "activationValue": "5"}}
        s = Scaler(spec_of(so(triggers=[t])))
        self.assertEqual(s.step(0, {"encode": 5}, 0).replicas, 0)
        self.assertEqual(s.step(15, {"encode": 6}, 0).replicas, 1)

    def test_zero_only_after_the_cooldown_since_the_last_active_poll(self):
        s = Scaler(spec_of(so(cooldownPeriod=300)))
        self.assertEqual(s.step(0, {"encode": 1}, 0).replicas, 1)
        self.assertEqual(s.step(15, {"encode": 1}, 1).replicas, 1)
        for now in range(30, 315, 15):
            self.assertEqual(s.step(now, {"encode": 0}, 1).replicas, 1, now)
        d = s.step(315, {"encode": 0}, 1)
        self.assertEqual(d.replicas, 0, d.reason)

    def test_min_replicas_above_zero_is_never_left(self):
        s = Scaler(spec_of(so(minReplicaCount=2)))
        self.assertEqual(s.step(0, {"encode": 0}, 0).replicas, 2)
        self.assertEqual(s.step(900, {"encode": 0}, 2).replicas, 2)


class Bounds(unittest.TestCase):
    def test_max_replicas_caps_the_count_after_the_scale_up_policies(self):
        # Default scaleUp: max(100 % , 4 pods) per 15 s from the period's start.
        s = Scaler(spec_of(so(maxReplicaCount=12)))
        self.assertEqual(s.step(0, {"encode": 100}, 0).replicas, 1)
        self.assertEqual(s.step(15, {"encode": 100}, 1).replicas, 5)
        self.assertEqual(s.step(30, {"encode": 100}, 5).replicas, 10)
        self.assertEqual(s.step(45, {"encode": 100}, 10).replicas, 12)
        self.assertEqual(s.step(60, {"encode": 100}, 12).replicas, 12)

    def test_above_max_comes_down_to_max(self):
        s = Scaler(spec_of(so(maxReplicaCount=3)))
        self.assertEqual(s.step(0, {"encode": 1}, 5).replicas, 3)


class Behavior(unittest.TestCase):
    BEHAVIOR = {"horizontalPodAutoscalerConfig": {"behavior": {
        "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max", "policies": [
            {"type": "Percent", "value": 10, "periodSeconds": 60},
            {"type": "Pods", "value": 1, "periodSeconds": 60}]},
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": 15},
            {"type": "Pods", "value": 4, "periodSeconds": 15}]}}}}

    def test_scale_down_waits_out_the_stabilization_window(self):
        s = Scaler(spec_of(so(advanced=self.BEHAVIOR)))
        self.assertEqual(s.step(0, {"encode": 4}, 4).replicas, 4)
        for now in range(15, 300, 15):
            self.assertEqual(s.step(now, {"encode": 1}, 4).replicas, 4, now)
        self.assertEqual(s.step(300, {"encode": 1}, 4).replicas, 3)

    def test_scale_down_rate_is_the_larger_of_the_policies_per_period(self):
        s = Scaler(spec_of(so(advanced=self.BEHAVIOR, maxReplicaCount=30)))
        # 20 -> 18 (10 % of 20 beats 1 pod), nothing more within 60 s, then 10 % of 18
        # (rounded down: 16, then 14) beats 1 pod again.
        self.assertEqual(s.step(0, {"encode": 1}, 20).replicas, 18)
        self.assertEqual(s.step(30, {"encode": 1}, 18).replicas, 18)
        self.assertEqual(s.step(61, {"encode": 1}, 18).replicas, 16)
        self.assertEqual(s.step(122, {"encode": 1}, 16).replicas, 14)

    def test_select_policy_min_takes_the_smaller_change(self):
        b = copy.deepcopy(self.BEHAVIOR)
        b["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["selectPolicy"] = "Min"
        b["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] = 0
        s = Scaler(spec_of(so(advanced=b, maxReplicaCount=30)))
        self.assertEqual(s.step(0, {"encode": 1}, 20).replicas, 19)

    def test_scale_up_stabilization_keeps_the_lowest_recommendation(self):
        b = copy.deepcopy(self.BEHAVIOR)
        b["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]["stabilizationWindowSeconds"] = 60
        s = Scaler(spec_of(so(advanced=b)))
        self.assertEqual(s.step(0, {"encode": 2}, 2).replicas, 2)
        self.assertEqual(s.step(15, {"encode": 8}, 2).replicas, 2)
        self.assertEqual(s.step(61, {"encode": 8}, 2).replicas, 6)  # 2 + 4 pods


class Failures(unittest.TestCase):
    def test_a_failing_metric_never_scales_down(self):
        stitch = {**QUEUE, "name": "stitch", "metadata": {**QUEUE["metadata"], "queueName": "s"}}
        b = {"horizontalPodAutoscalerConfig": {"behavior": {
            "scaleDown": {"stabilizationWindowSeconds": 0}}}}
        s = Scaler(spec_of(so(triggers=[QUEUE, stitch], advanced=b)))
        self.assertEqual(s.step(0, {"encode": 1, "stitch": None}, 4).replicas, 4)
        self.assertEqual(s.step(15, {"encode": 1, "stitch": 0}, 4).replicas, 1)

    def test_fallback_after_the_failure_threshold(self):
        s = Scaler(spec_of(so(fallback={"failureThreshold": 3, "replicas": 2})))
        self.assertEqual(s.step(0, {"encode": None}, 1).replicas, 1)
        self.assertEqual(s.step(15, {"encode": None}, 1).replicas, 1)
        self.assertEqual(s.step(30, {"encode": None}, 1).replicas, 2)


class Manifests(unittest.TestCase):
    def test_the_cpu_overlay_scales_on_its_queues_and_running_stitches_as_rendered(self):
        spec = load("cpu")
        self.assertEqual(spec.target, "tessera-worker-cpu")
        # The queues (segments, stitches, whole inputs), and /scaling for the stitches a
        # worker acked when it began them.
        self.assertEqual([(t.kind, t.source) for t in spec.triggers],
                         [("rabbitmq", "tessera.encode.cpu"), ("rabbitmq", "tessera.stitch"),
                          ("rabbitmq", "tessera.whole.cpu"),
                          ("rabbitmq", "tessera.cut.cpu"),
                          ("metrics-api", "pools.cpu.desired_workers")])
        self.assertEqual((spec.polling, spec.cooldown, spec.min_replicas), (15, 300, 0))
        self.assertEqual(spec.down.window, 300)
        fast = spec.scaled(10)
        self.assertEqual((fast.polling, fast.cooldown, fast.down.window), (1.5, 30, 30))
        self.assertEqual(fast.max_replicas, spec.max_replicas)

    def test_the_desired_workers_overlay_swaps_in_the_metrics_api_trigger(self):
        spec = load("cpu-desired-workers")
        self.assertEqual([(t.kind, t.source, t.metric_type) for t in spec.triggers],
                         [("metrics-api", "pools.cpu.desired_workers", "AverageValue")])


if __name__ == "__main__":
    unittest.main()
