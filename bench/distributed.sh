#!/usr/bin/env bash
# Benchmark (issue 3): the whole distributed farm on this machine (tessera-dispatcher, two
# tessera-workers, RabbitMQ, a single-node Garage) against plain ffmpeg on the same input and
# settings, alternated in one run. Prints the median wall-time ratio (submit -> job done,
# output in S3) and the median per-segment overhead (time a segment spends in a worker
# outside decode/encode: fetch, staging, upload, event, ack).
#
#   bench/distributed.sh        BENCH_RUNS (default 3), BENCH_SECONDS (default 60)
#
# Targets (issue 3): ratio <= 1.08 on 2 cores; per-segment overhead < 20 ms. It also prints
# the workers' median time per segment phase (from their "segment phases" debug lines):
# fetch (free-space check + chunk download), child (in the media child's process but outside
# decode/encode: start-up, request, result), media (decode + encode), store (upload).
# Exit status: non-zero when a job fails or its frame count is not the input's.
#
# A thin runner: the farm, the runs and the checks are the Rust test
# tests/tests/bench_distributed.rs (tessera_tests::bench); this builds the release binaries
# and runs that test. It needs RabbitMQ (started by the harness if it does not run) and
# Garage installed (scripts/setup-deps.sh). The input is cached in bench/.cache/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
export BENCH_RUNS=${BENCH_RUNS:-3} BENCH_SECONDS=${BENCH_SECONDS:-60}

printf '==> %s\n' "build: cargo build --release --bins"
cargo build --release --bins -q
exec cargo test --release -q -p tessera-tests --test bench_distributed -- \
  --ignored --nocapture --test-threads=1
