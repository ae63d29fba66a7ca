#!/usr/bin/env bash
# The project's test command (CI runs it through .ci/run):
#   1. dependencies and test services (scripts/setup-deps.sh --services: FFmpeg libs,
#      RabbitMQ at 127.0.0.1:5672, garage)
#   2. cargo fmt --check, the structure check (scripts/structure-check.py: no two files
#      import each other, at most 4 functions over 100 lines)    3. cargo clippy -D warnings    4. cargo build of every binary
#   5. the tests: doctests then cargo nextest when nextest is installed (it skips doctests),
#      otherwise cargo test
#   6. the static binaries, when their FFmpeg is cached   7. with a Docker engine: the images
#      (minimal ones from the static binaries of 6 when it ran), the compose farm under faults
#      (scripts/docker-farm-test.sh, on RabbitMQ 4.x), the autoscaling replay's sample and the
#      broker suite's sample on RabbitMQ 4.x (scripts/broker-suite.sh --sample)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
export RUST_BACKTRACE="${RUST_BACKTRACE:-1}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

stage_start=-1
stage() {
  local took=""
  ((stage_start < 0)) || took=" (previous stage: $((SECONDS - stage_start)) s)"
  printf '\n===== [%s] %s%s =====\n' "$(date +%H:%M:%S)" "$*" "$took"
  stage_start=$SECONDS
}

stage "setup: scripts/setup-deps.sh --services"
bash scripts/setup-deps.sh --services
cargo --version
rustc --version

stage "format: cargo fmt --all -- --check"
cargo fmt --all -- --check

stage "structure: scripts/structure-check.py (no import circle in any crate, at most 4 functions over 100 lines) and its self-test"
python3 scripts/structure-check.py --self-test
python3 scripts/structure-check.py --max-long-fns 4

stage "lint: cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

stage "manifests: scripts/validate-k8s.sh (Kubernetes and KEDA schemas) and its self-test"
bash scripts/validate-k8s.sh
bash scripts/validate-k8s.sh --self-test

stage "build: cargo build --workspace --bins"
cargo build --workspace --bins

if cargo nextest --version >/dev/null 2>&1; then
  # Doctests first: nextest does not run them, and its summary should be the run's last word.
  stage "test: cargo test --workspace --doc --no-fail-fast (doctests; nextest skips them)"
  doc_rc=0
  cargo test --workspace --doc --no-fail-fast || doc_rc=$?
  stage "test: cargo nextest run --workspace --no-fail-fast"
  nextest_rc=0
  cargo nextest run --workspace --no-fail-fast || nextest_rc=$?
  if ((doc_rc != 0 || nextest_rc != 0)); then
    echo "tests failed: doctests exit $doc_rc, nextest exit $nextest_rc" >&2
    exit 1
  fi
else
  stage "test: cargo test --workspace --no-fail-fast (cargo-nextest not installed)"
  cargo test --workspace --no-fail-fast
fi

stage "static: the self-contained binaries (scripts/build-static.sh, scripts/check-static.sh)"
static_prefix=$(bash scripts/build-static.sh --print-prefix 2>/dev/null || true)
if [[ -n $static_prefix && -f $static_prefix/lib/libavcodec.a && -f $static_prefix/lib/libx264.a ]]; then
  # The static FFmpeg is cached on this machine: link this commit's binaries against it (a
  # target dir outside the clone keeps the dependencies compiled) and check them: ldd, a run
  # in a bare root, and the software-path tests against the static `tessera transcode`.
  TESSERA_STATIC_TARGET_DIR="${TESSERA_CACHE_DIR:-${HOME:-/root}/.cache/tessera}/static-target" \
    bash scripts/build-static.sh --skip-deps
  bash scripts/check-static.sh --quick
else
  echo "static build skipped: no static FFmpeg cached on this machine (a fresh one);" \
    "scripts/build-static.sh builds it once (about 30 min on 2 cores), and from then on CI" \
    "builds and checks each commit's static binaries (docs/static-build.md)"
fi

stage "docker: scripts/docker-farm-test.sh (images, the compose farm under faults), the autoscaling replay's sample, the broker suite's sample on RabbitMQ 4.x"
if docker info >/dev/null 2>&1; then
  # The minimal images where the static stage above made this commit's static binaries,
  # else the Debian (-full) ones; both scripts run the same variant.
  if [[ -x target/static-dist/tessera-dispatcher ]]; then export TESSERA_VARIANT=""; else export TESSERA_VARIANT=-full; fi
  # Test images under a prefix of their own: no debug binary ever carries a release name.
  export TESSERA_REGISTRY=tessera-test
  # The Debian images get the test build's binaries (--profile debug: test images, labelled
  # so; no release build here); the script builds the local base and service images on a
  # machine that cannot pull them.
  TESSERA_DOCKER_PROFILE=debug bash scripts/docker-farm-test.sh
  # The compose workers scaled by KEDA's and the HPA's rules over the rendered ScaledObject,
  # spot notices on busy workers: one job of each kind, all done and frame-exact, no task
  # cut off (docs/deploy.md, "Autoscaling replay"; the full batch: scripts/autoscale-replay.sh).
  # 60x faster than the manifests' durations (cooldown 5 s): the long job's stitch + QC
  # must outlast it.
  TESSERA_REPLAY_JOBS=sample TESSERA_REPLAY_TIME_SCALE=60 bash scripts/autoscale-replay.sh
  # RabbitMQ 4.x with 4.3's defaults (the container of scripts/rabbit4.sh, its image made
  # above for compose): the queue layer, declarations and retries (docs/deploy.md, "RabbitMQ";
  # both versions, the whole broker suite: scripts/broker-suite.sh).
  bash scripts/broker-suite.sh --sample
else
  echo "docker: NO Docker engine answers on this machine: the compose fault test and the" \
    "autoscaling replay did NOT run (scripts/docker-farm-test.sh, scripts/autoscale-replay.sh)"
fi

stage "all stages passed in ${SECONDS} s"
