#!/usr/bin/env bash
# GPU smoke test: a proof, on a machine with an NVIDIA card, that tessera's GPU path works
# through the worker's own code (the one-process farm: split, sandboxed warm media children
# under the production limits, the session budget, NVDEC -> scale_cuda -> NVENC, stitch).
#
#   scripts/gpu-smoke.sh [--bin DIR] [--clips DIR] [--out DIR] [--seconds N] [--timeout S]
#   scripts/gpu-smoke.sh --prepare DIR [--bin DIR] [--seconds N]
#
# --prepare DIR (on a build machine with ffmpeg): writes a bundle to DIR: the binaries
#   (static ones from scripts/build-static.sh when present), generated clips, and this
#   script. Copy DIR to the card's host and run DIR/gpu-smoke.sh there: it needs nothing but
#   the NVIDIA driver and glibc (frames are counted with `tessera probe`, not ffprobe).
# --bin DIR    where tessera is (default: the bundle's bin/, else target/static-dist, else
#              target/release, else target/debug).
# --clips DIR  the clips (default: the bundle's clips/, else generated now with ffmpeg).
# --timeout S  limit of each step in seconds (default 300); a step past it is a failure.
# --self-test  without a card: run the cases with --gpu off, to check this script's own
#              checks (frame counts, sizes, codecs, the table) on a machine without a GPU.
#
# Cases, each a `tessera transcode` of a generated clip, checked for frame count and size:
#   same-size  1080p H.264 -> 1080p H.264     (scale_cuda at 1:1, no passthrough)
#   resize     1080p H.264 -> 720p H.264
#   hevc       1080p H.264 -> 1080p HEVC
#   10-bit     1080p HEVC Main10 -> HEVC Main10
#   ladder     1080p H.264 -> 1080p + 720p + 480p from one decode
# On cards with NVENC they run with --gpu require; on cards without (A100/H100/H200) with
# --gpu decode: NVDEC -> scale_cuda -> hwdownload -> libx264/libx265 through the same path.
# Also: the NVML inventory, an NVDEC decode check in-process and under an 8 GiB address-space
# limit (what CUDA context creation does under RLIMIT_AS), and NVML/nvidia-smi session and
# utilisation readings while the cases run. At the end a table: case, result (ran and
# passed / failed / skipped with the reason), fps, sessions seen.
# Exit status: 0 when every case that could run passed; 1 otherwise; 0 with every case
# skipped when there is no card (said plainly).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT=gpu-smoke
SECS=10
STEP_TIMEOUT=300
BIN=""
CLIPS=""
PREPARE=""
SELF_TEST=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --bin) BIN=$2; shift 2 ;;
    --clips) CLIPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --timeout) STEP_TIMEOUT=$2; shift 2 ;;
    --prepare) PREPARE=$2; shift 2 ;;
    --self-test) SELF_TEST=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

find_bin() {
  local c
  for c in "$BIN" "$HERE/bin" "$HERE/../target/static-dist" "$HERE/../target/release" "$HERE/../target/debug"; do
    [[ -n $c && -x $c/tessera ]] && { echo "$(cd "$c" && pwd)"; return 0; }
  done
  return 1
}

make_clips() { # DIR: 1080p H.264 8-bit and 1080p HEVC Main10, SECS seconds at 30 fps
  local dir=$1
  mkdir -p "$dir"
  command -v ffmpeg >/dev/null || { echo "ffmpeg is needed to make the clips (or pass --clips)" >&2; return 1; }
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=1920x1080:rate=30:duration=$SECS" \
    -f lavfi -i "sine=frequency=440:duration=$SECS" -c:v libx264 -preset veryfast -g 60 -bf 3 \
    -pix_fmt yuv420p -c:a aac "$dir/h264-1080p.mp4" || return 1
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=1920x1080:rate=30:duration=$SECS" \
    -c:v libx265 -preset ultrafast -x265-params log-level=error -pix_fmt yuv420p10le -tag:v hvc1 \
    "$dir/hevc10-1080p.mp4" || return 1
}

if [[ -n $PREPARE ]]; then
  B=$(find_bin) || { echo "no tessera binary: build one (scripts/build-static.sh)" >&2; exit 1; }
  mkdir -p "$PREPARE/bin"
  cp "$B/tessera" "$PREPARE/bin/"
  [[ -x $B/tessera-worker ]] && cp "$B/tessera-worker" "$PREPARE/bin/"
  cp "$0" "$PREPARE/gpu-smoke.sh"
  make_clips "$PREPARE/clips" || exit 1
  echo "bundle ready: $PREPARE ($(du -sh "$PREPARE" | cut -f1)); on the card's host run: $PREPARE/gpu-smoke.sh"
  exit 0
fi

B=$(find_bin) || { echo "no tessera binary (pass --bin DIR)" >&2; exit 1; }
TESSERA=$B/tessera
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[[ -z $CLIPS && -d $HERE/clips ]] && CLIPS=$HERE/clips
if [[ -z $CLIPS ]]; then
  CLIPS=$OUT/clips
  [[ -f $CLIPS/h264-1080p.mp4 && -f $CLIPS/hevc10-1080p.mp4 ]] || make_clips "$CLIPS" || exit 1
fi
export CUDA_DEVICE_ORDER=PCI_BUS_ID
STATUS=0
declare -a ROWS=()
row() { ROWS+=("$(printf '%-10s | %-44s | %8s | %s' "$1" "$2" "$3" "$4")"); }
step() { printf '\n==> %s\n' "$*"; }
run() { timeout --kill-after=10 "$STEP_TIMEOUT" "$@"; }
# The first value of "KEY" in a JSON file (no python or jq on a bare host).
field() { grep -o "\"$2\": *[^,}]*" "$1" 2>/dev/null | head -1 | sed -e 's/^[^:]*: *//' -e 's/^"//' -e 's/"$//'; }
# Frames, size and codec of a file, read by tessera itself (works without ffprobe).
probe() { run "$TESSERA" probe "$1" --json > "$OUT/probe.json" 2>/dev/null && \
  sed -e 's/.*"video": *{//' "$OUT/probe.json" | tr ',' '\n' | \
  awk -F: '/"frames"/{f=$2} /"width"/{w=$2} /"height"/{h=$2} /"codec"/{c=$2} END{gsub(/[ "]/,"",c); print f+0, w+0, h+0, c}'; }

echo "tessera: $TESSERA ($(ldd "$TESSERA" 2>/dev/null | grep -c -E 'libav|libsw') FFmpeg shared libraries linked)"
echo "clips: $CLIPS; step timeout ${STEP_TIMEOUT} s; output: $OUT"

step "1. driver, cards and budgets (NVML)"
if command -v nvidia-smi >/dev/null 2>&1; then
  run nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total,compute_mode,encoder.stats.sessionCount --format=csv || true
else
  echo "nvidia-smi not found (NVML is still read through libnvidia-ml)"
fi
run "$TESSERA" gpu | tee "$OUT/gpu.txt"
run "$TESSERA" gpu --json > "$OUT/gpu.json" || true
CARDS=$(grep -c '"pci_bus_id"' "$OUT/gpu.json" 2>/dev/null); CARDS=${CARDS:-0}
NVENC=$(field "$OUT/gpu.json" nvenc_sessions_available); NVENC=${NVENC:-0}
if [[ $CARDS -eq 0 && $SELF_TEST -eq 0 ]]; then
  REASON="no NVIDIA card here ($(field "$OUT/gpu.json" nvml_error | cut -c1-100))"
  echo "NOT RUN ON A CARD: $REASON"
  for c in nvdec same-size resize hevc 10-bit ladder; do row "$c" "skipped: no card" "-" "-"; done
  printf '\n%-10s | %-44s | %8s | %s\n' case result fps sessions; printf '%s\n' "${ROWS[@]}"
  exit 0
fi
if [[ $SELF_TEST -eq 1 ]]; then MODE=off
elif [[ $NVENC -gt 0 ]]; then MODE=require; else MODE=decode; fi
echo "cards: $CARDS; NVENC sessions available: $NVENC; cases run with --gpu $MODE"

step "2. NVDEC decode check (in-process, then under RLIMIT_AS = 8 GiB)"
CLIP=$CLIPS/h264-1080p.mp4
read -r WANT _ _ _ <<< "$(probe "$CLIP")"
if [[ $SELF_TEST -eq 1 ]]; then
  row nvdec "skipped: self-test" "-" "-"
elif run "$TESSERA" gpu --nvdec-check "$CLIP" --device 0 > "$OUT/nvdec.txt" 2>&1; then
  GOT=$(sed -n 's/^NVDEC decode: \([0-9]*\) frames.*/\1/p' "$OUT/nvdec.txt")
  FPS=$(sed -n 's/.* \([0-9.]*\) fps.*/\1/p' "$OUT/nvdec.txt" | head -1)
  if [[ $GOT == "$WANT" ]]; then row nvdec "passed ($GOT frames)" "${FPS:--}" "-"
  else row nvdec "FAILED: $GOT of $WANT frames" "-" "-"; STATUS=1; fi
else
  row nvdec "FAILED (see nvdec.txt)" "-" "-"; STATUS=1
fi
cat "$OUT/nvdec.txt"
if [[ $SELF_TEST -eq 0 ]] && command -v prlimit >/dev/null; then
  if run prlimit --as=$((8 << 30)) "$TESSERA" gpu --nvdec-check "$CLIP" --device 0 > "$OUT/nvdec-rlimit.txt" 2>&1; then
    echo "under RLIMIT_AS 8 GiB: context created (the RSS bound of GPU children is a choice, not a need)"
  else
    echo "under RLIMIT_AS 8 GiB: FAILED as the review predicted (GPU children run without it):"
    tail -3 "$OUT/nvdec-rlimit.txt"
  fi
fi

SAMPLES=$OUT/nvidia-smi.csv
: > "$SAMPLES"
SAMPLER=""
if command -v nvidia-smi >/dev/null 2>&1; then
  ( while true; do nvidia-smi --query-gpu=index,encoder.stats.sessionCount,utilization.encoder,utilization.decoder,utilization.gpu \
      --format=csv,noheader,nounits >> "$SAMPLES" 2>/dev/null; sleep 0.5; done ) &
  SAMPLER=$!
  trap '[[ -n $SAMPLER ]] && kill $SAMPLER 2>/dev/null' EXIT
fi

# case NAME CLIP CODEC HEIGHT(or "") EXTRA-OUTPUTS...
case_run() {
  local name=$1 clip=$2 codec=$3 height=$4; shift 4
  local dir=$OUT/$name; mkdir -p "$dir"
  local preset=p4; [[ $MODE != require ]] && preset=veryfast
  local args=(transcode "$clip" -o "$dir/main.mp4" --gpu "$MODE" --codec "$codec" --preset "$preset"
              --segment-seconds 2 --progress none --report "$dir/report.json")
  [[ -n $height ]] && args+=(--height "$height")
  local also=()
  for h in "$@"; do args+=(--also "$h=$dir/also-$h.mp4"); also+=("$h"); done
  local before; before=$(wc -l < "$SAMPLES")
  step "case $name: $clip -> $codec ${height:-source size} ${also[*]:+(+ ${also[*]})} (--gpu $MODE)"
  local t0=$SECONDS
  if ! TESSERA_LOG=info run "$TESSERA" "${args[@]}" 2> "$dir/transcode.log"; then
    local why; why=$(grep -m1 -o 'error.*' "$dir/transcode.log" | cut -c1-40)
    [[ $(( SECONDS - t0 )) -ge $STEP_TIMEOUT ]] && why="timed out after ${STEP_TIMEOUT} s"
    row "$name" "FAILED: ${why:-see $dir/transcode.log}" "-" "-"; STATUS=1
    tail -5 "$dir/transcode.log"; return
  fi
  local src_frames; read -r src_frames _ _ _ <<< "$(probe "$clip")"
  local frames w h c problems=""
  read -r frames w h c <<< "$(probe "$dir/main.mp4")"
  [[ $frames == "$src_frames" ]] || problems+=" main has $frames of $src_frames frames;"
  [[ -z $height || $h == "$height" ]] || problems+=" main is ${h}p, not ${height}p;"
  [[ $c == "$codec" ]] || problems+=" main is $c;"
  for a in "${also[@]}"; do
    read -r frames w h c <<< "$(probe "$dir/also-$a.mp4")"
    [[ $frames == "$src_frames" && $h == "$a" ]] || problems+=" ${a}p has $frames frames at ${h}p;"
  done
  local gpu_segments; gpu_segments=$(grep -c 'GPU segment' "$dir/transcode.log")
  [[ $gpu_segments -gt 0 || $MODE == off ]] || problems+=" no segment ran on the GPU path;"
  local fps; fps=$(field "$dir/report.json" encode_fps | cut -c1-6)
  local held; held=$(grep -o 'sessions_in_use=[0-9]*' "$dir/transcode.log" | cut -d= -f2 | sort -n | tail -1)
  local seen; seen=$(tail -n +"$((before + 1))" "$SAMPLES" | cut -d, -f2 | tr -d ' ' | sort -n | tail -1)
  local util; util=$(tail -n +"$((before + 1))" "$SAMPLES" | awk -F, '{e+=$3; d+=$4; n++} END{if(n) printf "enc %d%% dec %d%%", e/n, d/n}')
  local sessions="held ${held:-0}, nvidia-smi ${seen:-?}${util:+, $util}"
  if [[ -z $problems ]]; then row "$name" "passed ($src_frames frames, $gpu_segments GPU segments)" "${fps:--}" "$sessions"
  else row "$name" "FAILED:$problems" "${fps:--}" "$sessions"; STATUS=1; fi
}

H264=$CLIPS/h264-1080p.mp4
HEVC10=$CLIPS/hevc10-1080p.mp4
case_run same-size "$H264" h264 ""
case_run resize "$H264" h264 720
case_run hevc "$H264" hevc ""
case_run 10-bit "$HEVC10" hevc ""
case_run ladder "$H264" h264 "" 720 480
run "$TESSERA" gpu --json > "$OUT/gpu-after.json" || true

printf '\n%-10s | %-44s | %8s | %s\n' case result fps sessions
printf '%s\n' "${ROWS[@]}"
[[ $STATUS -eq 0 ]] && echo "GPU smoke: every case passed" || echo "GPU smoke: FAILED (logs under $OUT)"
exit $STATUS
