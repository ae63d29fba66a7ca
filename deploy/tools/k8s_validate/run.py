"""A validation run: render every target, check every object (schemas, then the cross-object
checks), print one line per object and the totals.

Why apart from the command line: the self-test checks its broken inputs with the same
check_objects, so what it proves holds for real runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

import yaml

from .checks import consistency
from .nodepools import check as check_nodepools
from .crd_schemas import CrdSchemas
from .errors import RenderError, SchemaSourceError
from .objects import Obj, describe
from .render import diff_renders, pick_renderer, prepared_tree, render_python, targets
from .validator import Validator


def check_objects(label: str, objs: List[Obj], validator: Validator, notes: set,
                  quiet: bool = False) -> Tuple[int, int, List[Tuple[Obj, List[str]]]]:
    """Validates one render, each object against its schema and all of them together
    (consistency); prints one line per object (quiet: only the invalid ones), so that a
    failure says which object and why. Returns (valid, invalid, results)."""
    extra = consistency(objs, notes)
    valid = invalid = 0
    results = []
    for i, o in enumerate(objs):
        against, errs = validator.schema_errors(o)
        errs = errs + extra.get(i, [])
        results.append((o, errs))
        if errs:
            invalid += 1
            print(f"  INVALID {label}: {describe(o)}")
            for e in errs:
                print(f"          - {e}")
        else:
            valid += 1
            if not quiet:
                print(f"  ok      {label}: {describe(o)} ({against})")
    return valid, invalid, results


def load_crd_schemas(args: argparse.Namespace) -> CrdSchemas:
    """The CRD schemas --crd-schemas names, else the pinned ones, and a line saying which:
    without them no custom resource can be checked, so failing to get them exits (status 2)."""
    try:
        crds = (CrdSchemas.local(args.crd_schemas) if args.crd_schemas
                else CrdSchemas.pinned())
    except SchemaSourceError as e:
        print(f"validate-k8s: cannot get the CRD schemas: {e}", file=sys.stderr)
        raise SystemExit(2)
    where = "" if crds.describe() == str(crds.dir) else f" ({crds.dir})"
    print(f"CRD schemas: {crds.describe()}{where}")
    return crds


# The reference node pools and the render whose workloads must fit them.
NODE_POOLS = [("nodepools/karpenter.yaml", "overlays/gpu"), ("nodepools/gke.sh", "overlays/gpu-gke")]


def check_pools(tree: Path, renders: Dict[str, List[Obj]]) -> int:
    """Checks each reference node pool file against its overlay's workloads (nodepools.py),
    printing a line each; returns how many are invalid."""
    invalid = 0
    for pools, label in NODE_POOLS:
        if label not in renders:
            continue
        problems = check_nodepools(renders[label], tree / pools)
        if problems is None:
            continue
        if problems:
            invalid += 1
            print(f"  INVALID {pools} against {label}:")
            for p in problems:
                print(f"          - {p}")
        else:
            print(f"  ok      {pools}: every workload of {label} fits a pool")
    return invalid


def run(args: argparse.Namespace) -> int:
    """Validates every target (render.targets) with the renderer --renderer picks; with a
    CLI renderer, the Python renderer must agree with it. Returns the exit status: 1 when
    anything is invalid."""
    validator = Validator(args.k8s_version, load_crd_schemas(args))
    name, render = pick_renderer(args.renderer)
    valid = invalid = 0
    notes: set = set()
    renders: Dict[str, List[Obj]] = {}
    with tempfile.TemporaryDirectory(prefix="tessera-k8s-") as tmp:
        tree = prepared_tree(Path(tmp))
        for label, path in targets(tree):
            try:
                objs = render(path)
            except (RenderError, yaml.YAMLError, OSError) as e:
                print(f"  INVALID {label}: cannot render: {e}")
                invalid += 1
                continue
            print(f"{label}: {len(objs)} objects ({name})")
            if name != "python renderer":
                try:
                    diffs = diff_renders(objs, render_python(path))
                except (RenderError, yaml.YAMLError, OSError) as e:
                    diffs = [f"cannot render: {e}"]
                if diffs:
                    print(f"  INVALID {label}: the python renderer disagrees with {name}:")
                    for d in diffs:
                        print(f"          - {d}")
                    invalid += 1
                else:
                    print(f"  ok      {label}: the python renderer gives the same objects")
            v, n, _ = check_objects(label, objs, validator, notes)
            valid += v
            invalid += n
            renders[label] = objs
        invalid += check_pools(tree, renders)
    for note in sorted(notes):
        print(f"note: {note}")
    print(f"{valid} valid, {invalid} invalid")
    return 1 if invalid else 0
