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
# The compose farm (docker/compose.yaml) also needs `rabbitmq:3.10` and `dxflrs/garage`; where
# they cannot be pulled, stand-ins with the same names are built from docker/local/ (Debian's
# rabbitmq-server 3.10, and the host's `garage` binary).
#
#   scripts/docker-images.sh            # prebuilt binaries when rust:1-bookworm is absent
#   TESSERA_DOCKER_BUILDER=1 scripts/docker-images.sh   # always the Dockerfile's builder
#   TESSERA_DOCKER_PROFILE=debug scripts/docker-images.sh   # host binaries from target/debug
#                                       # (CI: the test build already made them; no release build)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
say() { printf '==> %s\n' "$*"; }
# Whether IMAGE is here or can be pulled (30 s at most: offline, a pull may hang on DNS).
have() { docker image inspect "$1" >/dev/null 2>&1 || timeout 30 docker pull -q "$1" >/dev/null 2>&1; }
command -v docker >/dev/null || { echo "docker-images: no docker CLI" >&2; exit 2; }
docker info >/dev/null 2>&1 || { echo "docker-images: no Docker engine answers" >&2; exit 2; }

version=$(git describe --always --dirty 2>/dev/null || echo dev)
targets=(dispatcher worker worker-gpu cli)

# --- base image -----------------------------------------------------------------------------
if ! docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
  if ! have debian:bookworm-slim; then
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
if [[ ${TESSERA_DOCKER_BUILDER:-0} != 1 ]] && ! have rust:1-bookworm; then
  profile=${TESSERA_DOCKER_PROFILE:-release}
  say "rust:1-bookworm: not available; building the binaries on the host ($profile)"
  case $profile in
    release) cargo build --release --locked -p tessera-cli -p tessera-worker -p tessera-dispatcher ;;
    # The workspace's feature set, as scripts/test.sh builds it: nothing is compiled again.
    debug) cargo build --locked --workspace --bins ;;
    *) echo "docker-images: TESSERA_DOCKER_PROFILE is release or debug, not '$profile'" >&2; exit 2 ;;
  esac
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' EXIT
  install -d "$ctx/prebuilt"
  install -s -m 0755 "target/$profile/tessera" "target/$profile/tessera-media" \
    "target/$profile/tessera-worker" "target/$profile/tessera-dispatcher" "$ctx/prebuilt/"
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

# --- the services of docker/compose.yaml ------------------------------------------------------
garage_image=dxflrs/garage:v${GARAGE_VERSION:-2.5.0}
if ! have rabbitmq:3.10; then
  say "rabbitmq:3.10: no registry; building the stand-in from docker/local (Debian's rabbitmq-server)"
  DOCKER_BUILDKIT=0 docker build -q -f docker/local/rabbitmq.Dockerfile -t rabbitmq:3.10 docker/local >/dev/null
fi
if ! have "$garage_image"; then
  garage_bin=$(command -v garage || true)
  if [[ -z $garage_bin ]]; then
    echo "docker-images: $garage_image cannot be pulled and there is no garage binary to build it from" >&2
    exit 1
  fi
  say "$garage_image: no registry; building the stand-in from $garage_bin"
  gctx=$(mktemp -d)
  cp docker/local/garage.Dockerfile "$gctx/Dockerfile"
  install -s -m 0755 "$garage_bin" "$gctx/garage"
  DOCKER_BUILDKIT=0 docker build -q -t "$garage_image" "$gctx" >/dev/null
  rm -rf "$gctx"
fi

echo
printf '%-22s %s\n' image size
for t in "${targets[@]}"; do
  bytes=$(docker image inspect -f '{{.Size}}' "tessera/$t:latest")
  printf '%-22s %s MiB\n' "tessera/$t" "$((bytes / 1048576))"
done
for image in rabbitmq:3.10 "$garage_image"; do
  bytes=$(docker image inspect -f '{{.Size}}' "$image")
  printf '%-22s %s MiB\n' "$image" "$((bytes / 1048576))"
done
