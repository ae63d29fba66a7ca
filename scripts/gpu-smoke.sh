#!/usr/bin/env bash
# GPU smoke test: a proof, on a machine with an NVIDIA card, that tessera's GPU path works
# through the worker's own code (the one-process farm: split, sandboxed warm media children
# under the production limits, the session budget, NVDEC -> scale_cuda -> NVENC, stitch).
#
#   scripts/gpu-smoke.sh [--bin DIR] [--clips DIR] [--out DIR] [--seconds N] [--timeout S]
#   scripts/gpu-smoke.sh --prepare DIR [--bin DIR] [--seconds N]
#   scripts/gpu-smoke.sh --self-test [--seconds N]
#
# --prepare DIR (on a build machine with ffmpeg): writes a bundle to DIR: the binaries
#   (static ones from scripts/build-static.sh when present, and tessera-gpu-smoke),
#   generated clips, and this script. Copy DIR to the card's host and run DIR/gpu-smoke.sh
#   there: it needs nothing but the NVIDIA driver and glibc (frames are counted with
#   `tessera probe`, not ffprobe).
# --bin DIR    where tessera is (default: the bundle's bin/, else target/static-dist, else
#              target/release, else target/debug).
# --clips DIR  the clips (default: the bundle's clips/, else generated now with ffmpeg).
# --timeout S  limit of each step in seconds (default 300); a step past it is a failure.
# --self-test  without a card: the unit tests of the checks (passing and failing samples;
#              needs cargo), then the cases with --gpu off, to check the checks on real
#              outputs on a machine without a GPU.
#
# Cases, each a `tessera transcode` of a generated clip with `--quality`:
#   same-size  1080p H.264 -> 1080p H.264     (scale_cuda at 1:1, no passthrough)
#   resize     1080p H.264 -> 720p H.264
#   hevc       1080p H.264 -> 1080p HEVC
#   10-bit     1080p HEVC Main10 (BT.2020 PQ) -> HEVC Main10, tags kept
#   ladder     1080p H.264 -> 1080p + 720p + 480p from one decode
#   sessions   1080p H.264 in 1 s segments, more than the cards' budget: the budget filled
#              and never exceeded, on every card when there are several
#   av1        1080p AV1 -> H.264, on cards whose NVDEC decodes AV1 (skipped elsewhere)
# Each case is checked for: frames and size; PSNR against the source at or above 30 dB; the
# decoder and encoders each segment reported (require: NVDEC and NVENC, no frame decoded in
# software; decode: NVDEC and a software encoder; off: no card); NVENC sessions per card never
# over its budget; 10-bit pixel format and the source's colour tags. Then the checks are shown
# to catch wrong input in the same run: a garbled copy of an output (2% of its bytes scrambled)
# measured with `tessera quality`, the run's decoder/encoder facts against the other mode,
# sessions against a budget they break, an 8-bit output against the 10-bit check.
# On cards with NVENC the cases run with --gpu require; on cards without (A100/H100/H200) with
# --gpu decode: NVDEC -> scale_cuda -> hwdownload -> libx264/libx265 through the same path.
# Also: the NVML inventory, an NVDEC decode check in-process and under an 8 GiB address-space
# limit (what CUDA context creation does under RLIMIT_AS), and NVML/nvidia-smi session and
# utilisation readings while the cases run. At the end a table: case, result (ran and
# passed / failed / skipped with the reason), fps, sessions seen, and a verdict.
# Exit status: 0 when every case that could run passed; 1 otherwise; 0 with every case
# skipped when there is no card (said plainly).
#
# The steps and checks are a Rust binary, tessera-gpu-smoke (tests/src/bin/tessera-gpu-smoke/,
# its checks unit-tested there); this script finds the binaries, makes the clips, bundles,
# and runs it. Why a binary and not `cargo test`: the card's host has no cargo (nor FFmpeg's
# tools), only what the bundle brings. Where cargo is, `cargo test -p tessera-tests --test
# gpu_smoke -- --ignored --nocapture` runs the same binary.
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

# find_bin NAME: the first directory holding an executable NAME.
find_bin() {
  local c
  for c in "$BIN" "$HERE/bin" "$HERE/../target/static-dist" "$HERE/../target/release" "$HERE/../target/debug"; do
    [[ -n $c && -x $c/$1 ]] && { echo "$(cd "$c" && pwd)"; return 0; }
  done
  return 1
}

# The checks' binary; in a checkout with cargo it is built when missing.
smoke_bin() {
  local d
  if d=$(find_bin tessera-gpu-smoke); then echo "$d/tessera-gpu-smoke"; return 0; fi
  [[ -f $HERE/../tests/Cargo.toml ]] && command -v cargo >/dev/null || return 1
  echo "building tessera-gpu-smoke (cargo build --release -p tessera-tests --bin tessera-gpu-smoke)" >&2
  (cd "$HERE/.." && cargo build -q --release -p tessera-tests --bin tessera-gpu-smoke) >&2 || return 1
  echo "$(cd "$HERE/../target/release" && pwd)/tessera-gpu-smoke"
}

make_clips() { # DIR: 1080p H.264 8-bit, 1080p HEVC Main10 (BT.2020 PQ tags), 1080p AV1; SECS s at 30 fps
  local dir=$1
  mkdir -p "$dir"
  command -v ffmpeg >/dev/null || { echo "ffmpeg is needed to make the clips (or pass --clips)" >&2; return 1; }
  # Keyframes every second: the sessions case cuts 1 s segments, more than a card's budget.
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=1920x1080:rate=30:duration=$SECS" \
    -f lavfi -i "sine=frequency=440:duration=$SECS" -c:v libx264 -preset veryfast -g 30 -bf 3 \
    -pix_fmt yuv420p -c:a aac "$dir/h264-1080p.mp4" || return 1
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=1920x1080:rate=30:duration=$SECS" \
    -c:v libx265 -preset ultrafast -x265-params log-level=error -pix_fmt yuv420p10le -tag:v hvc1 \
    -color_primaries bt2020 -color_trc smpte2084 -colorspace bt2020nc \
    "$dir/hevc10-1080p.mp4" || return 1
  local av1=(-c:v libsvtav1 -preset 12)
  ffmpeg -hide_banner -encoders 2>/dev/null | grep -q libsvtav1 || av1=(-c:v libaom-av1 -cpu-used 8 -row-mt 1)
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i "testsrc2=size=1920x1080:rate=30:duration=$SECS" \
    "${av1[@]}" -g 30 -pix_fmt yuv420p "$dir/av1-1080p.mp4" || return 1
}

if [[ -n $PREPARE ]]; then
  B=$(find_bin tessera) || { echo "no tessera binary: build one (scripts/build-static.sh)" >&2; exit 1; }
  SMOKE=$(smoke_bin) || { echo "no tessera-gpu-smoke binary: cargo build --release -p tessera-tests" >&2; exit 1; }
  mkdir -p "$PREPARE/bin"
  cp "$B/tessera" "$PREPARE/bin/"
  # tessera-media is the media child tessera runs (the only binary linking FFmpeg).
  for b in tessera-media tessera-worker; do [[ -x $B/$b ]] && cp "$B/$b" "$PREPARE/bin/"; done
  cp "$SMOKE" "$PREPARE/bin/"
  cp "$0" "$PREPARE/gpu-smoke.sh"
  make_clips "$PREPARE/clips" || exit 1
  echo "bundle ready: $PREPARE ($(du -sh "$PREPARE" | cut -f1)); on the card's host run: $PREPARE/gpu-smoke.sh"
  exit 0
fi

if [[ $SELF_TEST -eq 1 ]]; then
  if [[ -f $HERE/../tests/Cargo.toml ]] && command -v cargo >/dev/null; then
    printf '\n==> %s\n' "self-test: the checks on passing and failing samples (cargo test)"
    (cd "$HERE/.." && cargo test -q -p tessera-tests --bin tessera-gpu-smoke) || exit 1
  else
    echo "self-test: no cargo here; the unit tests of the checks did NOT run"
  fi
fi

B=$(find_bin tessera) || { echo "no tessera binary (pass --bin DIR)" >&2; exit 1; }
TESSERA=$B/tessera
SMOKE=$(smoke_bin) || { echo "no tessera-gpu-smoke binary (bundle it with --prepare, or build it)" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[[ -z $CLIPS && -d $HERE/clips ]] && CLIPS=$HERE/clips
if [[ -z $CLIPS ]]; then
  CLIPS=$OUT/clips
  [[ -f $CLIPS/h264-1080p.mp4 && -f $CLIPS/hevc10-1080p.mp4 && -f $CLIPS/av1-1080p.mp4 ]] \
    || make_clips "$CLIPS" || exit 1
fi
export CUDA_DEVICE_ORDER=PCI_BUS_ID
echo "tessera: $TESSERA ($(ldd "$TESSERA" 2>/dev/null | grep -c -E 'libav|libsw') FFmpeg shared libraries linked)"
echo "clips: $CLIPS; step timeout ${STEP_TIMEOUT} s; output: $OUT"
args=(--tessera "$TESSERA" --clips "$CLIPS" --out "$OUT" --timeout "$STEP_TIMEOUT")
[[ $SELF_TEST -eq 1 ]] && args+=(--self-test)
exec "$SMOKE" "${args[@]}"
