#!/usr/bin/env bash
# Dispatcher capacity (issue 31, item 4): submits many small real jobs through the API at a
# steady rate to the release dispatcher (RabbitMQ vhost, single-node Garage), with fake
# workers inside the load generator that answer the real segment and stitch tasks with the
# real wire events and objects (no media work). Prints the API latency p50/p99 under the
# rate, events and jobs handled a second, the dispatcher's RSS over time, CPU per thread,
# its media children's CPU, the database size, and when each part began to give out.
#
#   bench/capacity.sh    BENCH_CAPACITY_JOBS (default 10000), BENCH_CAPACITY_RATE (200/s),
#                        BENCH_CAPACITY_CONNECTIONS (32), BENCH_CAPACITY_MAX_RUNNING (the
#                        dispatcher's default), BENCH_CAPACITY_STALL_S (120),
#                        BENCH_CAPACITY_LOG (info), BENCH_CAPACITY_WAIT (1; 0: the API
#                        alone, stop once the submissions are answered)
#
# A thin runner: the load generator is tests/src/bench/capacity.rs, run by the ignored test
# tests/tests/bench_capacity.rs. The inputs are cached in bench/.cache/. Results: docs/capacity.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
export BENCH_CAPACITY_JOBS=${BENCH_CAPACITY_JOBS:-10000} BENCH_CAPACITY_RATE=${BENCH_CAPACITY_RATE:-200}

# The dispatcher and its media child (tessera-media, in the CLI's package).
printf '==> %s\n' "build: cargo build --release -p tessera-dispatcher -p tessera-cli --bins"
cargo build --release -p tessera-dispatcher -p tessera-cli --bins -q
exec cargo test --release -q -p tessera-tests --test bench_capacity -- \
  --ignored --nocapture --test-threads=1
