#!/usr/bin/env bash
# Benchmark (issue 12 item 6): a 4-rung auto HLS ladder of a 1080p30 source made by
# `tessera transcode IN --hls DIR --workers 2`, against the one-command FFmpeg ladder
# (`-filter_complex split/scale ... -var_stream_map ... -f hls`) on the same machine.
#
#   bench/package.sh
#
# Environment:
#   BENCH_SECONDS  input duration in seconds (default 60); the input (1920x1080 30 fps
#                  testsrc2 + sine, libx264 veryfast, AAC 128k) is the one bench/transcode.sh
#                  makes, cached under bench/.cache/ (gitignored)
#   BENCH_RUNS     number of (tessera, ffmpeg) pairs, run alternately (default 3)
#   BENCH_STRICT   1: exit 2 when the target is missed (default 0: report only)
#   BENCH_TARGET   target for the median ratio (default 1.00)
#   TESSERA_BIN    a tessera binary to measure instead of building target/release/tessera
#   BENCH_PROFILE  1: after the pairs, run each side once more under `perf record -a` and
#                  print its CPU-seconds by library (bench/cpu_split.py): x264, swscale,
#                  libavcodec in the encode threads (source decode) and elsewhere (tessera:
#                  the QC decode of every stitched rung; ffmpeg: its decoder threads, AAC)
#
# Target: median wall-time ratio tessera/ffmpeg <= 1.00 (ratio per pair, then the median).
# Every rung of both sides must have the source's frame count, and tessera's rungs must be
# the sizes below, or the script fails (exit 1).
#
# Equal on both sides (from package/src/ladder.rs auto() and model/src/settings/mod.rs):
#   rungs 1920x1080 6000k, 1280x720 3000k, 960x540 2000k, 640x360 730k; libx264 preset
#   medium, profile high, yuv420p, b = the rate, maxrate 1.5x, bufsize 2x maxrate;
#   downscale with swscale bicubic (rung 0 is not scaled); an IDR (forced-idr=1) at the first
#   frame at or after every 6 s; x264's own keyint/scenecut (neither side sets them); fMP4
#   segments of 6 s, VOD playlists, one separate audio rendition (AUDIO group): FFmpeg's AAC
#   encoder at 128 kb/s, 48 kHz stereo. (Tessera re-encodes this input's AAC: its MP4 edit
#   list discards the priming packet, so media/src/probe.rs marks the track trimmed and
#   engine/src/audio_step.rs does not stream-copy it.)
# Not equal: tessera encodes farm segments (12 s, 2 at once, cores/2 x264 threads each)
#   in child processes and then packages them; ffmpeg runs one process with x264's default
#   threads per rung. File names, playlist text and BANDWIDTH figures differ; FFmpeg 5.1
#   also lists the audio rendition as an audio-only variant, which the measurement skips.
# Measured per rung: average bitrate = sum of the media segments' bytes * 8 / sum of EXTINF
# (init segment left out); PSNR (Y, and the Y/U/V average, of ffmpeg's psnr filter) of the rung,
# decoded through its media playlist, against the SOURCE scaled down to the rung's size with
# bicubic swscale (what each encoder was fed), first pair only; decoded frame count.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BENCH_SECONDS=${BENCH_SECONDS:-60}
BENCH_RUNS=${BENCH_RUNS:-3}
BENCH_STRICT=${BENCH_STRICT:-0}
BENCH_TARGET=${BENCH_TARGET:-1.00}
[[ $BENCH_SECONDS =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_SECONDS must be a positive integer" >&2; exit 1; }
[[ $BENCH_RUNS =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_RUNS must be a positive integer" >&2; exit 1; }

SIZE=1920x1080
SEG=6
# The auto ladder of a 1920x1080 30 fps source: WxH:bitrate (maxrate 1.5x, bufsize 2x that).
RUNGS=(1920x1080:6000000 1280x720:3000000 960x540:2000000 640x360:730000)
# shellcheck source=bench/common.sh
source bench/common.sh
RUNS_DIR=$CACHE/package-runs
mkdir -p "$RUNS_DIR"
bench_input "$SIZE"
bench_build

# --- the FFmpeg ladder --------------------------------------------------------------------
n=${#RUNGS[@]}
graph="[0:v]split=$n"
for ((r = 0; r < n; r++)); do graph+="[s$r]"; done
FF_MAPS=() FF_RATES=() VSM=""
for ((r = 0; r < n; r++)); do
  size=${RUNGS[r]%%:*} rate=${RUNGS[r]#*:}
  if ((r == 0)); then
    FF_MAPS+=(-map "[s0]")
  else
    graph+=";[s$r]scale=${size%x*}:${size#*x}:flags=bicubic[o$r]"
    FF_MAPS+=(-map "[o$r]")
  fi
  FF_RATES+=("-b:v:$r" "$rate" "-maxrate:v:$r" $((rate * 3 / 2)) "-bufsize:v:$r" $((rate * 3)))
  VSM+="v:$r,agroup:aud,name:v$r "
done
VSM+="a:0,agroup:aud,name:a0"
ffmpeg_ladder() { # sets FF_CMD, the command writing the ladder into folder $1
  FF_CMD=(ffmpeg -hide_banner -nostdin -y -i "$IN" -filter_complex "$graph" "${FF_MAPS[@]}" -map 0:a:0 \
    -c:v libx264 -preset medium -profile:v high -pix_fmt yuv420p "${FF_RATES[@]}" \
    -forced-idr 1 -force_key_frames "expr:gte(t,n_forced*$SEG)" -c:a aac -b:a 128k \
    -f hls -hls_time "$SEG" -hls_playlist_type vod -hls_segment_type fmp4 \
    -hls_fmp4_init_filename init.mp4 -hls_segment_filename "$1/%v/seg_%05d.m4s" \
    -master_pl_name master.m3u8 -var_stream_map "$VSM" "$1/%v/playlist.m3u8")
}

# --- runs ---------------------------------------------------------------------------------
# Runs `/usr/bin/time -f '%e' "$@"` with output to $log; prints WALL_S.

# Prints one TSV row per video rung of the package in $2 (side $1, run $3; PSNR when $4 = 1):
# side run height WxH kbps frames psnr_y psnr_avg
measure() {
  python3 - "$@" "$IN" <<'PY'
import re, subprocess, sys
from pathlib import Path
side, root, run, psnr, src = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4] == "1", sys.argv[5]
lines = (root / "master.m3u8").read_text().splitlines()
for i, line in enumerate(lines):
    res = re.search(r"RESOLUTION=(\d+)x(\d+)", line)
    if not line.startswith("#EXT-X-STREAM-INF:") or not res:
        continue  # ffmpeg also lists the audio rendition as an audio-only variant
    w, h = res.groups()
    playlist = root / lines[i + 1].strip()
    text = playlist.read_text().splitlines()
    seconds = sum(float(l.split(":")[1].split(",")[0]) for l in text if l.startswith("#EXTINF:"))
    size = sum((playlist.parent / l.strip()).stat().st_size for l in text if l.strip() and not l.startswith("#"))
    frames = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames",
                             "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", str(playlist)],
                            check=True, capture_output=True, text=True).stdout.split()[0]  # HLS: listed per program too
    y = avg = ""
    if psnr:
        graph = (f"[0:v]setpts=PTS-STARTPTS[d];[1:v]scale={w}:{h}:flags=bicubic,setpts=PTS-STARTPTS[r];"
                 "[d][r]psnr")
        err = subprocess.run(["ffmpeg", "-hide_banner", "-nostdin", "-i", str(playlist), "-i", src,
                              "-lavfi", graph, "-f", "null", "-"],
                             check=True, capture_output=True, text=True).stderr
        m = re.findall(r"PSNR y:(\S+) u:\S+ v:\S+ average:(\S+)", err)
        y, avg = m[-1] if m else ("?", "?")
    print(f"{side}\t{run}\t{h}\t{w}x{h}\t{size * 8 / seconds / 1000:.0f}\t{frames}\t{y}\t{avg}")
PY
}

RESULTS=$RUNS_DIR/results.tsv RUNG_ROWS=$RUNS_DIR/rungs.tsv
printf 'run\ttessera_s\tffmpeg_s\n' >"$RESULTS"
printf 'side\trun\theight\tsize\tkbps\tframes\tpsnr_y\tpsnr_avg\n' >"$RUNG_ROWS"
say "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
say "ladder: ${RUNGS[*]} (WxH:b/s), ${SEG} s fMP4 segments, AAC 128k"
say "runs: $BENCH_RUNS pair(s), alternating tessera then ffmpeg"

for ((i = 1; i <= BENCH_RUNS; i++)); do
  t_dir=$RUNS_DIR/tessera-$i f_dir=$RUNS_DIR/ffmpeg-$i
  rm -rf "$RUNS_DIR"/tessera-* "$RUNS_DIR"/ffmpeg-*
  mkdir -p "$f_dir"
  read -r t_s _ <<<"$(timed "$RUNS_DIR/tessera-$i.log" \
    "$TESSERA" transcode "$IN" --hls "$t_dir" --workers 2 --progress none)"
  ffmpeg_ladder "$f_dir"
  printf '%q ' "${FF_CMD[@]}" >"$RUNS_DIR/ffmpeg-command.txt"
  read -r f_s _ <<<"$(timed "$RUNS_DIR/ffmpeg-$i.log" "${FF_CMD[@]}")"
  printf '%s\t%s\t%s\n' "$i" "$t_s" "$f_s" >>"$RESULTS"
  psnr=0
  ((i == 1)) && psnr=1
  measure tessera "$t_dir" "$i" "$psnr" >>"$RUNG_ROWS"
  measure ffmpeg "$f_dir" "$i" "$psnr" >>"$RUNG_ROWS"
  printf 'run %s: tessera %7.2f s  |  ffmpeg %7.2f s  |  ratio %.3f\n' "$i" "$t_s" "$f_s" \
    "$(python3 -c 'import sys; print(float(sys.argv[1]) / float(sys.argv[2]))' "$t_s" "$f_s")"
done

# --- where the CPU goes (BENCH_PROFILE=1) ----------------------------------------------------
if [[ ${BENCH_PROFILE:-0} == 1 ]]; then
  if ! command -v perf >/dev/null 2>&1; then
    say "profile: skipped, perf is not installed (apt-get install linux-perf)"
  else
    say "profile: one more run of each side under perf record -a -F 199"
    p_dir=$RUNS_DIR/profile
    rm -rf "$p_dir" && mkdir -p "$p_dir/ffmpeg"
    perf record -q -a -F 199 -o "$p_dir/tessera.perf" -- \
      "$TESSERA" transcode "$IN" --hls "$p_dir/tessera" --workers 2 --progress none >/dev/null 2>&1
    ffmpeg_ladder "$p_dir/ffmpeg"
    perf record -q -a -F 199 -o "$p_dir/ffmpeg.perf" -- "${FF_CMD[@]}" >/dev/null 2>&1
    python3 bench/cpu_split.py "$p_dir/tessera.perf" 199 tessera
    python3 bench/cpu_split.py "$p_dir/ffmpeg.perf" 199 ffmpeg
  fi
fi

# --- summary ------------------------------------------------------------------------------
set +e
python3 - "$RESULTS" "$RUNG_ROWS" "$IN_FRAMES" "$BENCH_STRICT" "$BENCH_TARGET" "${RUNGS[@]}" <<'PY'
import csv, statistics, sys

results, rungs, in_frames, strict, target = sys.argv[1:6]
want = [r.split(":")[0] for r in sys.argv[6:]]
in_frames, strict, target = in_frames.strip(), strict == "1", float(target)
pairs = list(csv.DictReader(open(results), delimiter="\t"))
rows = list(csv.DictReader(open(rungs), delimiter="\t"))
ts = [float(r["tessera_s"]) for r in pairs]
fs = [float(r["ffmpeg_s"]) for r in pairs]
ratios = [t / f for t, f in zip(ts, fs)]
med = statistics.median(ratios)

print()
print(f"summary over {len(pairs)} pair(s) (input {in_frames} frames)")
print(f"  median wall     tessera {statistics.median(ts):8.2f} s    ffmpeg {statistics.median(fs):8.2f} s")
print()
print(f"  side     rung        kb/s (median)  frames  PSNR Y / avg dB (pair 1; input {in_frames} frames)")
bad = []
for side in ("tessera", "ffmpeg"):
    mine = [r for r in rows if r["side"] == side]
    for size in sorted({r["size"] for r in mine}, key=lambda s: -int(s.split("x")[1])):
        at = [r for r in mine if r["size"] == size]
        kbps = statistics.median(float(r["kbps"]) for r in at)
        frames = sorted({r["frames"] for r in at})
        first = next((r for r in at if r["psnr_y"]), None)
        dec = lambda v: f"{float(v):.2f}" if v.replace(".", "", 1).isdigit() else v
        q = f"{dec(first['psnr_y'])} / {dec(first['psnr_avg'])}" if first else "n/a"
        print(f"  {side:8} {size:>9}  {kbps:13.0f}  {','.join(frames):>6}  {q}")
        bad += [f"run {r['run']} {side} {size} has {r['frames']} frames" for r in at
                if r["frames"] != in_frames]
    for run in sorted({r["run"] for r in mine}):
        got = [r["size"] for r in mine if r["run"] == run]
        if sorted(got) != sorted(want):
            bad.append(f"run {run} {side} rungs {got}, expected {want}")
print()
print("ratio tessera/ffmpeg: per pair " + ", ".join(f"{r:.3f}" for r in ratios)
      + f", median {med:.3f} (target <= {target:.2f})  {'PASS' if med <= target else 'MISS'}")
print("frame counts and rungs: " + ("all rungs have the input's " + in_frames + " frames"
      if not bad else "FAIL: " + "; ".join(bad)))
if bad:
    sys.exit(1)
if strict and med > target:
    sys.exit(2)
PY
rc=$?
set -e
echo "(per-run data: $RESULTS, $RUNG_ROWS; the last pair's packages, logs and the FFmpeg"
echo " command (ffmpeg-command.txt) under $RUNS_DIR/)"
exit "$rc"
