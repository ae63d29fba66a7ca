#!/usr/bin/env bash
# The project's test command (CI runs it through .ci/run):
#   1. dependencies and test services (scripts/setup-deps.sh --services: FFmpeg libs,
#      RabbitMQ at 127.0.0.1:5672, garage)
#   2. cargo fmt --check    3. cargo clippy -D warnings    4. cargo build of every binary
#   5. the tests: doctests then cargo nextest when nextest is installed (it skips doctests),
#      otherwise cargo test
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

stage "lint: cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

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

stage "all stages passed in ${SECONDS} s"
