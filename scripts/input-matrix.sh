#!/usr/bin/env bash
# Runs the whole generated input matrix (tests/src/matrix.rs: the cross product, the
# recordings from the field and the sources at the edges of sync) against the
# tessera binary, every case under the sync oracle (a flash and a beep every
# second, tests/src/sync.rs): prints one table row per combination (name, container,
# video, audio, timing, result, frames expected/got, max timestamp error,
# PSNR, reason) and "N passed, M failed", and writes the table as markdown
# to docs/input-matrix.md.
#
#   scripts/input-matrix.sh              # builds tessera-cli --release first
#   TESSERA_BIN=target/debug/tessera scripts/input-matrix.sh   # no build
#   TESSERA_MATRIX_FILTER=mkv- scripts/input-matrix.sh         # a subset
#                                        # (the report is then not written)
#   TESSERA_MATRIX_ARGS="--target-vmaf 92" scripts/input-matrix.sh
#                                        # every case with extra transcode flags (here
#                                        # target quality and its scene-change cuts)
#   TESSERA_MATRIX_ARGS="--target-vmaf 92" scripts/input-matrix.sh --farm
#                                        # the recordings from the field through the
#                                        # distributed farm (tests/tests/farm_field.rs: a real
#                                        # RabbitMQ and Garage), each job with that target
#   TESSERA_EDGE_SEED=7 TESSERA_MATRIX_FILTER=cut-,join- scripts/input-matrix.sh
#                                        # the edge cases (recordings cut mid-GOP, joins) at
#                                        # another seed: other cut offsets and join sizes
#
# Clips are made with the ffmpeg CLI and cached in target/tessera-fixtures
# (or $TESSERA_FIXTURE_DIR). The full run takes about ten minutes on two
# cores (more the first time, when the clips are made). Exit status: 0 when every case passes, 1 when some fail, 2 when the
# run itself broke.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)

if [[ "${1:-}" == "--farm" ]]; then
    # The distributed farm's cases (dispatcher and workers from this checkout's debug build).
    cargo build --workspace --bins >&2
    exec cargo test -p tessera-tests --test farm_field -- distributed_farm --nocapture
fi

if [[ -z "${TESSERA_BIN:-}" ]]; then
    echo "building tessera-cli (release)..." >&2
    cargo build --release -p tessera-cli >&2
    export TESSERA_BIN="$root/target/release/tessera"
fi
if [[ "$TESSERA_BIN" != /* ]]; then
    export TESSERA_BIN="$root/$TESSERA_BIN"
fi
[[ -x "$TESSERA_BIN" ]] || { echo "no tessera binary at $TESSERA_BIN" >&2; exit 2; }

report="$root/docs/input-matrix.md"
if [[ -n "${TESSERA_MATRIX_FILTER:-}" || -n "${TESSERA_MATRIX_ARGS:-}" ]]; then
    report=""   # a partial or differently-set run must not overwrite the full report
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# One tessera run per case; 180 s is far above a healthy case (~10 s).
export TESSERA_TEST_TIMEOUT_S="${TESSERA_TEST_TIMEOUT_S:-180}"
TESSERA_FULL_MATRIX=1 TESSERA_MATRIX_REPORT="$report" \
    cargo test -p tessera-tests --test input_matrix -- --exact full_matrix --nocapture \
    2>&1 | tee "$log" | grep --line-buffered -E '^(\||[0-9]+ passed, |wrote )' || true

summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1 || true)
if [[ -z "$summary" ]]; then
    echo "the matrix run did not finish; its output:" >&2
    tail -50 "$log" >&2
    exit 2
fi
[[ "$summary" == *" 0 failed" ]]
