"""The reference node pools (deploy/k8s/nodepools) against the workloads: every tessera pod
must fit some pool, i.e. the pool's node labels satisfy the pod's nodeSelector and the pod
tolerates every taint the pool puts on its nodes.

Why: a GPU pool without the `tessera-pool=gpu` label, or with a taint the ScaledJob does
not tolerate, leaves every GPU Job Pending and the autoscaler without a pool to grow. Karpenter
and gcloud read these files, not kustomize, so no schema here checks them: this check holds
them to the manifests they are written for.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .objects import Obj, load_docs

# (name, node labels, taints as (key, value, effect)) of one pool.
Pool = Tuple[str, Dict[str, str], List[Tuple[str, str, str]]]


def karpenter_pools(path: Path) -> List[Pool]:
    """The NodePools of a Karpenter file: the labels and taints of the nodes they make."""
    pools = []
    for d in load_docs(path):
        if d.get("kind") != "NodePool":
            continue
        tmpl = (d.get("spec") or {}).get("template") or {}
        labels = dict((tmpl.get("metadata") or {}).get("labels") or {})
        for r in (tmpl.get("spec") or {}).get("requirements", []):
            if r.get("operator") == "In" and len(r.get("values", [])) == 1:
                labels.setdefault(r["key"], r["values"][0])
        taints = [(t["key"], str(t.get("value", "")), t["effect"])
                  for t in (tmpl.get("spec") or {}).get("taints", [])]
        pools.append((d["metadata"]["name"], labels, taints))
    return pools


def gke_pools(path: Path) -> List[Pool]:
    """The `gcloud container node-pools create` commands of a script: their --node-labels and
    --node-taints, plus the taints GKE adds itself (nvidia.com/gpu=present on GPU pools)."""
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    pools = []
    for line in text.splitlines():
        m = re.search(r"gcloud container node-pools create (\S+)(.*)", line)
        if not m:
            continue
        args = shlex.split(m.group(2).replace('"${common[@]}"', ""))
        labels: Dict[str, str] = {}
        taints: List[Tuple[str, str, str]] = []
        for i, a in enumerate(args[:-1]):
            if a == "--node-labels":
                labels.update(kv.split("=", 1) for kv in args[i + 1].split(","))
            elif a == "--node-taints":
                for t in args[i + 1].split(","):
                    kv, effect = t.rsplit(":", 1)
                    k, v = kv.split("=", 1)
                    taints.append((k, v, effect))
            elif a == "--accelerator":
                taints.append(("nvidia.com/gpu", "present", "NoSchedule"))
            elif a == "--spot":
                labels["cloud.google.com/gke-spot"] = "true"
        pools.append((m.group(1), labels, taints))
    return pools


def tolerates(pod: Obj, taint: Tuple[str, str, str]) -> bool:
    """Whether the pod spec tolerates `taint` (Kubernetes' matching rules)."""
    key, value, effect = taint
    for t in pod.get("tolerations", []):
        if t.get("effect") and t["effect"] != effect:
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == key):
            return True
        if t.get("key") == key and str(t.get("value", "")) == value:
            return True
    return False


def unfit(pods: List[Tuple[str, Obj]], pools: List[Pool]) -> List[str]:
    """One problem per (name, pod spec) that fits no pool."""
    problems = []
    for name, pod in pods:
        selector = pod.get("nodeSelector") or {}
        if not any(all(labels.get(k) == v for k, v in selector.items()) and
                   all(tolerates(pod, t) for t in taints) for _, labels, taints in pools):
            problems.append(f"{name} fits no node pool (nodeSelector {selector}, or a taint "
                            "it does not tolerate)")
    return problems


def check(objs: List[Obj], pools_file: Path) -> Optional[List[str]]:
    """Problems of the pools in `pools_file` against a render's workloads; None when the
    file is missing (nothing to check)."""
    if not pools_file.is_file():
        return None
    from .checks import pod_templates
    pools = gke_pools(pools_file) if pools_file.suffix == ".sh" else karpenter_pools(pools_file)
    if not pools:
        return [f"{pools_file.name}: no node pool found"]
    pods = [(f"{o.get('kind')} {(o.get('metadata') or {}).get('name')}", t.get("spec") or {})
            for o in objs for t in pod_templates(o)]
    return unfit(pods, pools)
