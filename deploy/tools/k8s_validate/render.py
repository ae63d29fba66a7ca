"""Rendering the overlays: which renderer, what to render, and whether two renders agree.

Why: the validator checks what a cluster would get, i.e. kustomize's output, and it must work
without kubectl; when kubectl is there, the Python renderer is held to its output.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

import yaml

from .errors import RenderError
from .kustomize import PyKustomize
from .objects import Obj, obj_id
from .paths import K8S

# kustomize's "legacy" output order: these kinds first, in this order, the rest after.
ORDER_FIRST = [
    "Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition", "ServiceAccount",
    "PodSecurityPolicy", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
    "ConfigMap", "Secret", "Endpoints", "Service", "LimitRange", "PriorityClass",
    "PersistentVolume", "PersistentVolumeClaim", "Deployment", "StatefulSet", "CronJob",
    "PodDisruptionBudget",
]


def legacy_order(objs: List[Obj]) -> List[Obj]:
    """`objs` in kustomize's legacy output order, so that the Python renderer's output reads
    (and counts) like kubectl's."""
    def key(o: Obj) -> Tuple[int, str, str, str]:
        kind = o.get("kind", "")
        rank = ORDER_FIRST.index(kind) if kind in ORDER_FIRST else len(ORDER_FIRST)
        _, _, ns, name = obj_id(o)
        return rank, f"{o.get('apiVersion')}/{kind}", ns, name
    return sorted(objs, key=key)


def render_python(directory: Path) -> List[Obj]:
    """The kustomization in `directory` built by the pure-Python renderer, in kustomize's
    order: the renderer that needs nothing installed."""
    return legacy_order(PyKustomize().build(directory))


def render_cli(cmd: List[str], directory: Path) -> List[Obj]:
    """The kustomization in `directory` built by `cmd` (kubectl kustomize, kustomize build):
    the real renderers, whose output is what a cluster gets."""
    out = subprocess.run(cmd + [str(directory)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RenderError(f"{' '.join(cmd)} {directory}: {out.stderr.strip()}")
    return [d for d in yaml.safe_load_all(out.stdout) if d is not None]


def pick_renderer(choice: str) -> Tuple[str, Callable[[Path], List[Obj]]]:
    """(name, render function) for --renderer: with auto, the most faithful one installed
    (kubectl, then kustomize, then Python). Exits when the one asked for is missing."""
    kubectl = shutil.which("kubectl")
    kustomize = shutil.which("kustomize")
    if choice in ("auto", "kubectl") and kubectl:
        return "kubectl kustomize", lambda d: render_cli([kubectl, "kustomize"], d)
    if choice in ("auto", "kustomize") and kustomize:
        return "kustomize build", lambda d: render_cli([kustomize, "build"], d)
    if choice in ("auto", "python"):
        return "python renderer", render_python
    raise SystemExit(f"renderer {choice} is not installed")


def first_difference(a: Any, b: Any, path: str = "") -> Optional[str]:
    """The path of the first difference between two values, to say where two renders differ
    without showing the values (they may be secrets)."""
    if type(a) is not type(b):
        return path or "/"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}/{k}"
            d = first_difference(a[k], b[k], f"{path}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path} (length)"
        for n, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}/{n}")
            if d:
                return d
        return None
    return None if a == b else (path or "/")


def diff_renders(a: List[Obj], b: List[Obj]) -> List[str]:
    """Differences between two renders, one line per object (empty when equal): how the
    Python renderer is held to kubectl's output."""
    da = {obj_id(o): o for o in a}
    db = {obj_id(o): o for o in b}
    out = []
    for i in sorted(set(da) | set(db)):
        name = " ".join(x for x in i if x)
        if i not in da or i not in db:
            out.append(f"{name}: only in the {'second' if i not in da else 'first'} render")
        else:
            d = first_difference(da[i], db[i])
            if d:
                out.append(f"{name}: differs at {d}")
    return out


def prepared_tree(tmp: Path) -> Path:
    """A copy of deploy/k8s under `tmp` in which each missing components/secrets/X.env is its
    example: the real env files are not checked in, yet the overlays need them to render."""
    tree = tmp / "k8s"
    shutil.copytree(K8S, tree)
    for example in (tree / "components" / "secrets").glob("*.example.env"):
        real = example.with_name(example.name.replace(".example.env", ".env"))
        if not real.exists():
            shutil.copyfile(example, real)
    return tree


def targets(tree: Path) -> List[Tuple[str, Path]]:
    """(label, directory) of every overlay, and of every component no overlay uses (rendered
    on top of overlays/gpu, through a probe overlay written into `tree`), so that no
    manifest goes unchecked."""
    overlays = sorted(p for p in (tree / "overlays").iterdir() if (p / "kustomization.yaml").is_file())
    used = set()
    for ov in overlays:
        k = yaml.safe_load((ov / "kustomization.yaml").read_text(encoding="utf-8")) or {}
        used |= {(ov / c).resolve() for c in k.get("components", [])}
    out = [(f"overlays/{p.name}", p) for p in overlays]
    for comp in sorted((tree / "components").iterdir()):
        if (comp / "kustomization.yaml").is_file() and comp.resolve() not in used:
            probe = tree / "overlays" / f".probe-{comp.name}"
            probe.mkdir()
            (probe / "kustomization.yaml").write_text(yaml.safe_dump({
                "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                "resources": ["../gpu"], "components": [f"../../components/{comp.name}"]}))
            out.append((f"overlays/gpu + components/{comp.name}", probe))
    return out
