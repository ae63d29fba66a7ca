"""An autoscaling replay: the CPU workers of the compose farm scaled by the rules KEDA and
the HPA apply to the ScaledObject of a rendered overlay (deploy/k8s), while spot notices
drain busy workers.

Why: the manifests say how the pool scales; this runs those rules against a real farm with
long stitches, packages and a dispatcher restart, and checks that scaling down never cuts a
task off (a worker leaves only idle or drained, a drain spends no delivery).

Modules:
  triggers.py   the ScaledObject of an overlay, as rendered (k8s_validate's renderer)
  scaler.py     KEDA's and the HPA's rules, pure logic
  tests.py      unit tests of each rule and of reading the overlays
  (the driver modules are listed in driver.py)

  PYTHONPATH=deploy/tools python3 -m unittest replay.tests
  scripts/autoscale-replay.sh       the replay itself
"""
