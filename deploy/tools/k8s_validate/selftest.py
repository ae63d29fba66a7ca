"""--self-test: deliberately broken manifests, model sources and wheels must be rejected, and
the good render accepted.

Why: a validator that accepts everything passes silently. Each case breaks one thing the
validator claims to catch (schemas, cross-object checks, the Python renderer's refusals, the
model converter, the sha256 pin) and fails the self-test if it is not caught.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import yaml

from .crd_models import ModelSource
from .crd_schemas import fetch_wheels, read_pins, wheel_glob
from .checks import pod_templates
from .errors import RenderError, SchemaSourceError
from .nodepools import karpenter_pools, unfit
from .objects import Obj, describe, short
from .render import prepared_tree, render_python
from .run import check_objects, load_crd_schemas
from .validator import Validator

# Added to the good render: each must be rejected by its schema.
BROKEN_SCALEDOBJECT = """
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: broken-scaledobject, namespace: tessera}
spec:
  # no scaleTargetRef; a string where KEDA wants an integer; an unknown field
  minReplicaCount: "zero"
  minReplicas: 0
  triggers:
    - type: rabbitmq
      metadata:
        protocol: http
        value: 1            # trigger metadata values must be strings
        queueName: tessera.encode.cpu
"""

BROKEN_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: broken-deployment, namespace: tessera}
spec:
  replica: 1                # the field is `replicas`
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers:
        - name: worker
          image: tessera/worker:latest
"""

# A model module in the generator's style, and the schema ModelSource must rebuild from it.
MODEL_SAMPLE = """
class SampleSpecTarget(BaseModel):
    model_config = ConfigDict(extra='allow')
    name: str
    port: int | str | None = None

class SampleSpec(BaseModel):
    replicas: Annotated[int | None, Field(alias='replicaCount', ge=0, le=9)] = None
    mode: Literal['a', 'b'] = 'a'
    names: Annotated[list[str], Field(min_length=1)]
    labels: dict[str, str] | None = None
    target: SampleSpecTarget | None = None

class Sample(Resource):
    __cloudcoil_api__: ClassVar[dict] = {'plural': 'samples'}
    api_version: Annotated[Literal['example.com/v1'], Field(alias='apiVersion')] = 'example.com/v1'
    kind: Literal['Sample'] = 'Sample'
    metadata: ObjectMeta | None = None
    spec: SampleSpec
"""
MODEL_SAMPLE_SCHEMA = {
    "type": "object", "required": ["spec"], "properties": {
        "apiVersion": {"type": "string", "enum": ["example.com/v1"]},
        "kind": {"type": "string", "enum": ["Sample"]},
        "metadata": {"type": "object"},
        "spec": {"type": "object", "required": ["names"], "properties": {
            "replicaCount": {"type": "integer", "minimum": 0, "maximum": 9},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "names": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "target": {"type": "object", "required": ["name"],
                       "x-kubernetes-preserve-unknown-fields": True, "properties": {
                           "name": {"type": "string"},
                           "port": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}}}}}


def self_test(args: argparse.Namespace) -> int:
    """Runs every case, printing one verdict each, then the totals. Returns the exit status:
    1 when any case came out otherwise than expected."""
    validator = Validator(args.k8s_version, load_crd_schemas(args))
    failures = passed = 0
    notes: set = set()

    def expect(label: str, objs: List[Obj], bad: Optional[str], want_invalid: bool) -> None:
        """Checks `objs` together; the object described `bad` (any, when None) must be (or not
        be) invalid."""
        nonlocal failures, passed
        print(f"{label}:")
        _, _, results = check_objects("self-test", objs, validator, notes, quiet=True)
        got_invalid = any(errs for o, errs in results if bad is None or describe(o) == bad)
        if got_invalid != want_invalid:
            failures += 1
            print(f"  SELF-TEST FAILURE: {label}: expected "
                  f"{'rejection' if want_invalid else 'acceptance'}")
        else:
            passed += 1
            print(f"  as expected: {'rejected' if want_invalid else 'accepted'}")

    with tempfile.TemporaryDirectory(prefix="tessera-k8s-") as tmp:
        tree = prepared_tree(Path(tmp))
        good = render_python(tree / "overlays" / "gpu")
        expect("control: overlays/gpu as rendered is accepted", good, None, False)

        so = yaml.safe_load(BROKEN_SCALEDOBJECT)
        expect("a broken ScaledObject is rejected", good + [so], describe(so), True)
        dep = yaml.safe_load(BROKEN_DEPLOYMENT)
        expect("a Deployment with a wrong field is rejected", good + [dep], describe(dep), True)

        # Each case breaks one thing in a copy of the good render; that object must fail.
        cases: List[Tuple[str, str, Callable[[Obj], None]]] = [
            ("a ScaledJob with an unknown scaling strategy", "ScaledJob tessera/tessera-worker-gpu",
             lambda o: o["spec"]["scalingStrategy"].update(strategy="greedy")),
            ("a ScaledJob whose Job has a misspelt field", "ScaledJob tessera/tessera-worker-gpu",
             lambda o: o["spec"]["jobTargetRef"].update(backofLimit=0)),
            ("a ScaledJob whose pod has a port that is not a number",
             "ScaledJob tessera/tessera-worker-gpu",
             lambda o: o["spec"]["jobTargetRef"]["template"]["spec"]["containers"][0]["ports"][0]
             .update(containerPort="9464")),
            ("a ScaledObject on a queue the code does not declare",
             "ScaledObject tessera/tessera-worker-cpu",
             lambda o: o["spec"]["triggers"][0]["metadata"].update(queueName="tessera.encode")),
            ("a ServiceMonitor with a numeric port", "ServiceMonitor tessera/tessera-dispatcher",
             lambda o: o["spec"]["endpoints"][0].update(port=8080)),
            ("a worker whose grace period is shorter than its drain",
             "Deployment tessera/tessera-worker-cpu",
             lambda o: o["spec"]["template"]["spec"].update(terminationGracePeriodSeconds=90)),
            ("a TriggerAuthentication naming a missing Secret key",
             "TriggerAuthentication tessera/tessera-rabbitmq",
             lambda o: o["spec"]["secretTargetRef"][0].update(key="url")),
            ("a setting no tessera binary has", "ConfigMap tessera/tessera-worker-config",
             lambda o: o["data"].update(TESSERA_NO_SUCH_SETTING="1")),
            ("a worker naming a PriorityClass that does not exist",
             "Deployment tessera/tessera-worker-cpu",
             lambda o: o["spec"]["template"]["spec"].update(priorityClassName="tessera-wrker")),
            ("a PodDisruptionBudget that selects no pod",
             "PodDisruptionBudget tessera/tessera-worker-cpu",
             lambda o: o["spec"]["selector"]["matchLabels"].update(
                 {"app.kubernetes.io/component": "worker"})),
            ("an object of a kind no schema knows", "Namespace tessera",
             lambda o: o.update(apiVersion="example.com/v1")),
        ]
        for label, which, change in cases:
            objs = copy.deepcopy(good)
            change(next(o for o in objs if describe(o) == which))
            expect(label + " is rejected", objs, which, True)

        # A queue the workers consume that no trigger watches: the worker Deployment that
        # consumes it fails (review gap 1: the stitch queue had no trigger). Then a stitch
        # running (acked at its start, so no queue counts it) with only queue triggers: the
        # pool could be scaled to zero under it (the autoscaling replay saw it drained).
        so_name = "ScaledObject tessera/tessera-worker-cpu"
        for label, drop in (
            ("a ScaledObject without the stitch queue's triggers is rejected",
             lambda t: (t.get("metadata") or {}).get("queueName") == "tessera.stitch"
             or t.get("type") == "metrics-api"),
            ("a ScaledObject whose triggers miss running stitches is rejected",
             lambda t: t.get("type") == "metrics-api"),
        ):
            objs = copy.deepcopy(good)
            so = next(o for o in objs if describe(o) == so_name)
            so["spec"]["triggers"] = [t for t in so["spec"]["triggers"] if not drop(t)]
            expect(label, objs, "Deployment tessera/tessera-worker-cpu", True)

        # A GPU node pool without the ScaledJob's label: the GPU Jobs fit no pool.
        pools = karpenter_pools(tree / "nodepools" / "karpenter.yaml")
        broken = [(n, {k: v for k, v in labels.items() if k != "tessera-pool"}, taints)
                  for n, labels, taints in pools]
        gpu_pods = [("gpu", t.get("spec") or {}) for o in good for t in pod_templates(o)]
        for label, which, want in (("the reference Karpenter pools fit every workload", pools,
                                    False),
                                   ("a GPU NodePool without tessera-pool=gpu is rejected",
                                    broken, True)):
            got = bool(unfit(gpu_pods, which))
            print(f"{label}:")
            if got == want:
                passed += 1
                print(f"  as expected: {'rejected' if want else 'accepted'}")
            else:
                failures += 1
                print(f"  SELF-TEST FAILURE: {label}")

        # The Python renderer itself: refuses what it does not support.
        probe = tree / "overlays" / ".probe-unsupported"
        probe.mkdir()
        (probe / "kustomization.yaml").write_text(
            "resources: [../cpu]\ncommonLabels: {a: b}\n", encoding="utf-8")
        try:
            render_python(probe)
            failures += 1
            print("  SELF-TEST FAILURE: the python renderer accepted commonLabels")
        except RenderError as e:
            passed += 1
            print("the python renderer refuses what it does not support (commonLabels):")
            print(f"  as expected: {short(str(e).split(': ', 1)[-1], 100)}")

        # Where the CRD schemas come from: the converter, and the hash check.
        got = ModelSource(MODEL_SAMPLE, "self-test").resources()
        if got == {("example.com", "v1", "Sample"): MODEL_SAMPLE_SCHEMA}:
            passed += 1
            print("the model-to-schema converter gives the expected schema:\n  as expected")
        else:
            failures += 1
            print(f"  SELF-TEST FAILURE: the converter gave {short(json.dumps(got), 200)}")
        try:
            ModelSource(MODEL_SAMPLE.replace("list[str]", "set[str]"), "self-test").resources()
            failures += 1
            print("  SELF-TEST FAILURE: the converter accepted a type it does not know")
        except SchemaSourceError as e:
            passed += 1
            print("the converter refuses what it does not know (set[str]):")
            print(f"  as expected: {short(str(e), 100)}")
        name, version, digest = read_pins()[0]
        fake = Path(tmp) / "cache"
        (fake / "wheels").mkdir(parents=True)
        (fake / "wheels" / wheel_glob(name, version).replace("*", "py3-none-any")).write_bytes(
            b"not the wheel")
        try:
            fetch_wheels([(name, version, digest)], fake)
            failures += 1
            print("  SELF-TEST FAILURE: a CRD package with another sha256 was used")
        except SchemaSourceError as e:
            passed += 1
            print("a CRD package whose sha256 is not the recorded one is refused:")
            print(f"  as expected: {short(str(e).split(': ', 1)[-1], 100)}")

    print(f"self-test: {passed} as expected, {failures} unexpected")
    return 1 if failures else 0
