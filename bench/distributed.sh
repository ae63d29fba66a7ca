#!/usr/bin/env bash
# Benchmark (issue 3): the whole distributed farm on this machine (tessera-dispatcher, two
# tessera-workers, RabbitMQ, a single-node Garage) against plain ffmpeg on the same input and
# settings, alternated in one run. Prints the median wall-time ratio (submit -> job done,
# output in S3) and the median per-segment overhead (time a segment spends in a worker
# outside decode/encode: fetch, staging, upload, event, ack).
#
#   bench/distributed.sh        BENCH_RUNS (default 3), BENCH_SECONDS (default 60)
#
# Targets (issue 3): ratio <= 1.08 on 2 cores; per-segment overhead < 20 ms. It also prints
# the workers' median time per segment phase (from their "segment phases" debug lines):
# fetch (free-space check + chunk download), child (in the media child's process but outside
# decode/encode: start-up, request, result), media (decode + encode), store (upload).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"

BENCH_RUNS=${BENCH_RUNS:-3}
BENCH_SECONDS=${BENCH_SECONDS:-60}
CACHE=bench/.cache
IN=$CACHE/input-1080p30-${BENCH_SECONDS}s.mp4
WORK=$(mktemp -d /tmp/tessera-dbench.XXXXXX)
TOKEN=bench-token-0123456789
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rabbitmqctl delete_vhost "$VHOST" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
say() { printf '==> %s\n' "$*"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mkdir -p "$CACHE"
if [[ ! -s $IN ]]; then
  say "input: generating $IN"
  ffmpeg -hide_banner -loglevel error -nostdin -y \
    -f lavfi -i "testsrc2=size=1920x1080:rate=30:duration=${BENCH_SECONDS}" \
    -f lavfi -i "sine=frequency=440:sample_rate=48000:duration=${BENCH_SECONDS}" \
    -c:v libx264 -preset veryfast -pix_fmt yuv420p -c:a aac -b:a 128k -shortest "$IN.part.mp4"
  mv -f "$IN.part.mp4" "$IN"
fi
say "build: cargo build --release --bins"
cargo build --release --bins -q

# --- Garage, single node -------------------------------------------------------------------
RPC=$(free_port); S3=$(free_port); ADMIN=$(free_port)
cat >"$WORK/garage.toml" <<TOML
metadata_dir = "$WORK/garage/meta"
data_dir = "$WORK/garage/data"
db_engine = "sqlite"
replication_factor = 1
compression_level = "none"
rpc_bind_addr = "127.0.0.1:$RPC"
rpc_public_addr = "127.0.0.1:$RPC"
rpc_secret = "$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:$S3"
[admin]
api_bind_addr = "127.0.0.1:$ADMIN"
TOML
G="garage -c $WORK/garage.toml"
$G server >"$WORK/garage.log" 2>&1 & PIDS+=($!)
for _ in $(seq 100); do $G status >/dev/null 2>&1 && break; sleep 0.2; done
NODE=$($G node id -q | cut -d@ -f1)
$G layout assign -z dc1 -c 1G "$NODE" >/dev/null
$G layout apply --version 1 >/dev/null
KEY_OUT=$($G key create bench-key)
KEY_ID=$(awk -F': *' '/Key ID/ {print $2; exit}' <<<"$KEY_OUT")
SECRET=$(awk -F': *' '/Secret key/ {print $2; exit}' <<<"$KEY_OUT")
for b in input output work; do
  $G bucket create "$b" >/dev/null
  $G bucket allow --read --write --owner "$b" --key bench-key >/dev/null
done

# --- RabbitMQ vhost, dispatcher, two workers -----------------------------------------------
VHOST=tessera-bench-$$
rabbitmqctl add_vhost "$VHOST" >/dev/null
rabbitmqctl set_permissions -p "$VHOST" guest ".*" ".*" ".*" >/dev/null
export TESSERA_AMQP_URL="amqp://guest:guest@127.0.0.1:5672/$VHOST" TESSERA_S3_ENDPOINT="http://127.0.0.1:$S3" \
  TESSERA_S3_REGION=garage TESSERA_S3_ACCESS_KEY_ID="$KEY_ID" TESSERA_S3_SECRET_ACCESS_KEY="$SECRET" \
  TESSERA_WORK_BUCKET=work TESSERA_API_TOKENS="$TOKEN" TESSERA_LOG=warn
target/release/tessera-dispatcher --listen 127.0.0.1:0 --buckets input,output --upload-bucket input \
  --db "$WORK/jobs.db" --staging-dir "$WORK/d" --parallelism 2 >"$WORK/dispatcher.out" 2>"$WORK/dispatcher.log" & PIDS+=($!)
for _ in $(seq 100); do grep -q "listening on" "$WORK/dispatcher.out" 2>/dev/null && break; sleep 0.1; done
API=$(sed -n 's/.*listening on //p' "$WORK/dispatcher.out")
for i in 1 2; do
  TESSERA_LOG=warn,tessera_worker::segment=debug target/release/tessera-worker --slots 1 --threads-per-slot 1 --staging-dir "$WORK/w$i" --id "w$i" \
    2>"$WORK/worker-$i.log" & PIDS+=($!)
done
api() { curl -sS -m 30 -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' "$@"; }

say "upload: $IN"
UP=$(api -X POST "$API/v1/uploads" -d '{"bucket":"input","key":"bench/input.mp4"}')
curl -sS -m 300 -X PUT -T "$IN" "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["url"])' <<<"$UP")" >/dev/null
IN_FRAMES=$(ffprobe -v error -select_streams v:0 -count_frames -show_entries stream=nb_read_frames -of csv=p=0 "$IN")

RESULTS=$WORK/results.tsv
for ((i = 1; i <= BENCH_RUNS; i++)); do
  t0=$(date +%s.%N)
  JOB=$(api -X POST "$API/v1/jobs" -d "{\"input\":\"s3://input/bench/input.mp4\",\"outputs\":[{\"destination\":\"s3://output/bench/out-$i.mp4\",\"codec\":\"h264\",\"preset\":\"veryfast\",\"crf\":23}]}")
  ID=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' <<<"$JOB")
  while :; do
    VIEW=$(api "$API/v1/jobs/$ID")
    STATE=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' <<<"$VIEW")
    [[ $STATE == done || $STATE == failed || $STATE == cancelled ]] && break
    sleep 0.1
  done
  t1=$(date +%s.%N)
  [[ $STATE == done ]] || { echo "job $ID $STATE: $VIEW" >&2; exit 1; }
  FRAMES=$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("frames"))' <<<"$VIEW")
  OVER=$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("median_segment_overhead_s"))' <<<"$VIEW")
  f0=$(date +%s.%N)
  ffmpeg -hide_banner -loglevel error -nostdin -y -i "$IN" -c:v libx264 -preset veryfast -crf 23 -c:a aac "$WORK/ffmpeg-$i.mp4"
  f1=$(date +%s.%N)
  python3 - "$i" "$t0" "$t1" "$f0" "$f1" "$FRAMES" "$OVER" "$IN_FRAMES" <<'PY' | tee -a "$RESULTS"
import sys
i, t0, t1, f0, f1, frames, over, want = sys.argv[1:]
t, f = float(t1) - float(t0), float(f1) - float(f0)
print(f"run {i}\t{t:.2f}\t{f:.2f}\t{t / f:.3f}\t{float(over) * 1000:.1f}\t{frames}\t{want}")
PY
done
python3 - "$RESULTS" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
ratio = statistics.median(float(r[3]) for r in rows)
over = statistics.median(float(r[4]) for r in rows)
exact = all(r[5] == r[6] for r in rows)
print(f"median ratio (farm submit->done / ffmpeg)  {ratio:.3f}   target <= 1.08  {'PASS' if ratio <= 1.08 else 'MISS'}")
print(f"median per-segment overhead               {over:.1f} ms target < 20 ms  {'PASS' if over < 20 else 'MISS'}")
print(f"frame counts equal the input's            {'PASS' if exact else 'FAIL'}")
sys.exit(0 if exact else 1)
PY
python3 - "$WORK"/worker-*.log <<'PY'
import re, statistics, sys
phases = {}
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        if "segment phases" in line:
            for k, v in re.findall(r"(\w+)_ms=(\d+)", line):
                phases.setdefault(k, []).append(int(v))
if phases:
    n = len(next(iter(phases.values())))
    parts = "  ".join(f"{k} {statistics.median(v):.0f}" for k, v in phases.items())
    print(f"median ms per segment phase ({n} segments)  {parts}")
PY
