#!/usr/bin/env bash
# Benchmark (issue 31): a batch of uploads through the distributed farm on this machine
# (tessera-dispatcher, two tessera-workers, RabbitMQ, a single-node Garage) against the same
# files through `xargs -P 2 ffmpeg` with the same settings (libx264 veryfast CRF 23, 8-bit
# 4:2:0 at an even size as the farm writes it, AAC, MP4), alternated. The batch: clips of
# the input matrix's containers and codecs, 2 s to 3 minutes (a third under 10 s), made
# once and cached in bench/.cache/batch/.
#
#   bench/batch.sh    BENCH_BATCH_FILES (default 40), BENCH_BATCH_SCALE (length multiplier,
#                     default 1.0), BENCH_RUNS (rounds, default 3)
#
# Prints per round and as medians: the makespan ratio (first submit to last delivered),
# CPU-seconds per output minute of both sides (farm: dispatcher, workers, their media
# children, Garage and RabbitMQ from /proc; ffmpeg: the children's rusage), per-job latency
# p50/p95, the dispatcher's share of the farm's CPU and its CPU per segment. Targets (issue
# 31), reported PASS/MISS: makespan ratio <= 1.00, CPU per output minute <= 1.05x ffmpeg's,
# dispatcher CPU per segment < 20 ms. Exit status: non-zero when a job fails or an output's
# frame count is not its input's.
#
# A thin runner: the farm, the rounds and the checks are the Rust test
# tests/tests/bench_batch.rs (tessera_tests::bench::batch); this builds the release binaries
# and runs that test. It needs RabbitMQ and Garage (scripts/setup-deps.sh --services).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
export BENCH_RUNS=${BENCH_RUNS:-3} BENCH_BATCH_FILES=${BENCH_BATCH_FILES:-40}
export BENCH_BATCH_SCALE=${BENCH_BATCH_SCALE:-1.0}

printf '==> %s\n' "build: cargo build --release --bins"
cargo build --release --bins -q
exec cargo test --release -q -p tessera-tests --test bench_batch -- \
  --ignored --nocapture --test-threads=1
