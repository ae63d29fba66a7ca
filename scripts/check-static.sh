#!/usr/bin/env bash
# Checks the static binaries made by scripts/build-static.sh (target/static-dist/):
#   1. ldd and readelf: no FFmpeg (or any other non-glibc) shared library, for tessera,
#      tessera-media, tessera-worker and tessera-dispatcher
#   2. `tessera gpu --json`: the build has CUDA hwaccel, scale_cuda, h264_nvenc, hevc_nvenc
#      (a build-time property: needs no GPU); the worker and dispatcher print --help
#   3. bare root: inside a chroot that holds only the binaries, the glibc files ldd names,
#      /proc, /dev and the inputs, so no FFmpeg or codec library exists where the process can
#      see it (needs root: unshare + chroot): `tessera transcode` to H.264 MP4, HEVC MKV and AV1
#      MP4 (SVT-AV1), and of an AV1 input to H.264 (decoded by libdav1d, the build's only
#      software AV1 decoder); every output is decoded to its last frame by the host's ffprobe;
#      `tessera-dispatcher --help` runs there too
#   4. the software-path correctness tests run against the static `tessera` through
#      TESSERA_BIN: cargo test --workspace --test transcode_formats, transcode_audio,
#      transcode_gop, transcode_hdr, transcode_metadata, transcode_subtitles,
#      transcode_captions, bad_inputs, progress, input_matrix (its fixed CI sample);
#      the fixtures and the oracle use the system ffmpeg/ffprobe CLIs as in scripts/test.sh.
#
#   scripts/check-static.sh               all four
#   scripts/check-static.sh --quick       tests: only transcode_formats and input_matrix
#   scripts/check-static.sh --no-tests    steps 1-3 only (seconds)
#   scripts/check-static.sh --if-built    exit 0 with a notice when there are no static binaries;
#                                         run steps 1-3 only when they were built from another commit
#
# Options:
#   --dist DIR     where the binaries are (default target/static-dist)
#   --quick, --no-tests, --if-built: as above
#   -h, --help     this text
# Environment: CARGO_TARGET_DIR for the test crate (default: cargo's, i.e. target/, the same
# debug build scripts/test.sh makes, so in CI the tests are not compiled twice);
# TESSERA_TEST_TIMEOUT_S (default 300). Exit status: 0 when every check passes.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
export LC_ALL=C

log() { printf '[check-static] %s\n' "$*" >&2; }
die() { printf '[check-static] FAIL: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; }

DIST="$ROOT/target/static-dist"
mode=full if_built=0
while (($#)); do
  case "$1" in
    --dist) [[ $# -ge 2 ]] || die "--dist needs a directory"; DIST="$2"; shift ;;
    --dist=*) DIST="${1#--dist=}" ;;
    --quick) mode=quick ;;
    --no-tests) mode=none ;;
    --if-built) if_built=1 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
  shift
done
[[ $DIST == /* ]] || DIST="$ROOT/$DIST"
TESSERA="$DIST/tessera"
MEDIA="$DIST/tessera-media"
WORKER="$DIST/tessera-worker"
DISPATCHER="$DIST/tessera-dispatcher"

if [[ ! -x $TESSERA || ! -x $MEDIA || ! -x $WORKER || ! -x $DISPATCHER ]]; then
  if ((if_built)); then
    log "skipped: no static binaries in $DIST (scripts/build-static.sh makes them)"
    exit 0
  fi
  die "no static binaries in $DIST: run scripts/build-static.sh first"
fi

built_from=$(sed -n 's/^commit: //p' "$DIST/BUILDINFO.txt" 2>/dev/null || true)
head_commit=$(git rev-parse HEAD 2>/dev/null || true)
if ((if_built)) && [[ $mode != none && -n $head_commit && $built_from != "$head_commit" ]]; then
  log "the static binaries were built from ${built_from:-an unknown commit}, not HEAD $head_commit:"
  log "  checking them (steps 1-3) but not running the tests against them"
  mode=none
fi

failures=()
fail() { log "FAIL: $*"; failures+=("$*"); }

# ---------------------------------------------------------------------------------------------
log "1/4 ldd, readelf NEEDED"
readonly ALLOWED='^(linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libutil\.so\.1|libgcc_s\.so\.1)$'
for b in "$TESSERA" "$MEDIA" "$WORKER" "$DISPATCHER"; do
  printf '%s (NEEDED: %s):\n' "${b#"$ROOT"/}" \
    "$(readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
  out=$(ldd "$b" 2>&1) || { fail "ldd $b: $out"; continue; }
  printf '%s\n' "$out" | sed 's/^/    /'
  if grep -Eqi 'libav|libsw|libpostproc|x264|x265|libaom|dav1d|svtav1|zimg|libnuma|libstdc\+\+|libz\.|libsqlite|libssl|libcrypto|not found' <<<"$out"; then
    fail "$(basename "$b") needs an FFmpeg/codec/C++ shared library"
  fi
  others=$(awk '{print $1}' <<<"$out" | grep -Ev "$ALLOWED" || true)
  [[ -z $others ]] || fail "$(basename "$b") needs libraries beyond glibc: $(tr '\n' ' ' <<<"$others")"
done

# ---------------------------------------------------------------------------------------------
log "2/4 what the linked FFmpeg offers (tessera gpu --json; no GPU needed)"
caps=$("$TESSERA" gpu --json 2>/dev/null) || caps=""
if [[ -z $caps ]]; then
  fail "tessera gpu --json did not run"
else
  ffmpeg_caps=$(python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["ffmpeg"], sort_keys=True))' <<<"$caps" 2>/dev/null || true)
  log "  $ffmpeg_caps"
  for k in cuda_hwaccel scale_cuda h264_nvenc hevc_nvenc; do
    grep -q "\"$k\": true" <<<"$ffmpeg_caps" || fail "the static build lacks $k"
  done
fi
"$WORKER" --help >/dev/null 2>&1 || fail "tessera-worker --help did not run"
"$DISPATCHER" --help >/dev/null 2>&1 || fail "tessera-dispatcher --help did not run"

# ---------------------------------------------------------------------------------------------
log "3/4 tessera transcode in a bare root (only the binaries and glibc)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-check-static.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Fills root $1 with the four binaries and exactly the files ldd names (and their symlink
# targets), at the same paths.
make_bare_root() {
  local r="$1" b lib
  mkdir -p "$r"/{proc,dev,tmp,data}
  for b in "$TESSERA" "$MEDIA" "$DISPATCHER"; do cp "$b" "$r/"; done
  # (ldd of several files prints a "file:" header before each list: not a library.)
  for lib in $(ldd "$TESSERA" "$MEDIA" "$DISPATCHER" \
    | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $1 !~ /:$/ {print $1}' | sort -u); do
    mkdir -p "$r$(dirname "$lib")"
    cp -L "$lib" "$r$lib"
  done
}

# The inputs, made with the host's ffmpeg: H.264/AAC MP4, and an AV1 MKV (the host's
# libaom-av1, an encoder other than the one under test, else its libsvtav1; without either, the
# static build's own AV1 output is used later).
make_inputs() {
  local d="$1" encoders enc=""
  ffmpeg -v error -f lavfi -i testsrc2=size=320x240:rate=25:duration=4 \
    -f lavfi -i sine=frequency=440:sample_rate=48000:duration=4 \
    -c:v libx264 -preset veryfast -g 25 -pix_fmt yuv420p -c:a aac -b:a 96k "$d/in.mp4"
  encoders=$(ffmpeg -hide_banner -encoders 2>/dev/null | awk '{print $2}')
  if grep -qx libaom-av1 <<<"$encoders"; then enc=libaom-av1
  elif grep -qx libsvtav1 <<<"$encoders"; then enc=libsvtav1
  fi
  case "$enc" in
    libsvtav1) ffmpeg -v error -i "$d/in.mp4" -c:v libsvtav1 -preset 12 -g 25 -c:a copy "$d/in-av1.mkv" ;;
    libaom-av1) ffmpeg -v error -i "$d/in.mp4" -c:v libaom-av1 -usage realtime -cpu-used 8 -b:v 300k -g 25 -c:a copy "$d/in-av1.mkv" ;;
    *) log "  the host ffmpeg has no AV1 encoder: the AV1 input is the static build's own AV1 output" ;;
  esac
  [[ -z $enc ]] || log "  AV1 input made with the host's $enc"
}

# Decodes every video frame of $1 with the host's ffprobe; prints "codec,frames".
probe_frames() {
  ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=codec_name,nb_read_frames \
    -of csv=p=0 "$1" 2>/dev/null || true
}

bare_root_check() {
  if [[ $(id -u) -ne 0 ]] || ! command -v unshare >/dev/null 2>&1; then
    log "  skipped: needs root and unshare (util-linux)"
    return 0
  fi
  command -v ffmpeg >/dev/null 2>&1 || { fail "bare root: the ffmpeg CLI (to make the input) is missing"; return; }
  local r="$tmp/root"
  make_bare_root "$r"
  make_inputs "$r/data"
  local found
  found=$(find "$r" \( -name 'libav*' -o -name 'libsw*' -o -name 'libx26*' -o -name 'libstdc++*' \
    -o -name '*dav1d*' -o -name '*SvtAv1*' -o -name 'libaom*' \) -print)
  [[ -z $found ]] || { fail "bare root is not bare: $found"; return; }
  log "  root holds: $(cd "$r" && find . -type f ! -path './data/*' | sort | tr '\n' ' ')"
  # The AV1 decode reads in-av1.mkv, or (no host AV1 encoder) the AV1 output made just before.
  local cmd='set -e
    mount -t proc proc "$R/proc"
    mount -t tmpfs tmpfs "$R/tmp"
    mount --rbind /dev "$R/dev"
    t() { chroot "$R" /tessera transcode "$@" --segment-seconds 1 --workers 2 --progress plain --work-dir /tmp; }
    echo "== h264"; t /data/in.mp4 -o /data/out.mp4 --codec h264 --preset veryfast
    echo "== hevc"; t /data/in.mp4 -o /data/out.mkv --codec hevc --preset ultrafast
    echo "== av1 encode"; t /data/in.mp4 -o /data/out-av1.mp4 --codec av1 --preset 12
    [ -f "$R/data/in-av1.mkv" ] || cp "$R/data/out-av1.mp4" "$R/data/in-av1.mkv"
    echo "== av1 decode"; t /data/in-av1.mkv -o /data/out-from-av1.mp4 --codec h264 --preset veryfast
    echo "== dispatcher"; chroot "$R" /tessera-dispatcher --help >/dev/null'
  if ! R="$r" unshare --mount --pid --fork --propagation private bash -c "$cmd" >"$tmp/bare.log" 2>&1; then
    sed 's/^/    /' "$tmp/bare.log" | tail -25 >&2
    fail "the bare root run failed at: $(grep '^== ' "$tmp/bare.log" | tail -1)"
    return
  fi
  local o want frames
  log "  AV1 input: $(probe_frames "$r/data/in-av1.mkv")"
  for o in out.mp4:h264 out.mkv:hevc out-av1.mp4:av1 out-from-av1.mp4:h264; do
    want=${o#*:} o=${o%%:*}
    frames=$(probe_frames "$r/data/$o")
    log "  $o: video $frames (expected $want, 100 frames), audio $(ffprobe -v error -select_streams a:0 -show_entries stream=codec_name -of csv=p=0 "$r/data/$o" 2>/dev/null || true)"
    [[ $frames == "$want,100" ]] || fail "bare root: $o has video '$frames', expected $want with 100 frames"
  done
  log "  tessera-dispatcher --help: ok (in the bare root)"
}
bare_root_check

# ---------------------------------------------------------------------------------------------
tests_summary="not run"
if [[ $mode != none ]]; then
  if [[ $mode == quick ]]; then
    suites=(transcode_formats input_matrix)
  else
    suites=(transcode_formats transcode_audio transcode_gop transcode_hdr transcode_metadata
      transcode_subtitles transcode_captions bad_inputs progress input_matrix)
  fi
  log "4/4 cargo test --workspace ${suites[*]/#/--test } with TESSERA_BIN=$TESSERA"
  args=()
  for s in "${suites[@]}"; do args+=(--test "$s"); done
  args+=(--no-fail-fast)
  export TESSERA_TEST_TIMEOUT_S="${TESSERA_TEST_TIMEOUT_S:-300}"
  t0=$SECONDS
  set +e
  TESSERA_BIN="$TESSERA" cargo test --locked --workspace "${args[@]}" \
    2>&1 | tee "$tmp/tests.log" | grep --line-buffered -E '^(test |\||running [0-9]+ test|test result:|error)'
  rc=${PIPESTATUS[0]}
  set -e
  passed=$(grep -oE 'test result: [A-Za-z]+\. [0-9]+ passed; [0-9]+ failed' "$tmp/tests.log" \
    | awk '{p += $4; f += $6} END {printf "%d passed, %d failed", p, f}')
  tests_summary="$passed (exit $rc, $((SECONDS - t0)) s)"
  log "  tests: $tests_summary"
  ((rc == 0)) || fail "tests: $tests_summary"
fi

if ((${#failures[@]})); then
  log "${#failures[@]} check(s) failed:"
  printf '  - %s\n' "${failures[@]}" >&2
  exit 1
fi
log "ok: ldd clean, FFmpeg capabilities present, bare-root transcode ok, tests: $tests_summary"
