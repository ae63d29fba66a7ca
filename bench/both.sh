#!/usr/bin/env bash
# The two benchmarks of issue 8 item 7, each against plain ffmpeg with the same settings in the
# same run: a 5 s 720p clip (target: median ratio <= 1.10 and fixed per-file overhead < 0.5 s)
# and a 60 s 1080p file (target: median ratio <= 1.00). Prints both summaries.
#
#   bench/both.sh                       # builds target/release/tessera first
#   TESSERA_BIN=target/debug/tessera BENCH_RUNS=5 bench/both.sh
#
# The short clip runs BENCH_SHORT_RUNS pairs (default 21, about a minute): one pair of a
# 1-second job swings by +-20% on a shared machine, so a median of three says little.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rc=0
echo "=== short clip: 5 s, 1280x720"
BENCH_RUNS=${BENCH_SHORT_RUNS:-21} BENCH_SECONDS=5 BENCH_SIZE=1280x720 BENCH_TARGET=1.10 \
  bash bench/transcode.sh || rc=$?
echo
echo "=== long file: 60 s, 1920x1080"
BENCH_SECONDS=60 BENCH_SIZE=1920x1080 BENCH_TARGET=1.00 bash bench/transcode.sh || rc=$?
exit "$rc"
