#!/usr/bin/env bash
# Times the compose farm from a fresh clone: `docker compose up` (images built from the
# clone's docker/Dockerfile, as `build:` in docker/compose.yaml does) to the first segment of
# a submitted job encoded, and on to the job done. Prints the figures docs/deploy.md
# ("Images") quotes.
#
#   scripts/compose-first-segment.sh [--workers N] [--variant -full] [--keep-images] [--prebuilt]
#     --prebuilt   use the images that exist ($TESSERA_REGISTRY, default tessera: what
#                  scripts/docker-images.sh built) instead of building: the start alone
#
# What it does, in a temporary directory:
#   1. `git clone` of this repository's HEAD (committed files only: what a user clones);
#   2. `docker/make-secrets.sh && docker compose -f docker/compose.yaml -p P up -d
#      --scale worker=N` with a registry prefix of its own (tessera-fresh<pid>), so no image
#      exists and compose builds every tessera image from the clone;
#   3. `tessera submit` (the host's release build) of a generated 20 s 720p clip, then polls
#      GET /v1/jobs/{id} until segments_done >= 1 (the first segment encoded) and the job is
#      done.
# Where no registry answers (this project's machines), the build arguments name the local
# images scripts/docker-images.sh makes (TESSERA_BUILDER_IMAGE=tessera-local/binaries:latest:
# the host's release binaries, so the time has no Rust compile in it; a user's builder stage
# compiles for many minutes first). It takes the project down with its volumes and removes
# the images it built (unless --keep-images); it touches no other project or image.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
say() { printf '[first-segment %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "FAIL: $*"; exit 1; }

workers=2
variant=""
keep_images=0
prebuilt=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --workers) workers=${2:?}; shift 2 ;;
    --variant) variant=${2?}; shift 2 ;;
    --keep-images) keep_images=1; shift ;;
    --prebuilt) prebuilt=1; keep_images=1; shift ;;
    *) die "unknown argument '$1' (--workers N, --variant -full, --keep-images)" ;;
  esac
done
docker info >/dev/null 2>&1 || { echo "compose-first-segment: no Docker engine answers" >&2; exit 2; }
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
tessera=${TESSERA_BIN:-$repo/target/release/tessera}
[[ -x $tessera ]] || die "no $tessera: cargo build --release -p tessera-cli (or set TESSERA_BIN)"

# Images a machine without a registry has instead of the public ones.
for pair in "TESSERA_BUILDER_IMAGE rust:1-bookworm tessera-local/binaries:latest" \
            "TESSERA_BASE_IMAGE debian:bookworm-slim tessera-local/debian:bookworm-slim" \
            "TESSERA_MINIMAL_IMAGE debian:bookworm-slim tessera-local/minimal"; do
  read -r var public local <<<"$pair"
  if [[ -z ${!var:-} ]] && ! docker image inspect "$public" >/dev/null 2>&1 \
     && docker image inspect "$local" >/dev/null 2>&1; then
    export "$var=$local"
  fi
done
# The broker's and the store's stand-ins likewise (RABBITMQ_IMAGE, GARAGE_IMAGE).
. "$repo/scripts/compose-images.sh" && tessera_service_images

work=$(mktemp -d /tmp/tessera-first-segment.XXXXXX)
project=tessera-first$$
if [[ $prebuilt == 1 ]]; then
  export TESSERA_REGISTRY=${TESSERA_REGISTRY:-tessera}
  docker image inspect "$TESSERA_REGISTRY/worker:latest$variant" >/dev/null 2>&1 \
    || die "no image $TESSERA_REGISTRY/worker:latest$variant: scripts/docker-images.sh"
else
  export TESSERA_REGISTRY=tessera-fresh$$
fi
export TESSERA_VARIANT=$variant TESSERA_SEGMENT_SECONDS=2
read -r TESSERA_API_PORT TESSERA_S3_PORT < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
export TESSERA_API_PORT TESSERA_S3_PORT
cleanup() {
  (cd "$work/clone" 2>/dev/null && "${compose[@]}" -f docker/compose.yaml -p "$project" down -v \
    --remove-orphans >/dev/null 2>&1) || true
  if [[ $keep_images == 0 && $TESSERA_REGISTRY == tessera-fresh$$ ]]; then
    docker image ls --format '{{.Repository}}:{{.Tag}}' | grep "^$TESSERA_REGISTRY/" \
      | xargs -r docker rmi >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

say "fresh clone of $(git rev-parse --short HEAD) in $work/clone"
git clone -q "$repo" "$work/clone"
ffmpeg -v error -f lavfi -i testsrc2=size=1280x720:rate=30:duration=20 \
  -f lavfi -i sine=frequency=440:duration=20 -c:v libx264 -preset veryfast -g 60 \
  -c:a aac -shortest "$work/clip.mp4"

cd "$work/clone"
start=$(date +%s.%N)
since() { awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say "docker/make-secrets.sh && compose up -d --scale worker=$workers (project $project, images $TESSERA_REGISTRY/*)"
docker/make-secrets.sh >/dev/null
"${compose[@]}" -f docker/compose.yaml -p "$project" up -d --scale "worker=$workers" \
  >"$work/up.log" 2>&1 || { tail -40 "$work/up.log" >&2; die "compose up"; }
t_up=$(since)
api=http://127.0.0.1:$TESSERA_API_PORT
until curl -fsS -m 2 "$api/healthz" >/dev/null 2>&1; do
  awk -v t="$(since)" 'BEGIN { exit !(t > 300) }' && die "the API did not answer within 300 s"
  sleep 0.2
done
t_api=$(since)

TESSERA_TOKEN=$(sed -n 's/^TESSERA_TOKEN=//p' docker/secrets/client.env)
export TESSERA_TOKEN TESSERA_SERVER=$api
id=$("$tessera" submit "$work/clip.mp4" 2>"$work/submit.log") || { cat "$work/submit.log" >&2; die "submit"; }
t_first="" t_done=""
while [[ -z $t_done ]]; do
  job=$(curl -fsS -m 5 -H "Authorization: Bearer $TESSERA_TOKEN" "$api/v1/jobs/$id" || echo '{}')
  read -r state done_ <<<"$(python3 -c 'import json,sys; j=json.loads(sys.argv[1] or "{}"); print(j.get("state","?"), j.get("segments_done",0))' "$job")"
  [[ -z $t_first && ${done_:-0} -ge 1 ]] && t_first=$(since)
  case $state in
    done) t_done=$(since) ;;
    failed|cancelled) die "job $id $state: $job" ;;
  esac
  awk -v t="$(since)" 'BEGIN { exit !(t > 900) }' && die "job $id not done within 900 s: $job"
  sleep 0.2
done

say "done"
printf 'compose up -> containers started%s: %6s s\n' "$([[ $prebuilt == 1 ]] && echo ' (images present)' || echo ' (images built)')" "$t_up"
printf 'compose up -> API healthy:                       %6s s\n' "$t_api"
printf 'compose up -> first segment encoded:             %6s s\n' "$t_first"
printf 'compose up -> job done (20 s 720p clip, 2 s segments, %s workers): %s s\n' "$workers" "$t_done"
for t in dispatcher worker; do
  image=$TESSERA_REGISTRY/$t:latest$variant
  printf '%-40s %s bytes\n' "$image" "$(docker image inspect -f '{{.Size}}' "$image")"
done
