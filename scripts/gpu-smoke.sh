#!/usr/bin/env bash
# GPU smoke test for a machine with an NVIDIA card and driver: does tessera see the cards, can
# NVDEC decode, and (where the card has NVENC) does a 1080p segment encode through the
# worker's own code path, with the encoder sessions counted?
#
#   scripts/gpu-smoke.sh [--release] [--out DIR] [--seconds N]
#
# Steps, each printed with what it found or why it was skipped:
#   1. nvidia-smi and the NVML inventory as tessera reads it (`tessera gpu`): cards, models,
#      NVENC/NVDEC engines, session budgets, what the FFmpeg build offers.
#   2. an NVDEC decode of a generated 1080p H.264 clip (`tessera gpu --nvdec-check`): frames, fps.
#   3. where a card has NVENC: `tessera transcode --gpu require` of that clip (the one-process
#      farm: split, a GPU worker taking each segment's sessions from the budget, NVENC, stitch),
#      with nvidia-smi sampling the encoder sessions; prints fps, the sessions the worker held
#      and those nvidia-smi saw, and checks the output's frame count with ffprobe.
#      Cards without NVENC (A100, H100, H200) skip this step and say so.
# Exit status: 0 when every step that could run passed, 1 otherwise.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"

PROFILE=debug
OUT=gpu-smoke
SECONDS_LONG=20
while [[ $# -gt 0 ]]; do
  case $1 in
    --release) PROFILE=release; shift ;;
    --out) OUT=$2; shift 2 ;;
    --seconds) SECONDS_LONG=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

step() { printf '\n==> %s\n' "$*"; }
skip() { printf 'SKIPPED: %s\n' "$*"; }
fail() { printf 'FAILED: %s\n' "$*"; STATUS=1; }
STATUS=0
mkdir -p "$OUT"

if [[ ! -x target/$PROFILE/tessera ]]; then
  step "build (cargo build --$PROFILE -p tessera-cli)"
  if [[ $PROFILE == release ]]; then cargo build --release -p tessera-cli; else cargo build -p tessera-cli; fi
fi
TESSERA=target/$PROFILE/tessera

step "1. driver and cards"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,encoder.stats.sessionCount --format=csv || true
else
  skip "nvidia-smi not found (no NVIDIA driver in this environment?)"
fi
"$TESSERA" gpu | tee "$OUT/gpu.txt"
"$TESSERA" gpu --json > "$OUT/gpu.json"
CARDS=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["cards"]))' "$OUT/gpu.json")
NVENC_SESSIONS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nvenc_sessions_available"])' "$OUT/gpu.json")
if [[ $CARDS -eq 0 ]]; then
  skip "NVML found no card: the rest needs an NVIDIA GPU"
  exit 0
fi

CLIP=$OUT/clip-1080p.mp4
step "2. NVDEC decode of a generated ${SECONDS_LONG} s 1080p30 H.264 clip"
ffmpeg -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=1920x1080:rate=30:duration=$SECONDS_LONG" \
  -f lavfi -i "sine=frequency=440:duration=$SECONDS_LONG" -c:v libx264 -preset veryfast -g 60 \
  -pix_fmt yuv420p -c:a aac "$CLIP"
WANT=$(ffprobe -v error -select_streams v:0 -count_frames -show_entries stream=nb_read_frames -of csv=p=0 "$CLIP")
if "$TESSERA" gpu --nvdec-check "$CLIP" --device 0 | tee "$OUT/nvdec.txt" | grep -q "NVDEC decode"; then
  GOT=$(sed -n 's/^NVDEC decode: \([0-9]*\) frames.*/\1/p' "$OUT/nvdec.txt")
  if [[ $GOT == "$WANT" ]]; then echo "NVDEC decoded all $GOT frames"; else fail "NVDEC decoded $GOT of $WANT frames"; fi
else
  fail "NVDEC decode check"
fi

step "3. NVENC encode through the worker's code path"
if [[ $NVENC_SESSIONS -eq 0 ]]; then
  skip "no card here has NVENC (A100/H100/H200 are decode-only): nothing to encode on"
  exit $STATUS
fi
SAMPLES=$OUT/sessions.csv
: > "$SAMPLES"
if command -v nvidia-smi >/dev/null 2>&1; then
  ( while true; do nvidia-smi --query-gpu=index,encoder.stats.sessionCount,utilization.encoder,utilization.decoder \
      --format=csv,noheader,nounits >> "$SAMPLES" 2>/dev/null; sleep 0.5; done ) &
  SAMPLER=$!
  trap 'kill $SAMPLER 2>/dev/null || true' EXIT
fi
ENCODED=$OUT/clip-nvenc.mp4
if TESSERA_LOG=info "$TESSERA" transcode "$CLIP" -o "$ENCODED" --gpu require --preset p4 \
    --segment-seconds 5 --progress plain --report "$OUT/report.json" 2> "$OUT/transcode.log"; then
  GOT=$(ffprobe -v error -select_streams v:0 -count_frames -show_entries stream=nb_read_frames -of csv=p=0 "$ENCODED")
  FPS=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["encode_fps"],1))' "$OUT/report.json")
  HELD=$(grep -o 'sessions_in_use=[0-9]*' "$OUT/transcode.log" | cut -d= -f2 | sort -n | tail -1)
  SEEN=$(cut -d, -f2 "$SAMPLES" 2>/dev/null | tr -d ' ' | sort -n | tail -1)
  SEGMENTS=$(grep -c 'GPU segment' "$OUT/transcode.log" || true)
  echo "NVENC transcode: $GOT/$WANT frames, ${FPS} fps wall, $SEGMENTS GPU segments, sessions held by the worker at most ${HELD:-0}, nvidia-smi saw at most ${SEEN:-?}"
  [[ $GOT == "$WANT" ]] || fail "output has $GOT frames, source $WANT"
  [[ $SEGMENTS -gt 0 ]] || fail "no segment ran on the GPU path"
else
  fail "tessera transcode --gpu require (see $OUT/transcode.log)"
  tail -20 "$OUT/transcode.log"
fi
exit $STATUS
