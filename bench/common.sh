# Shared by the benchmark scripts (sourced, not run): tool checks, the cached test input,
# the release build and the timed run. Expects BENCH_SECONDS, a size in $1 of bench_input,
# and sets IN, IN_FRAMES, TESSERA, TIME.

export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
CACHE=bench/.cache
TESSERA=${TESSERA_BIN:-target/release/tessera}
TIME=/usr/bin/time

for tool in ffmpeg ffprobe python3 cargo; do
  command -v "$tool" >/dev/null 2>&1 || { echo "missing $tool (run scripts/setup-deps.sh)" >&2; exit 1; }
done
[[ -x $TIME ]] || { echo "missing $TIME (apt-get install time, or scripts/setup-deps.sh)" >&2; exit 1; }

say() { printf '==> %s\n' "$*"; }

# Decoded video frames of $1.
count_frames() {
  ffprobe -v error -select_streams v:0 -count_frames \
    -show_entries stream=nb_read_frames -of csv=p=0 "$1"
}

# The cached input of size $1 (WxH), BENCH_SECONDS long at 30 fps (testsrc2 + sine, libx264
# veryfast, AAC 128k): sets IN and IN_FRAMES.
bench_input() {
  local size=$1
  mkdir -p "$CACHE"
  IN=$CACHE/input-${size}p30-${BENCH_SECONDS}s.mp4
  if [[ -s $IN && -s $IN.frames ]]; then
    say "input: $IN (cached)"
  else
    say "input: generating $IN (${BENCH_SECONDS} s, $size, 30 fps, testsrc2 + sine, libx264 veryfast)"
    ffmpeg -hide_banner -loglevel error -nostdin -y \
      -f lavfi -i "testsrc2=size=${size}:rate=30:duration=${BENCH_SECONDS}" \
      -f lavfi -i "sine=frequency=440:sample_rate=48000:duration=${BENCH_SECONDS}" \
      -c:v libx264 -preset veryfast -pix_fmt yuv420p \
      -c:a aac -b:a 128k -ac 2 \
      -shortest -movflags +faststart -f mp4 "$IN.part"
    mv -f "$IN.part" "$IN"
    count_frames "$IN" >"$IN.frames"
  fi
  IN_FRAMES=$(<"$IN.frames")
  say "input frames: $IN_FRAMES"
}

# The release binary, unless TESSERA_BIN names one.
bench_build() {
  if [[ -n ${TESSERA_BIN:-} ]]; then
    say "build: skipped, measuring TESSERA_BIN=$TESSERA"
  else
    say "build: cargo build --release -p tessera-cli"
    cargo build --release -p tessera-cli
  fi
  [[ -x $TESSERA ]] || { echo "build did not produce $TESSERA" >&2; exit 1; }
}

# Runs `/usr/bin/time -f '%e %M' "$@"` with output to $1 (the log); prints "WALL_S RSS_KIB".
timed() {
  local log=$1 tfile=$1.time
  shift
  if ! "$TIME" -f '%e %M' -o "$tfile" "$@" >"$log" 2>&1; then
    echo "command failed: $*" >&2
    echo "--- last lines of $log:" >&2
    tail -n 30 "$log" >&2
    return 1
  fi
  tail -n 1 "$tfile"
}

# Runs "$@" (output to the log $1) in a cgroup of its own and prints "WALL_S CPU_S": the CPU
# (user + system) of its whole process tree, warm media children included (they are not
# reaped between operations, so /usr/bin/time and getrusage miss them). Needs a writable
# cgroup hierarchy: v2 (cpu.stat) or v1's cpuacct, as root has.
cpu_timed() {
  local log=$1 group="" v2=/sys/fs/cgroup v1=/sys/fs/cgroup/cpuacct start end cpu
  shift
  if [[ -f $v2/cgroup.subtree_control ]] && mkdir "$v2/tessera-bench-$$" 2>/dev/null; then
    group=$v2/tessera-bench-$$
  elif [[ -f $v1/cpuacct.usage ]] && mkdir "$v1/tessera-bench-$$" 2>/dev/null; then
    group=$v1/tessera-bench-$$
  else
    echo "cpu_timed: no writable cgroup (v2 at $v2 or v1 cpuacct at $v1): run as root" >&2
    return 1
  fi
  start=$(date +%s.%N)
  if ! sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$group" "$@" >"$log" 2>&1; then
    rmdir "$group" 2>/dev/null || true
    echo "command failed: $*" >&2
    tail -n 30 "$log" >&2
    return 1
  fi
  end=$(date +%s.%N)
  # Children killed at the end may take a moment to leave the group.
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    [[ -s $group/cgroup.procs ]] || break
    sleep 0.2
  done
  if [[ -f $group/cpu.stat ]]; then
    cpu=$(awk '$1 == "usage_usec" {print $2 / 1e6}' "$group/cpu.stat")
  else
    cpu=$(awk '{print $1 / 1e9}' "$group/cpuacct.usage")
  fi
  rmdir "$group" 2>/dev/null || true
  python3 -c "print(round($end - $start, 2), round($cpu, 2))"
}
