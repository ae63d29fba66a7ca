#!/usr/bin/env bash
# Builds the four images of docker/Dockerfile (tessera/dispatcher, tessera/worker,
# tessera/worker-gpu, tessera/cli) on this machine and prints each one's size.
#
# Where no image registry can be reached (the development machines), it first makes the
# base image `debian:bookworm-slim` from Debian's archive (mmdebstrap, then docker import),
# and builds the binaries on the host (the same Debian 12 and FFmpeg 5.1 as the runtime
# image) instead of in the `rust:1-bookworm` builder stage: the stage between the
# `# >>> builder` and `# <<< builder` markers is replaced by one that holds those binaries.
# Users build docker/Dockerfile as it is.
#
#   scripts/docker-images.sh            # prebuilt binaries when rust:1-bookworm is absent
#   TESSERA_DOCKER_BUILDER=1 scripts/docker-images.sh   # always the Dockerfile's builder
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
say() { printf '==> %s\n' "$*"; }
command -v docker >/dev/null || { echo "docker-images: no docker CLI" >&2; exit 2; }
docker info >/dev/null 2>&1 || { echo "docker-images: no Docker engine answers" >&2; exit 2; }

version=$(git describe --always --dirty 2>/dev/null || echo dev)
targets=(dispatcher worker worker-gpu cli)

# --- base image -----------------------------------------------------------------------------
if ! docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
  if ! docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
    say "debian:bookworm-slim: no registry; making it from Debian's archive (mmdebstrap)"
    command -v mmdebstrap >/dev/null || apt-get install -y -q mmdebstrap >/dev/null
    tar=$(mktemp --suffix=.tar)
    # A slim root: minbase, no documentation or locales, apt lists removed.
    mmdebstrap --variant=minbase --quiet \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
      bookworm "$tar" \
      "deb http://deb.debian.org/debian bookworm main" \
      "deb http://deb.debian.org/debian bookworm-updates main" \
      "deb http://deb.debian.org/debian-security bookworm-security main"
    docker import --change 'CMD ["bash"]' "$tar" debian:bookworm-slim >/dev/null
    rm -f "$tar"
  fi
fi

# --- binaries -------------------------------------------------------------------------------
dockerfile=docker/Dockerfile
if [[ ${TESSERA_DOCKER_BUILDER:-0} != 1 ]] && ! docker image inspect rust:1-bookworm >/dev/null 2>&1 \
   && ! docker pull -q rust:1-bookworm >/dev/null 2>&1; then
  say "rust:1-bookworm: not available; building the binaries on the host"
  cargo build --release --locked -p tessera-cli -p tessera-worker -p tessera-dispatcher
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' EXIT
  install -d "$ctx/prebuilt"
  install -s -m 0755 target/release/tessera target/release/tessera-worker \
    target/release/tessera-dispatcher "$ctx/prebuilt/"
  # The same Dockerfile with its builder stage replaced by one holding these binaries.
  awk '/^# >>> builder/ { print "FROM debian:bookworm-slim AS builder"; print "COPY prebuilt/ /out/"; skip = 1; next }
       /^# <<< builder/ { skip = 0; next }
       !skip' docker/Dockerfile >"$ctx/Dockerfile"
  grep -q '^COPY prebuilt/ /out/' "$ctx/Dockerfile" || { echo "docker-images: no builder markers in docker/Dockerfile" >&2; exit 1; }
  dockerfile=$ctx/Dockerfile
  context=$ctx
else
  context=.
fi

# --- images ---------------------------------------------------------------------------------
for t in "${targets[@]}"; do
  say "tessera/$t ($version)"
  DOCKER_BUILDKIT=0 docker build -q -f "$dockerfile" --target "$t" \
    --build-arg VERSION="$version" -t "tessera/$t:$version" -t "tessera/$t:latest" "$context" >/dev/null
done
echo
printf '%-22s %s\n' image size
for t in "${targets[@]}"; do
  bytes=$(docker image inspect -f '{{.Size}}' "tessera/$t:latest")
  printf '%-22s %s MiB\n' "tessera/$t" "$((bytes / 1048576))"
done
