#!/usr/bin/env bash
# The compose farm under faults (issue 11), on a real Docker engine:
#   1. builds the images (scripts/docker-images.sh) and brings docker/compose.yaml up with
#      4 CPU workers, timing `compose up` -> the first segment encoded;
#   2. submits 5 jobs with the host's `tessera submit --wait` (uploads through presigned URLs);
#   3. while they run: `docker kill` a worker, `docker stop` another (SIGTERM: it must drain and
#      exit 0 within its grace period), `docker network disconnect` a third for 60 s, and
#      `docker restart` RabbitMQ;
#   4. checks every job finished once, each output frame-exact against its source (the list of
#      video timestamps, audio duration), nothing left besides the 5 outputs and no work-area
#      object once the partitioned worker is back;
#   5. scales back to 4 workers, submits a sixth job with the documented command
#      (`tessera submit clip.mp4 --wait`, default output) and, while it runs, scales down to 1:
#      the 3 workers that go must exit 0 and the job must still finish frame-exact.
#
#   scripts/docker-farm-test.sh                 # the test and the host's `tessera` in release
#   TESSERA_REGISTRY=tessera-test TESSERA_DOCKER_PROFILE=debug scripts/docker-farm-test.sh  # CI: test images
#   TESSERA_DOCKER_SKIP_BUILD=1 ...             # reuse the images already built
#
# TESSERA_DOCKER_PROFILE picks the profile of the host side (the Rust test and the `tessera`
# it submits with) and of the Debian images' binaries (scripts/docker-images.sh --profile:
# debug ones are test images, labelled so); the minimal images always hold the static
# release binaries.
# The farm runs the minimal images (static binaries) when target/static-dist/ has them
# (scripts/build-static.sh), else the Debian ones (TESSERA_VARIANT=-full); it says which.
#
# Exit 0 when every check passed; 2 when there is no Docker engine (it says so).
#
# A thin runner: this builds the images and the host's `tessera`; steps 1-5 (compose, the
# faults and every check) are the Rust test tests/tests/docker_farm.rs
# (tessera_tests::docker_farm), run with `cargo test -- --ignored`. On a failure it prints
# the last compose logs and keeps its directory (/tmp/tessera-docker-farm.*).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
say() { printf '[docker-farm %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

if ! docker info >/dev/null 2>&1; then
  echo "docker-farm: no Docker engine answers here; the compose fault test did NOT run" >&2
  exit 2
fi
profile=${TESSERA_DOCKER_PROFILE:-release}
if [[ -z ${TESSERA_VARIANT+set} ]]; then
  if [[ -x target/static-dist/tessera-dispatcher ]]; then TESSERA_VARIANT=""; else TESSERA_VARIANT=-full; fi
fi
export TESSERA_VARIANT
registry=${TESSERA_REGISTRY:-tessera}

if [[ ${TESSERA_DOCKER_SKIP_BUILD:-0} != 1 ]]; then
  say "images (scripts/docker-images.sh --profile $profile)"
  bash scripts/docker-images.sh --profile "$profile"
fi
. scripts/compose-images.sh && tessera_service_images
say "the farm runs $registry/{dispatcher,worker}:latest$TESSERA_VARIANT ($(docker image inspect \
  -f '{{index .Config.Labels "io.tessera.build.linking"}}' "$registry/worker:latest$TESSERA_VARIANT"))"
cargo_profile=()
if [[ $profile == release ]]; then
  cargo build -q --locked --release -p tessera-cli
  cargo_profile=(--release)
else
  cargo build -q --locked --workspace --bins
fi
say "the compose farm under faults (cargo test -p tessera-tests --test docker_farm)"
TESSERA_BIN=$PWD/target/$profile/tessera exec cargo test -q --locked "${cargo_profile[@]}" \
  -p tessera-tests --test docker_farm -- --ignored --nocapture --test-threads=1
