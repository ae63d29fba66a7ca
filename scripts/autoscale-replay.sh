#!/usr/bin/env bash
# The autoscaling replay (issue 30, docs/deploy.md "Autoscaling replay"): the compose farm's
# CPU workers scaled by the rules KEDA and the HPA apply to the ScaledObject of a rendered
# overlay (deploy/k8s/overlays/cpu by default), while spot notices drain busy workers. A batch
# of short jobs, a long one whose stitch + QC outlasts the cooldown, an HLS package and a
# dispatcher restart after the long job's segments must all end done and frame-exact, with
# no task cut off by a scale-down and no delivery spent by a drain; then it prints the
# worker-seconds used against the sum of task times.
#
#   scripts/autoscale-replay.sh                          # the full batch
#   TESSERA_REPLAY_JOBS=sample scripts/autoscale-replay.sh   # one job of each kind (CI)
#   TESSERA_REPLAY_OVERLAY=cpu-desired-workers ...       # scale on GET /scaling instead
#   TESSERA_REPLAY_TIME_SCALE=30                         # manifest durations / 30 (default)
#   TESSERA_REPLAY_SPOT_SECONDS=30                       # a spot notice's lead time
#   TESSERA_REPLAY_GRACE_SECONDS=100                     # the workers' drain grace
#   TESSERA_REPLAY_KEEP=1                                # leave the farm up afterwards
#   TESSERA_DOCKER_BUILD=1                               # scripts/docker-images.sh first
#
# Compose project `tessera-replay` (TESSERA_REPLAY_PROJECT), free ports, files under
# /tmp/tessera-replay (TESSERA_REPLAY_DIR); it removes only that project's containers and
# volumes. Needs Docker with docker-compose, the images of scripts/docker-images.sh, ffmpeg
# and ffprobe, python3 with PyYAML, and kubectl or nothing (the Python kustomize renderer).
# Exit 0 when every check passed, 1 when one failed, 2 when no Docker engine answers.
# The scaler's unit tests: PYTHONPATH=deploy/tools python3 -m unittest replay.tests
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! docker info >/dev/null 2>&1; then
  echo "autoscale-replay: no Docker engine answers here; the replay did NOT run" >&2
  exit 2
fi
if [[ ${TESSERA_DOCKER_BUILD:-0} == 1 ]]; then
  bash scripts/docker-images.sh
fi
# The images compose.yaml names: ${TESSERA_REGISTRY:-tessera}/NAME:latest, or the Debian
# variant (latest-full) where only that one was built.
registry=${TESSERA_REGISTRY:-tessera}
if [[ -z ${TESSERA_VARIANT+x} ]] && ! docker image inspect "$registry/worker:latest" >/dev/null 2>&1 \
   && docker image inspect "$registry/worker:latest-full" >/dev/null 2>&1; then
  export TESSERA_VARIANT=-full
fi
. scripts/compose-images.sh && tessera_service_images
for image in "$registry/dispatcher:latest${TESSERA_VARIANT:-}" "$registry/worker:latest${TESSERA_VARIANT:-}" \
             "$registry/cli:latest" "${RABBITMQ_IMAGE:-$tessera_rabbitmq_official}"; do
  if ! docker image inspect "$image" >/dev/null 2>&1; then
    echo "autoscale-replay: no image $image: run scripts/docker-images.sh first" >&2
    exit 1
  fi
done
export PYTHONPATH="$PWD/deploy/tools${PYTHONPATH:+:$PYTHONPATH}"
python3 -m unittest -q replay.tests
exec python3 -m replay
