"""The command line: `python -m k8s_validate` (with deploy/tools on PYTHONPATH, as
scripts/validate-k8s.sh runs it). See the package docstring for what it does."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List

from . import __doc__ as PACKAGE_DOC
from .crd_schemas import extract_crds
from .run import run
from .selftest import self_test

DEFAULT_K8S_VERSION = "1.30"


def main(argv: List[str]) -> int:
    """Parses `argv` and runs the validation, the self-test or extract-crd; returns the exit
    status (1: something invalid or a self-test case failed)."""
    if argv[:1] == ["extract-crd"]:
        extract_crds(argv[1:])
        return 0
    p = argparse.ArgumentParser(prog="python -m k8s_validate",
                                description=(PACKAGE_DOC or "").split("\n")[0])
    p.add_argument("--renderer", default="auto", choices=["auto", "kubectl", "kustomize", "python"])
    p.add_argument("--k8s-version", default=os.environ.get("K8S_VERSION", DEFAULT_K8S_VERSION))
    p.add_argument("--crd-schemas", type=Path, metavar="DIR",
                   help="validate custom resources against the schemas in DIR (extract-crd) "
                        "instead of those of deploy/tools/crd-schema-packages.txt")
    p.add_argument("--self-test", action="store_true")
    args = p.parse_args(argv)
    return self_test(args) if args.self_test else run(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
