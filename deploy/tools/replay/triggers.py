"""The CPU pool's scaling rules as an overlay renders them: the KEDA ScaledObject's triggers,
polling interval, cooldown, replica bounds, fallback and HPA behavior, with KEDA's and the
HPA's documented defaults for what the manifest leaves out.

Why from the render: the replay must scale by what a cluster would get from `kubectl apply
-k overlays/X`, components and patches included (overlays/cpu-desired-workers swaps the
trigger), not by numbers copied into the replay. The render is k8s_validate's (kubectl
kustomize when installed, else its pure-Python kustomize subset).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional

from k8s_validate.render import pick_renderer, prepared_tree

# KEDA ScaledObject defaults (keda.sh/docs, "ScaledObject specification").
KEDA_POLLING_INTERVAL = 30
KEDA_COOLDOWN = 300
KEDA_MIN = 0
KEDA_MAX = 100
# The HPA's default behavior (kubernetes.io, "Horizontal Pod Autoscaling", default behavior).
HPA_TOLERANCE = 0.1
DEFAULT_SCALE_UP = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15},
                                 {"type": "Pods", "value": 4, "periodSeconds": 15}]}
DEFAULT_SCALE_DOWN = {"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
                      "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


@dataclass(frozen=True)
class Policy:
    """One HPA scaling policy: at most `value` pods (Pods) or percent (Percent) per period."""
    kind: str
    value: int
    period: float


@dataclass(frozen=True)
class Rules:
    """One direction of the HPA's behavior (scaleUp or scaleDown)."""
    window: float
    select: str
    policies: List[Policy]


@dataclass(frozen=True)
class Trigger:
    """A KEDA trigger: where its metric comes from, the target per replica and the
    activation threshold. `source` is a queue name (rabbitmq) or a JSON path (metrics-api)."""
    name: str
    kind: str
    metric_type: str
    target: float
    activation: float
    source: str
    url: Optional[str] = None


@dataclass(frozen=True)
class ScalerSpec:
    """Everything the scaler needs, in seconds."""
    target: str
    polling: float
    cooldown: float
    min_replicas: int
    max_replicas: int
    fallback_failures: Optional[int]
    fallback_replicas: Optional[int]
    triggers: List[Trigger]
    up: Rules
    down: Rules
    time_scale: float = 1.0
    notes: List[str] = field(default_factory=list)

    def scaled(self, factor: float) -> "ScalerSpec":
        """Every duration divided by `factor` (a replay on a small host with short jobs); the
        counts and targets are kept."""
        def rules(r: Rules) -> Rules:
            return Rules(r.window / factor, r.select,
                         [Policy(p.kind, p.value, p.period / factor) for p in r.policies])
        return replace(self, polling=self.polling / factor, cooldown=self.cooldown / factor,
                       up=rules(self.up), down=rules(self.down), time_scale=factor)


def _rules(raw: Optional[Dict[str, Any]], default: Dict[str, Any]) -> Rules:
    raw = raw or {}
    window = raw.get("stabilizationWindowSeconds", default["stabilizationWindowSeconds"])
    policies = raw.get("policies") or default["policies"]
    return Rules(float(window), raw.get("selectPolicy", "Max"),
                 [Policy(p["type"], int(p["value"]), float(p["periodSeconds"])) for p in policies])


def _trigger(t: Dict[str, Any]) -> Trigger:
    meta = t.get("metadata") or {}
    kind = t["type"]
    metric_type = t.get("metricType", "AverageValue")
    if kind == "rabbitmq":
        if meta.get("mode", "QueueLength") != "QueueLength":
            raise ValueError(f"trigger {t.get('name')}: only QueueLength mode is replayed")
        if meta.get("excludeUnacknowledged") == "true":
            raise ValueError(f"trigger {t.get('name')}: excludeUnacknowledged is not replayed")
        return Trigger(t.get("name", meta["queueName"]), kind, metric_type,
                       float(meta.get("value", 20)), float(meta.get("activationValue", 0)),
                       meta["queueName"])
    if kind == "metrics-api":
        return Trigger(t.get("name", "metrics-api"), kind, metric_type,
                       float(meta["targetValue"]), float(meta.get("activationTargetValue", 0)),
                       meta["valueLocation"], meta["url"])
    raise ValueError(f"trigger type {kind} is not replayed (rabbitmq, metrics-api)")


def spec_of(obj: Dict[str, Any]) -> ScalerSpec:
    """The ScalerSpec of a rendered ScaledObject, KEDA's and the HPA's defaults filled in."""
    s = obj["spec"]
    behavior = ((s.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}) \
        .get("behavior") or {}
    fallback = s.get("fallback") or {}
    return ScalerSpec(
        target=s["scaleTargetRef"]["name"],
        polling=float(s.get("pollingInterval", KEDA_POLLING_INTERVAL)),
        cooldown=float(s.get("cooldownPeriod", KEDA_COOLDOWN)),
        min_replicas=int(s.get("minReplicaCount", KEDA_MIN)),
        max_replicas=int(s.get("maxReplicaCount", KEDA_MAX)),
        fallback_failures=fallback.get("failureThreshold"),
        fallback_replicas=fallback.get("replicas"),
        triggers=[_trigger(t) for t in s["triggers"]],
        up=_rules(behavior.get("scaleUp"), DEFAULT_SCALE_UP),
        down=_rules(behavior.get("scaleDown"), DEFAULT_SCALE_DOWN),
    )


def render_overlay(overlay: str, renderer: str = "auto") -> List[Dict[str, Any]]:
    """The objects of deploy/k8s/overlays/`overlay`, rendered as scripts/validate-k8s.sh
    renders them (example Secrets standing in for the real ones)."""
    _, render = pick_renderer(renderer)
    with tempfile.TemporaryDirectory(prefix="tessera-replay-k8s.") as tmp:
        tree = prepared_tree(Path(tmp))
        return render(tree / "overlays" / overlay)


def load(overlay: str, target: str = "tessera-worker-cpu", renderer: str = "auto") -> ScalerSpec:
    """The ScalerSpec of the ScaledObject scaling `target` in `overlay`."""
    for obj in render_overlay(overlay, renderer):
        if obj.get("kind") == "ScaledObject" and \
                obj["spec"]["scaleTargetRef"]["name"] == target:
            return spec_of(obj)
    raise ValueError(f"overlays/{overlay} has no ScaledObject scaling {target}")
