"""Schema validation of one object: built-in kinds against the Kubernetes schemas of
kubernetes-validate, custom resources against their CRD schemas (crd_schemas.py), both strict.

Why strict: `kubectl apply` rejects unknown fields by default (server-side field validation),
so a misspelt field must fail here rather than on the cluster.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

import jsonschema

from .crd_schemas import CrdSchemas, schema_name
from .objects import Obj, gvk, short


def strictify(node: Any) -> Any:
    """What `kubectl apply` (server-side field validation, strict by default) does to a custom
    resource: a field the schema does not list is an error, unless the schema keeps unknown
    fields. Expressed as additionalProperties: false on every object schema with properties."""
    if isinstance(node, dict):
        out = {k: strictify(v) if k != "properties" else
               {pk: strictify(pv) for pk, pv in v.items()} for k, v in node.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [strictify(v) for v in node]
    return node


class Validator:
    """Checks objects against the schemas of one Kubernetes version and one set of CRD
    schemas, compiling each CRD schema once per run."""

    def __init__(self, k8s_version: str, crds: CrdSchemas):
        """Imports kubernetes_validate here, not at module level: only the virtualenv of
        scripts/validate-k8s.sh has it, and extract-crd does not need it."""
        import kubernetes_validate  # installed by scripts/validate-k8s.sh
        import kubernetes_validate.utils as kvu
        self.kv = kubernetes_validate
        self.kvu = kvu
        self.version = k8s_version
        self.crds = crds
        self.crd: Dict[Tuple[str, str, str], Any] = {}

    def crd_validator(self, group: str, version: str, kind: str):
        """The strict, compiled validator of a custom resource kind (cached); None when no
        CRD schema knows the kind."""
        key = (group, version, kind)
        if key not in self.crd:
            path = self.crds.path(group, version, kind)
            if path is None:
                self.crd[key] = None
            else:
                schema = strictify(json.loads(path.read_text(encoding="utf-8")))
                # CRD schemas are OpenAPI 3.0, whose keywords are those of JSON Schema draft 4.
                self.crd[key] = jsonschema.Draft4Validator(schema)
        return self.crd[key]

    def builtin(self, obj: Obj) -> Optional[List[str]]:
        """Errors against the Kubernetes schema (strict); None when it has no schema for the
        kind, which then must be a custom resource."""
        try:
            self.kv.validate(obj, self.version, strict=True)
            return []
        except self.kvu.SchemaNotFoundError:
            return None
        except self.kvu.ValidationError as e:
            where = ".".join(str(p) for p in e.path) or "(object)"
            return [f"{where}: {e.message}"]

    def schema_errors(self, obj: Obj) -> Tuple[str, List[str]]:
        """(what it was checked against, errors) of one object: the Kubernetes schema for a
        built-in kind, else its CRD schema (plus a ScaledJob's jobTargetRef as a batch/v1 Job,
        which the CRD leaves open). No schema at all is an error."""
        if not isinstance(obj, dict) or "apiVersion" not in obj or "kind" not in obj:
            return "nothing", ["not a Kubernetes object (apiVersion and kind missing)"]
        group, version, kind = gvk(obj)
        errs = self.builtin(obj)
        if errs is not None:
            return f"kubernetes {self.version}", errs
        v = self.crd_validator(group, version, kind)
        if v is None:
            return "nothing", [f"no schema for {obj['apiVersion']} {kind} (neither Kubernetes "
                               f"{self.version} nor {self.crds.describe()})"]
        errs = []
        for e in sorted(v.iter_errors(obj), key=lambda e: list(map(str, e.path))):
            where = ".".join(str(p) for p in e.path) or "(object)"
            errs.append(f"{where}: {short(e.message)}")
        name = (obj.get("metadata") or {}).get("name", "")
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", str(name)):
            errs.append(f"metadata.name: '{name}' is not a DNS subdomain name")
        if kind == "ScaledJob" and isinstance(obj.get("spec", {}).get("jobTargetRef"), dict):
            job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name or "x"},
                   "spec": obj["spec"]["jobTargetRef"]}
            errs += [f"spec.jobTargetRef (as a batch/v1 Job): {m}"
                     for m in (self.builtin(job) or [])]
        against = self.crds.sources.get(schema_name(group, version, kind), str(self.crds.dir))
        if kind == "ScaledJob":
            against += f" + kubernetes {self.version}"
        return against, errs
