"""Kubernetes objects as plain dicts: reading them from YAML, identifying them, and naming them
(and their errors) in one line of output."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

import yaml

Obj = Dict[str, Any]


def load_docs(path: Path) -> List[Obj]:
    """The non-empty YAML documents of a file: manifests and CRD files hold several, and a
    stray `---` must not count as an object."""
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def gvk(obj: Obj) -> Tuple[str, str, str]:
    """(group, version, kind): how patches target objects and how schemas are looked up."""
    api = obj.get("apiVersion", "")
    group, _, version = api.rpartition("/")
    return group, version, obj.get("kind", "")


def obj_id(obj: Obj) -> Tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name): what makes an object unique in a render, to sort
    and to compare renders."""
    meta = obj.get("metadata") or {}
    return (obj.get("apiVersion", ""), obj.get("kind", ""), meta.get("namespace", ""),
            meta.get("name", ""))


def describe(o: Obj) -> str:
    """`Kind namespace/name`: how the output (and the self-test) names an object."""
    meta = o.get("metadata") or {} if isinstance(o, dict) else {}
    name = meta.get("name", "?")
    ns = meta.get("namespace")
    kind = o.get("kind", "?") if isinstance(o, dict) else "?"
    return f"{kind} {ns + '/' if ns else ''}{name}"


def short(msg: str, limit: int = 300) -> str:
    """`msg` cut to `limit` characters: schema errors can quote whole objects."""
    return msg if len(msg) <= limit else msg[:limit] + "..."
