"""Checks no schema can make, over one whole render: references between objects (ConfigMaps,
Secrets, ServiceAccounts, claims, scale targets, trigger authentications, selectors and
ports), the RabbitMQ queue names against model/src/wire.rs, every TESSERA_* name and worker
flag against the Rust sources, and each worker's TESSERA_GRACE_SECONDS against its pod's
terminationGracePeriodSeconds; and (coverage.py) that every queue a worker consumes wakes a
pool.

Why: each object can be valid on its own while the deployment is broken, e.g. a ScaledObject
watching a queue nobody publishes to, or a grace period that kills workers mid-drain.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from .coverage import uncovered_queues
from .objects import Obj
from .paths import ROOT

# TESSERA_* names and worker flags the manifests may use before the code has them: listed as
# notes, not failed. Empty now that the worker has --exit-when-idle and the spot settings;
# add a name only while its code is on the way, and drop it once the code defines it, so that
# a rename fails validation. (The dispatcher's GET /scaling URL in components/
# desired-workers-cpu is not checked against the code at all.)
PENDING_IN_CODE: set = set()


def pod_templates(obj: Obj) -> List[Obj]:
    """The pod templates of a workload (Deployment, Job, CronJob, KEDA ScaledJob...), where
    the references, settings and grace periods to check are."""
    spec = obj.get("spec") or {}
    kind = obj.get("kind")
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"):
        return [spec.get("template") or {}]
    if kind == "CronJob":
        return [((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}]
    if kind == "ScaledJob":
        return [(spec.get("jobTargetRef") or {}).get("template") or {}]
    if kind == "Pod":
        return [obj]
    return []


def selects(selector: Optional[Obj], labels: Optional[Obj]) -> bool:
    """Whether `selector` (a Service's plain map or a LabelSelector with matchLabels and
    matchExpressions) selects `labels`: a selector matching nothing is a silent outage."""
    if not selector:
        return False
    labels = labels or {}
    label_selector = "matchLabels" in selector or "matchExpressions" in selector
    match = (selector.get("matchLabels") or {}) if label_selector else selector
    if not all(labels.get(k) == v for k, v in match.items()):
        return False
    for e in selector.get("matchExpressions", []):
        has, val = e["key"] in labels, labels.get(e["key"])
        op = e["operator"]
        if (op == "In" and val not in e.get("values", [])) or \
           (op == "NotIn" and has and val in e.get("values", [])) or \
           (op == "Exists" and not has) or (op == "DoesNotExist" and has):
            return False
    return True


def code_names() -> Tuple[Optional[set], Optional[set]]:
    """TESSERA_* names quoted in the Rust sources, and the long flags of the service binaries
    (clap derives `--foo-bar` from a field `foo_bar`), so that a setting or flag the binaries
    do not know fails here instead of being ignored (or refused) in the cluster. (None, None)
    without sources."""
    sources = [p for p in ROOT.glob("*/src/**/*.rs")]
    if not sources:
        return None, None
    envs, fields = set(), set()
    for p in sources:
        text = p.read_text(encoding="utf-8", errors="replace")
        envs.update(re.findall(r'"(TESSERA_[A-Z0-9_]+)"', text))
        fields.update(re.findall(r"\bpub ([a-z][a-z0-9_]*):", text))
    return envs, {"--" + f.replace("_", "-") for f in fields}


def queue_names() -> Optional[set]:
    """The queue names model/src/wire.rs declares, which KEDA's RabbitMQ triggers must watch;
    None without the Rust sources (the manifests checked alone). With the sources but without
    the file (it moved), or with no queue name in it, the check fails loudly instead of being
    skipped."""
    model = ROOT / "model" / "src" / "wire.rs"
    if not model.is_file():
        if any(ROOT.glob("*/src/**/*.rs")):
            raise SystemExit(f"k8s_validate: {model} not found: the queue-name check cannot "
                             "run (update checks.py to where the queue names live)")
        return None
    # The wire module and its submodules (wire/whole.rs declares the whole-input queue).
    texts = [p.read_text(encoding="utf-8") for p in [model, *sorted((model.parent / "wire").glob("*.rs"))]]
    names = set(re.findall(r'pub const QUEUE_[A-Z_]+: &str = "([^"]+)"', "\n".join(texts)))
    if not names:
        raise SystemExit(f"k8s_validate: no QUEUE_* names in {model}")
    return names


def data_keys(o: Obj) -> set:
    """The keys of a ConfigMap's or Secret's data and stringData: what envFrom and key
    references can reach."""
    return set((o.get("data") or {}).keys()) | set((o.get("stringData") or {}).keys())


class RenderChecks:
    """One render indexed for the checks (objects by kind and name, the workloads' pod
    templates), what the code defines, and the problems found, per object index."""

    def __init__(self, objs: List[Obj], notes: set):
        """`notes` collects the pending names seen (PENDING_IN_CODE), printed once per run."""
        self.notes = notes
        self.problems: Dict[int, List[str]] = {i: [] for i in range(len(objs))}
        self.by_kind: Dict[str, Dict[str, Obj]] = {}
        for o in objs:
            self.by_kind.setdefault(o.get("kind", ""), {})[
                (o.get("metadata") or {}).get("name", "")] = o
        self.cms = self.by_kind.get("ConfigMap", {})
        self.secrets = self.by_kind.get("Secret", {})
        self.envs_in_code, self.flags_in_code = code_names()
        self.queues = queue_names()
        self.workload_pods: List[Tuple[Obj, Obj]] = []  # (owner, pod template)

    def check_name(self, i: int, name: str, where: str) -> None:
        """A TESSERA_* name no binary reads is a problem of object `i` (a typo, or a setting
        renamed in the code); a pending one is a note."""
        if not name.startswith("TESSERA_") or self.envs_in_code is None:
            return
        if name in self.envs_in_code:
            return
        if name in PENDING_IN_CODE:
            self.notes.add(f"{name} is used by the manifests but not defined in the code yet")
        else:
            self.problems[i].append(f"{where}: {name} is not a setting of any tessera binary")

    def check_flag(self, i: int, c: Obj, arg: Any) -> None:
        """A `--flag` argument no binary has is a problem of object `i`: clap would refuse it
        and the pod would crash-loop. A pending one is a note."""
        if isinstance(arg, str) and arg.startswith("--") and self.flags_in_code is not None:
            flag = arg.split("=", 1)[0]
            if flag in self.flags_in_code:
                return
            if flag in PENDING_IN_CODE:
                self.notes.add(f"{flag} is used by the manifests but not defined in the "
                               "code yet")
            else:
                self.problems[i].append(f"container {c['name']}: {flag} is not a flag "
                                        "of any tessera binary")

    def pod(self, i: int, o: Obj, tmpl: Obj) -> None:
        """Checks a pod template of object `i`: the Deployment's selector, the service
        account, the claims, then each container."""
        spec = o.get("spec") or {}
        pod = tmpl.get("spec") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        if o.get("kind") == "Deployment" and not selects(spec.get("selector"), labels):
            self.problems[i].append("spec.selector does not select the pod template's labels")
        sa = pod.get("serviceAccountName")
        if sa and sa not in self.by_kind.get("ServiceAccount", {}):
            self.problems[i].append(f"serviceAccountName {sa}: no such ServiceAccount")
        pc = pod.get("priorityClassName")
        if pc and pc not in self.by_kind.get("PriorityClass", {}) and \
                not pc.startswith("system-"):
            self.problems[i].append(f"priorityClassName {pc}: no such PriorityClass (the pod "
                                    "would be refused at admission)")
        for v in pod.get("volumes", []):
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and claim not in self.by_kind.get("PersistentVolumeClaim", {}):
                self.problems[i].append(f"volume {v['name']}: no PersistentVolumeClaim {claim}")
        grace_pod = pod.get("terminationGracePeriodSeconds", 30)
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            self.container(i, c, grace_pod)

    def container(self, i: int, c: Obj, grace_pod: Any) -> None:
        """Checks a container of object `i`: its envFrom and env references, the TESSERA_*
        names and flags it gets, and that its drain (TESSERA_GRACE_SECONDS) ends before the
        kubelet's SIGKILL (`grace_pod`)."""
        env: Dict[str, str] = {}
        for ef in c.get("envFrom", []):
            for ref_kind, pool in (("configMapRef", self.cms), ("secretRef", self.secrets)):
                ref = ef.get(ref_kind)
                if not ref:
                    continue
                src = pool.get(ref["name"])
                if src is None:
                    if not ref.get("optional"):
                        self.problems[i].append(f"container {c['name']}: envFrom "
                                                f"{ref_kind} {ref['name']} does not exist")
                    continue
                for key in data_keys(src):
                    env[key] = (src.get("data") or {}).get(key, "") \
                        if ref_kind == "configMapRef" else "(secret)"
        for e in c.get("env", []):
            env[e["name"]] = e.get("value", "(from valueFrom)")
            for ref_kind, pool in (("configMapKeyRef", self.cms), ("secretKeyRef", self.secrets)):
                ref = (e.get("valueFrom") or {}).get(ref_kind)
                if ref and not ref.get("optional") and (
                        ref["name"] not in pool or ref["key"] not in data_keys(pool[ref["name"]])):
                    self.problems[i].append(f"env {e['name']}: {ref_kind} "
                                            f"{ref['name']}/{ref['key']} does not exist")
        for name in env:
            self.check_name(i, name, f"container {c['name']}")
        for arg in c.get("args", []) + c.get("command", []):
            self.check_flag(i, c, arg)
        grace = env.get("TESSERA_GRACE_SECONDS")
        if grace is not None:
            try:
                if int(grace) >= int(grace_pod):
                    self.problems[i].append(
                        f"container {c['name']}: TESSERA_GRACE_SECONDS {grace} must be "
                        f"below terminationGracePeriodSeconds {grace_pod}: the kubelet "
                        "would kill the worker mid-drain")
            except ValueError:
                self.problems[i].append(f"TESSERA_GRACE_SECONDS '{grace}' is not a number")

    def keda(self, i: int, o: Obj) -> None:
        """Checks object `i` if it is a KEDA object: its scale target and trigger
        authentications exist, its RabbitMQ queues are the code's, a TriggerAuthentication's
        Secret keys exist."""
        kind, spec = o.get("kind"), o.get("spec") or {}
        if kind == "ScaledObject":
            ref = spec.get("scaleTargetRef") or {}
            target_kind = ref.get("kind", "Deployment")
            if ref and ref.get("name") not in self.by_kind.get(target_kind, {}):
                self.problems[i].append(f"scaleTargetRef: no {target_kind} {ref.get('name')}")
        if kind in ("ScaledObject", "ScaledJob"):
            for t in spec.get("triggers", []):
                auth = t.get("authenticationRef") or {}
                if auth and auth.get("name") not in self.by_kind.get(
                        auth.get("kind", "TriggerAuthentication"), {}):
                    self.problems[i].append(f"trigger {t.get('name')}: no "
                                            f"{auth.get('kind', 'TriggerAuthentication')} "
                                            f"{auth.get('name')}")
                q = (t.get("metadata") or {}).get("queueName")
                if t.get("type") == "rabbitmq" and self.queues is not None and q not in self.queues:
                    self.problems[i].append(f"trigger {t.get('name')}: queue {q} is not one of "
                                            f"model/src/wire.rs's {sorted(self.queues)}")
        if kind == "TriggerAuthentication":
            for ref in spec.get("secretTargetRef", []):
                s = self.secrets.get(ref["name"])
                if s is None or ref["key"] not in data_keys(s):
                    self.problems[i].append(f"secretTargetRef {ref['parameter']}: no key "
                                            f"{ref['key']} in Secret {ref['name']}")

    def selectors(self, i: int, o: Obj) -> None:
        """Checks object `i` if it selects others (Service, PodDisruptionBudget,
        NetworkPolicy, ServiceMonitor, PodMonitor): it must select something, and the ports it names must
        exist there. Needs every workload's pod templates collected first."""
        kind, spec = o.get("kind"), o.get("spec") or {}
        problems = self.problems[i]
        if kind == "Service":
            pods = [t for _, t in self.workload_pods
                    if selects(spec.get("selector"), (t.get("metadata") or {}).get("labels"))]
            if not pods:
                problems.append("spec.selector matches no pod template")
            named = {p.get("name") for t in pods
                     for c in (t.get("spec") or {}).get("containers", [])
                     for p in c.get("ports", [])}
            for port in spec.get("ports", []):
                tp = port.get("targetPort")
                if isinstance(tp, str) and tp not in named:
                    problems.append(f"port {port.get('name')}: no container port named {tp}")
        if kind == "NetworkPolicy" and spec.get("podSelector"):
            if not any(selects(spec["podSelector"], (t.get("metadata") or {}).get("labels"))
                       for _, t in self.workload_pods):
                problems.append("spec.podSelector matches no pod template")
        if kind == "PodDisruptionBudget":
            if not any(selects(spec.get("selector"), (t.get("metadata") or {}).get("labels"))
                       for _, t in self.workload_pods):
                problems.append("spec.selector matches no pod template")
        if kind == "ServiceMonitor":
            svcs = [s for s in self.by_kind.get("Service", {}).values()
                    if selects(spec.get("selector"), (s.get("metadata") or {}).get("labels"))]
            if not svcs:
                problems.append("spec.selector matches no Service")
            names = {p.get("name") for s in svcs for p in (s.get("spec") or {}).get("ports", [])}
            for ep in spec.get("endpoints", []):
                if ep.get("port") and ep["port"] not in names:
                    problems.append(f"endpoint port {ep['port']}: not a port of the Services")
        if kind == "PodMonitor":
            pods = [t for _, t in self.workload_pods
                    if selects(spec.get("selector"), (t.get("metadata") or {}).get("labels"))]
            if not pods:
                problems.append("spec.selector matches no pod template")
            for t in pods:
                named = {p.get("name") for c in (t.get("spec") or {}).get("containers", [])
                         for p in c.get("ports", [])}
                for ep in spec.get("podMetricsEndpoints", []):
                    if ep.get("port") and ep["port"] not in named:
                        problems.append(f"port {ep['port']}: not on every selected pod")


def consistency(objs: List[Obj], notes: set) -> Dict[int, List[str]]:
    """Problems per object (by index) that only the whole render shows; pending names go
    into `notes`. Objects that select others are checked last, once every pod template is
    known."""
    checks = RenderChecks(objs, notes)
    for i, o in enumerate(objs):
        for tmpl in pod_templates(o):
            checks.workload_pods.append((o, tmpl))
            checks.pod(i, o, tmpl)
        checks.keda(i, o)
        if o.get("kind") in ("ConfigMap", "Secret"):
            for key in data_keys(o):
                checks.check_name(i, key, f"{o.get('kind')} key")
    for i, o in enumerate(objs):
        checks.selectors(i, o)
    for i, found in uncovered_queues(objs, checks.workload_pods, checks.cms).items():
        checks.problems[i].extend(found)
    return checks.problems
