#!/usr/bin/env bash
# The compose farm under faults (issue 11), on a real Docker engine:
#   1. builds the images (scripts/docker-images.sh) and brings docker/compose.yaml up with
#      4 CPU workers, timing `compose up` -> the first segment encoded;
#   2. submits 5 jobs with the host's `tessera submit --wait` (uploads through presigned URLs);
#   3. while they run: `docker kill` a worker, `docker stop` another (SIGTERM: it must drain and
#      exit 0 within its grace period), `docker network disconnect` a third for 60 s, and
#      `docker restart` RabbitMQ;
#   4. checks every job finished once, each output frame-exact against its source (the list of
#      video timestamps, audio duration), nothing left besides the 5 outputs and no work-area
#      object once the partitioned worker is back;
#   5. scales back to 4 workers, submits a sixth job with the documented command
#      (`tessera submit clip.mp4 --wait`, default output) and, while it runs, scales down to 1:
#      the 3 workers that go must exit 0 and the job must still finish frame-exact.
#
#   scripts/docker-farm-test.sh                 # release binaries (built if needed)
#   TESSERA_DOCKER_PROFILE=debug scripts/docker-farm-test.sh   # CI: the test build's binaries
#   TESSERA_DOCKER_SKIP_BUILD=1 ...             # reuse the images already built
#
# Exit 0 when every check passed; 2 when there is no Docker engine (it says so).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
say() { printf '[docker-farm %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
fail() { printf '[docker-farm] FAILED: %s\n' "$*" >&2; exit 1; }

if ! docker info >/dev/null 2>&1; then
  echo "docker-farm: no Docker engine answers here; the compose fault test did NOT run" >&2
  exit 2
fi
if docker compose version >/dev/null 2>&1; then compose_cmd=(docker compose); else compose_cmd=(docker-compose); fi
profile=${TESSERA_DOCKER_PROFILE:-release}
tessera=$PWD/target/$profile/tessera

# --- images ----------------------------------------------------------------------------------
if [[ ${TESSERA_DOCKER_SKIP_BUILD:-0} != 1 ]]; then
  say "images (scripts/docker-images.sh, $profile binaries)"
  TESSERA_DOCKER_PROFILE=$profile bash scripts/docker-images.sh
fi
if [[ $profile == release ]]; then cargo build -q --locked --release -p tessera-cli; else cargo build -q --locked --workspace --bins; fi

# --- a private copy of the compose project, its secrets, free ports --------------------------
work=$(mktemp -d /tmp/tessera-docker-farm.XXXXXX)
project=tessera-ci$$
cp docker/compose.yaml docker/garage.toml docker/garage-init.sh docker/make-secrets.sh "$work/"
sh "$work/make-secrets.sh" >/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export TESSERA_API_PORT=$(free_port) TESSERA_S3_PORT=$(free_port)
export TESSERA_SEGMENT_SECONDS=2 TESSERA_PARALLELISM=4
compose() { "${compose_cmd[@]}" -f "$work/compose.yaml" -p "$project" "$@"; }
cleanup() {
  local rc=$?
  if ((rc != 0)); then
    compose logs --no-color --tail=80 >"$work/logs.txt" 2>&1 || true
    echo "--- last compose logs ($work/logs.txt) ---" >&2
    tail -n 150 "$work/logs.txt" >&2 || true
  fi
  compose down -v --remove-orphans >/dev/null 2>&1 || true
  ((rc != 0)) || rm -rf "$work"
}
trap cleanup EXIT
export TESSERA_SERVER=http://127.0.0.1:$TESSERA_API_PORT
TESSERA_TOKEN=$(sed -n 's/^TESSERA_TOKEN=//p' "$work/secrets/client.env")
export TESSERA_TOKEN
key_id=$(sed -n 's/^TESSERA_S3_ACCESS_KEY_ID=//p' "$work/secrets/s3.env")
key_secret=$(sed -n 's/^TESSERA_S3_SECRET_ACCESS_KEY=//p' "$work/secrets/s3.env")
# S3 requests signed by curl (Garage wants the payload hash header).
sigv4=(-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --aws-sigv4 "aws:amz:garage:s3" --user "$key_id:$key_secret")

# --- sources: 5 clips of different lengths, H.264 + AAC ---------------------------------------
durations=(14 16 18 20 22)
for i in 0 1 2 3 4; do
  ffmpeg -v error -y -f lavfi -i "testsrc2=size=640x360:rate=25:duration=${durations[i]}" \
    -f lavfi -i "sine=frequency=$((300 + 100 * i)):duration=${durations[i]}" \
    -c:v libx264 -preset veryfast -g 50 -c:a aac -b:a 96k -shortest "$work/clip$i.mp4"
done

# --- up, and the time to the first segment encoded --------------------------------------------
say "compose up: rabbitmq, garage, garage-init, dispatcher, 4 workers (${compose_cmd[*]})"
t0=$(date +%s%N)
compose up -d --scale worker=4 >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; fail "compose up"; }
t_up=$(date +%s%N)
for _ in $(seq 1 120); do curl -fsS "$TESSERA_SERVER/healthz" >/dev/null 2>&1 && break; sleep 0.5; done
curl -fsS "$TESSERA_SERVER/healthz" >/dev/null || fail "the dispatcher API does not answer at $TESSERA_SERVER"

pids=()
for i in 0 1 2 3 4; do
  "$tessera" submit "$work/clip$i.mp4" -o "s3://tessera-media/outputs/clip$i.mp4" --preset veryfast \
    --wait >"$work/submit$i.out" 2>"$work/submit$i.err" &
  pids+=($!)
  if ((i == 0)); then
    # Time to the first encoded segment: job 0 was submitted as soon as the API answered.
    for _ in $(seq 1 600); do
      id=$(head -n 1 "$work/submit0.out" 2>/dev/null || true)
      if [[ -n $id ]]; then
        done_count=$("$tessera" status "$id" --json 2>/dev/null | python3 -c \
          'import json,sys; print(json.load(sys.stdin).get("segments_done", 0))' 2>/dev/null || echo 0)
        ((done_count > 0)) && break
      fi
      sleep 0.2
    done
    t_first=$(date +%s%N)
    ((done_count > 0)) || fail "no segment of job 0 was encoded within 120 s"
    say "compose up -> first segment encoded: $(( (t_first - t0) / 1000000 )) ms" \
      "(compose up itself: $(( (t_up - t0) / 1000000 )) ms)"
  fi
done

# --- faults, while the jobs run ----------------------------------------------------------------
mapfile -t workers < <(docker ps -q --filter "label=com.docker.compose.project=$project" \
  --filter "label=com.docker.compose.service=worker" | sort)
((${#workers[@]} == 4)) || fail "expected 4 running workers, found ${#workers[@]}"
rabbit=$(docker ps -q --filter "label=com.docker.compose.project=$project" \
  --filter "label=com.docker.compose.service=rabbitmq")
network=$(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}' "${workers[2]}")
fault_start=$(date +%s)
say "fault: docker kill ${workers[0]:0:12} (SIGKILL)"
docker kill "${workers[0]}" >/dev/null
say "fault: docker stop ${workers[1]:0:12} (SIGTERM; it drains)"
( s=$(date +%s); docker stop -t 110 "${workers[1]}" >/dev/null; echo $(( $(date +%s) - s )) >"$work/stop.secs" ) &
stop_pid=$!
say "fault: docker network disconnect $network ${workers[2]:0:12} for 60 s"
docker network disconnect "$network" "${workers[2]}"
( sleep 60; docker network connect "$network" "${workers[2]}"; echo reconnected >"$work/reconnect.done" ) &
reconnect_pid=$!
sleep 5
say "fault: docker restart RabbitMQ"
docker restart -t 20 "$rabbit" >/dev/null

wait "$stop_pid"
stop_exit=$(docker inspect -f '{{.State.ExitCode}}' "${workers[1]}")
say "the stopped worker exited $stop_exit after $(cat "$work/stop.secs") s"
[[ $stop_exit == 0 ]] || fail "docker stop: the worker exited $stop_exit, not 0"

# --- every job ends, once, frame-exact ----------------------------------------------------------
failed=0
for i in 0 1 2 3 4; do
  if ! timeout 900 tail --pid="${pids[i]}" -f /dev/null; then fail "job $i still running after 15 min"; fi
  if ! wait "${pids[i]}"; then
    echo "--- submit $i ---" >&2; cat "$work/submit$i.err" >&2; failed=1; continue
  fi
  out=$(sed -n 2p "$work/submit$i.out")
  [[ $out == "s3://tessera-media/outputs/clip$i.mp4" ]] || { echo "job $i printed '$out'" >&2; failed=1; }
done
((failed == 0)) || fail "not every job finished"
say "all 5 jobs done ($(( $(date +%s) - fault_start )) s after the first fault)"
wait "$reconnect_pid" || true

s3_get() {  # s3_get KEY FILE: GET from Garage with the farm's key (SigV4 by curl)
  curl -fsS -m 60 "${sigv4[@]}" -o "$2" "http://127.0.0.1:$TESSERA_S3_PORT/tessera-media/$1"
}
video_pts() { ffprobe -v error -select_streams v:0 -show_entries packet=pts_time -of csv=p=0 "$1" | sort -g; }
audio_seconds() { ffprobe -v error -select_streams a:0 -show_entries stream=duration -of csv=p=0 "$1"; }
# check_output KEY SOURCE NAME: the output has exactly the source's frames, each at its source
# frame's time (within a millisecond), none twice, and the source's audio duration.
check_output() {
  local key=$1 src=$2 name=$3
  s3_get "$key" "$work/$name.mp4" || fail "$name ($key) cannot be read back"
  video_pts "$src" >"$work/$name.src.pts"
  video_pts "$work/$name.mp4" >"$work/$name.pts"
  local frames_src frames_out a_src a_out
  frames_src=$(wc -l <"$work/$name.src.pts") frames_out=$(wc -l <"$work/$name.pts")
  [[ $frames_src == "$frames_out" ]] || fail "$name: $frames_out frames, the source has $frames_src"
  paste "$work/$name.src.pts" "$work/$name.pts" | awk -v n="$name" \
    '{ d = $1 - $2; if (d < 0) d = -d; if (d > 0.001) { print n ": frame " NR " at " $2 " s, source " $1 " s"; bad = 1; exit } }
     END { exit bad }' || fail "$name: timestamps differ from the source"
  [[ $(sort -u "$work/$name.pts" | wc -l) == "$frames_out" ]] || fail "$name: a timestamp appears twice"
  a_src=$(audio_seconds "$src") a_out=$(audio_seconds "$work/$name.mp4")
  awk -v a="$a_src" -v b="$a_out" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 0.05) }' \
    || fail "$name: audio lasts $a_out s, the source $a_src s"
  say "$name: $frames_out frames at the source's timestamps, audio $a_out s"
}
for i in 0 1 2 3 4; do
  check_output "outputs/clip$i.mp4" "$work/clip$i.mp4" "output$i"
done

# Exactly 5 jobs, each done; only the 5 outputs under outputs/ (no partial or temporary file).
"$tessera" list --json --limit 50 >"$work/jobs.json"
python3 - "$work/jobs.json" <<'EOF' || fail "the dispatcher's job list is not 5 done jobs"
import json, sys
jobs = json.load(open(sys.argv[1]))
jobs = jobs.get("jobs", jobs) if isinstance(jobs, dict) else jobs
states = sorted(j["state"] for j in jobs)
print(f"[docker-farm] jobs: {states}")
sys.exit(0 if states == ["done"] * 5 else 1)
EOF
s3_keys() {  # s3_keys BUCKET PREFIX: the keys under PREFIX, space-separated, sorted
  local listing
  listing=$(curl -fsS -m 60 "${sigv4[@]}" \
    "http://127.0.0.1:$TESSERA_S3_PORT/$1?list-type=2&prefix=$(sed 's|/|%2F|g' <<<"$2")") \
    || fail "cannot list s3://$1/$2"
  { grep -o '<Key>[^<]*</Key>' <<<"$listing" || true; } | sed 's/<[^>]*>//g' | sort | tr '\n' ' '
}
keys=$(s3_keys tessera-media outputs/)
[[ $keys == "outputs/clip0.mp4 outputs/clip1.mp4 outputs/clip2.mp4 outputs/clip3.mp4 outputs/clip4.mp4 " ]] \
  || fail "outputs/ holds: $keys"
# The partitioned worker is back: whatever it finished late must not reappear in the work
# area, which each job's end cleaned (only the ended/ markers stay).
for _ in $(seq 1 60); do
  left=$(s3_keys tessera-work jobs/)
  [[ -z $left ]] && break
  sleep 1
done
[[ -z $left ]] || fail "the work area still holds: ${left:0:400}"

# --- scale down while a job runs: the workers that go drain and exit 0 ---------------------------
compose up -d --no-recreate --scale worker=4 >"$work/scale.log" 2>&1 || { cat "$work/scale.log" >&2; fail "scale up"; }
running=$(docker ps -q --filter "label=com.docker.compose.project=$project" \
  --filter "label=com.docker.compose.service=worker" | wc -l)
((running == 4)) || fail "scaled back up to 4 workers, $running run"
# Exactly the documented command (docs/deploy.md): the default output and settings.
(cd "$work" && "$tessera" submit clip4.mp4 --wait >"$work/submit5.out" 2>"$work/submit5.err") &
again=$!
for _ in $(seq 1 600); do
  id=$(head -n 1 "$work/submit5.out" 2>/dev/null || true)
  [[ -n $id ]] && "$tessera" status "$id" --json 2>/dev/null | python3 -c \
    'import json,sys; sys.exit(0 if json.load(sys.stdin).get("segments_done", 0) > 0 else 1)' && break
  sleep 0.2
done
since=$(date +%s)
say "compose up --scale worker=1 while a job runs (scaling down 3 workers)"
compose up -d --no-recreate --scale worker=1 >"$work/down.log" 2>&1 || { cat "$work/down.log" >&2; fail "scale down"; }
sleep 1
codes=$(docker events --since "$since" --until "$(date +%s)" --filter event=die \
  --filter "label=com.docker.compose.project=$project" --filter "label=com.docker.compose.service=worker" \
  --format '{{.Actor.Attributes.exitCode}}' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
say "scaled-down workers' exit codes (count code): $codes"
[[ $codes == " 3 0;" ]] || fail "scaling down 3 workers: exit codes (count code) $codes, not 3 times 0"
timeout 600 tail --pid="$again" -f /dev/null || fail "the job run across the scale-down is still running"
wait "$again" || { cat "$work/submit5.err" >&2; fail "the job run across the scale-down failed"; }
out=$(sed -n 2p "$work/submit5.out")
[[ $out == s3://tessera-media/outputs/clip4-h264.mp4 ]] || fail "tessera submit clip4.mp4 --wait printed '$out'"
check_output outputs/clip4-h264.mp4 "$work/clip4.mp4" "output across the scale-down"
say "PASSED: 5 jobs frame-exact through kill, stop, a 60 s partition and a broker restart;" \
  "3 workers scaled down mid-job exited 0 and the job finished frame-exact"
