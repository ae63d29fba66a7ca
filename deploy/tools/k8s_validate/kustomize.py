"""The kustomize subset tessera's manifests use, in pure Python: the renderer of last resort
when neither kubectl nor kustomize is installed, and the one checked against kubectl when it
is. What it does not support it refuses (RenderError), never guesses."""

from __future__ import annotations

import base64
import copy
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from .errors import RenderError
from .objects import Obj, gvk, load_docs

KUSTOMIZATION_KEYS = {
    "apiVersion", "kind", "namespace", "resources", "components", "configMapGenerator",
    "secretGenerator", "generatorOptions", "images", "patches",
}
GENERATOR_KEYS = {"name", "namespace", "envs", "literals", "behavior", "type"}
PATCH_KEYS = {"path", "patch", "target"}
TARGET_KEYS = {"group", "version", "kind", "name", "namespace"}
IMAGE_KEYS = {"name", "newName", "newTag", "digest"}
CLUSTER_SCOPED = {
    "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
    "PersistentVolume", "StorageClass", "PriorityClass", "ClusterTriggerAuthentication",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
}
ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def inside(root: Path, path: Path) -> bool:
    """Whether `path` lies under `root`: kustomize refuses files outside a kustomization, so
    the Python renderer must too, or it would build what kubectl rejects."""
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def parse_env_file(path: Path) -> List[Tuple[str, str]]:
    """The (key, value) pairs of a generator's env file, by kustomize's rules, so that both
    renderers give the same data: leading blanks dropped, '#' lines skipped, split at the
    first '=', the value kept verbatim (no quote or inline-comment handling)."""
    pairs = []
    text = path.read_text(encoding="utf-8")
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip()
        if n == 1:
            line = line.lstrip("\ufeff")
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise RenderError(f"{path}:{n}: no '=' (kustomize would read the value from the "
                              "environment; write it out)")
        key, value = line.split("=", 1)
        if not ENV_KEY.match(key):
            raise RenderError(f"{path}:{n}: '{key}' is not a valid key")
        pairs.append((key, value))
    return pairs


def matches_target(obj: Obj, target: Obj) -> bool:
    """Whether a patch's target selects `obj` (group, version, kind, namespace, and name as
    a regular expression, as kustomize reads it)."""
    group, version, kind = gvk(obj)
    meta = obj.get("metadata") or {}
    if "group" in target and target["group"] != group:
        return False
    if "version" in target and target["version"] != version:
        return False
    if "kind" in target and target["kind"] != kind:
        return False
    if "namespace" in target and target["namespace"] != meta.get("namespace", ""):
        return False
    if "name" in target and not re.fullmatch(target["name"], meta.get("name", "")):
        return False
    return True


def _pointer(path: str) -> List[str]:
    """A JSON pointer (RFC 6901) split into its unescaped parts."""
    if path == "":
        return []
    if not path.startswith("/"):
        raise RenderError(f"JSON pointer '{path}' must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: List[str], path: str) -> Any:
    """The node `parts` lead to; a missing one is a RenderError, as in kustomize."""
    for p in parts:
        if isinstance(doc, list):
            doc = doc[int(p)]
        elif isinstance(doc, dict) and p in doc:
            doc = doc[p]
        else:
            raise RenderError(f"patch path {path}: '{p}' does not exist")
    return doc


def json_patch(doc: Obj, ops: List[Obj]) -> None:
    """Applies RFC 6902 add, remove, replace and test operations in place: the only patch
    form tessera's overlays use. Other operations are refused."""
    for op in ops:
        kind, path = op.get("op"), op.get("path", "")
        parts = _pointer(path)
        if not parts:
            raise RenderError("patches of the whole object are not supported")
        parent = _walk(doc, parts[:-1], path)
        last = parts[-1]
        if kind == "add":
            if isinstance(parent, list):
                idx = len(parent) if last == "-" else int(last)
                parent.insert(idx, copy.deepcopy(op["value"]))
            else:
                parent[last] = copy.deepcopy(op["value"])
        elif kind in ("replace", "remove", "test"):
            if isinstance(parent, list):
                key: Any = int(last)
                if not 0 <= key < len(parent):
                    raise RenderError(f"patch path {path}: index out of range")
            else:
                key = last
                if key not in parent:
                    raise RenderError(f"patch path {path}: '{last}' does not exist")
            if kind == "replace":
                parent[key] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[key]
            elif parent[key] != op.get("value"):
                raise RenderError(f"patch test {path} failed")
        else:
            raise RenderError(f"patch op '{kind}' is not supported")


def split_image(ref: str) -> Tuple[str, str, str]:
    """(name, tag, digest) of an image reference; a registry port is not taken for a tag."""
    name, _, digest = ref.partition("@")
    tag = ""
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    return name, tag, digest


def set_images(node: Any, images: List[Obj]) -> None:
    """Applies a kustomization's `images` to every container and init container below
    `node`, wherever the pod template sits (Deployment, Job, ScaledJob...)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                for c in value:
                    if isinstance(c, dict) and isinstance(c.get("image"), str):
                        c["image"] = new_image(c["image"], images)
            set_images(value, images)
    elif isinstance(node, list):
        for item in node:
            set_images(item, images)


def new_image(ref: str, images: List[Obj]) -> str:
    """`ref` rewritten by the first `images` entry naming it (newName, newTag or digest), as
    kustomize's image transformer does."""
    name, tag, digest = split_image(ref)
    for img in images:
        if img["name"] != name:
            continue
        name = img.get("newName", name)
        if "digest" in img:
            return f"{name}@{img['digest']}"
        tag = img.get("newTag", tag)
        break
    out = name + (f":{tag}" if tag else "")
    return out + (f"@{digest}" if digest else "")


def kustomize_base64(value: str) -> str:
    """Secret data encoded as kustomize writes it, so that the renders compare equal: lines
    of 70 characters, each ended by a newline once there is more than one line's worth (the
    API server ignores the newlines)."""
    enc = base64.b64encode(value.encode()).decode()
    if len(enc) // 70 + 1 == 1:
        return enc
    return "".join(enc[i:i + 70] + "\n" for i in range(0, len(enc), 70))


class PyKustomize:
    """Builds a kustomization the way `kubectl kustomize` does, for the features tessera uses:
    resources, components, namespace, config/secret generators from env files (without name
    hashes), images and RFC 6902 patches with a target. Anything else is refused, not guessed."""

    def build(self, directory: Path, acc: Optional[List[Obj]] = None) -> List[Obj]:
        """The objects of the kustomization in `directory`, unsorted. With `acc`, the
        directory is a Component applied to the objects in `acc` (in place)."""
        kfile = directory / "kustomization.yaml"
        if not kfile.is_file():
            raise RenderError(f"{directory}: no kustomization.yaml")
        k = yaml.safe_load(kfile.read_text(encoding="utf-8")) or {}
        unknown = set(k) - KUSTOMIZATION_KEYS
        if unknown:
            raise RenderError(f"{kfile}: fields the Python renderer does not support: "
                              f"{sorted(unknown)} (use kubectl kustomize)")
        component = k.get("kind") == "Component"
        if component != (acc is not None):
            raise RenderError(f"{kfile}: a Component must be listed under components, a "
                              "Kustomization under resources")
        objs: List[Obj] = acc if acc is not None else []
        for res in k.get("resources", []):
            path = (directory / res)
            if path.is_dir():
                objs.extend(self.build(path))
            elif not inside(directory, path):
                raise RenderError(f"{kfile}: resource file {res} is outside the kustomization")
            else:
                objs.extend(load_docs(path))
        for comp in k.get("components", []):
            self.build(directory / comp, objs)
        self.generate(directory, k, objs)
        for p in k.get("patches", []):
            self.patch(directory, p, objs)
        ns = k.get("namespace")
        if ns:
            for o in objs:
                if o.get("kind") == "Namespace":
                    o["metadata"]["name"] = ns
                elif o.get("kind") not in CLUSTER_SCOPED:
                    o.setdefault("metadata", {})["namespace"] = ns
        images = k.get("images", [])
        for img in images:
            if set(img) - IMAGE_KEYS:
                raise RenderError(f"{kfile}: image fields {sorted(set(img) - IMAGE_KEYS)}")
        if images:
            set_images(objs, images)
        return objs

    def generate(self, directory: Path, k: Obj, objs: List[Obj]) -> None:
        """Runs the ConfigMap and Secret generators of kustomization `k` into `objs`: that is
        how tessera's config and secrets reach the cluster. Name hashes are refused."""
        gens = [("ConfigMap", g) for g in k.get("configMapGenerator", [])]
        gens += [("Secret", g) for g in k.get("secretGenerator", [])]
        if not gens:
            return
        opts = k.get("generatorOptions") or {}
        if set(opts) != {"disableNameSuffixHash"} or opts["disableNameSuffixHash"] is not True:
            raise RenderError(f"{directory}: generators need generatorOptions with only "
                              "disableNameSuffixHash: true (the Python renderer does not "
                              "compute kustomize's name hashes)")
        for kind, g in gens:
            if set(g) - GENERATOR_KEYS:
                raise RenderError(f"{directory}: generator fields {sorted(set(g) - GENERATOR_KEYS)}")
            pairs: List[Tuple[str, str]] = []
            for env in g.get("envs", []):
                path = directory / env
                if not inside(directory, path):
                    raise RenderError(f"{directory}: {env} is outside the kustomization")
                pairs += parse_env_file(path)
            for lit in g.get("literals", []):
                key, _, value = lit.partition("=")
                if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                    value = value[1:-1]
                pairs.append((key, value))
            data: Dict[str, str] = {}
            for key, value in pairs:
                if key in data:
                    raise RenderError(f"{directory}: {kind} {g['name']} repeats key {key}")
                data[key] = value
            if kind == "Secret":
                data = {key: kustomize_base64(v) for key, v in data.items()}
            meta: Obj = {"name": g["name"]}
            if "namespace" in g:
                meta["namespace"] = g["namespace"]
            behavior = g.get("behavior", "create")
            existing = [o for o in objs if o.get("kind") == kind
                        and o["metadata"]["name"] == g["name"]]
            if behavior == "create":
                if existing:
                    raise RenderError(f"{directory}: {kind} {g['name']} exists already")
                new: Obj = {"apiVersion": "v1", "kind": kind, "metadata": meta}
                if data:
                    new["data"] = data
                if kind == "Secret":
                    new["type"] = g.get("type", "Opaque")
                objs.append(new)
            elif behavior in ("merge", "replace"):
                if len(existing) != 1:
                    raise RenderError(f"{directory}: no single {kind} {g['name']} to {behavior}")
                base = existing[0]
                base["data"] = ({**base.get("data", {}), **data} if behavior == "merge"
                                else data)
            else:
                raise RenderError(f"{directory}: generator behavior '{behavior}'")

    def patch(self, directory: Path, p: Obj, objs: List[Obj]) -> None:
        """Applies one `patches` entry (RFC 6902, from a file or inline) to the objects its
        target selects; strategic merge patches are refused."""
        if set(p) - PATCH_KEYS or "target" not in p:
            raise RenderError(f"{directory}: only patches with a target and a path or an inline "
                              "patch are supported")
        target = p["target"]
        if set(target) - TARGET_KEYS:
            raise RenderError(f"{directory}: target fields {sorted(set(target) - TARGET_KEYS)}")
        if "path" in p:
            path = directory / p["path"]
            if not inside(directory, path):
                raise RenderError(f"{directory}: {p['path']} is outside the kustomization")
            ops = yaml.safe_load(path.read_text(encoding="utf-8"))
        else:
            ops = yaml.safe_load(p["patch"])
        if not isinstance(ops, list):
            raise RenderError(f"{directory}: only RFC 6902 (list of operations) patches are "
                              "supported by the Python renderer")
        for o in objs:
            if matches_target(o, target):
                json_patch(o, ops)
