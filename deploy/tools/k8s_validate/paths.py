"""Where the validator finds the repository, the manifests, the CRD pins and its cache.

Why one place: every module resolves files relative to the repository, and moving the package
must only change ROOT here.
"""

from __future__ import annotations

import os
from pathlib import Path

# deploy/tools/k8s_validate/paths.py -> the repository root.
ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
CRD_PINS = ROOT / "deploy" / "tools" / "crd-schema-packages.txt"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tessera" / "crd-schemas"
