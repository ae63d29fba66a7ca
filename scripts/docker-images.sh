#!/usr/bin/env bash
# Builds the images of docker/Dockerfile on this machine from release binaries built here,
# and prints each one's size:
#
#   REGISTRY/worker:VERSION, :latest                 minimal: static binaries, glibc, tini
#   REGISTRY/dispatcher:VERSION, :latest             (needs target/static-dist/, made by
#                                                     scripts/build-static.sh)
#   REGISTRY/worker:VERSION-full, :latest-full       Debian 12 and FFmpeg 5.1's shared
#   REGISTRY/dispatcher:VERSION-full, :latest-full   libraries (target/release binaries)
#   REGISTRY/worker-gpu:VERSION, :latest             Debian, NVENC/NVDEC
#   REGISTRY/cli:VERSION, :latest                    Debian; also the compose farm's garage-init
#
#   scripts/docker-images.sh [--registry PREFIX] [--full-only] [--profile release|debug]
#     --registry PREFIX   image names' prefix (default $TESSERA_REGISTRY, else `tessera`),
#                         e.g. registry.example.com/media/tessera; the same variable names the
#                         images in docker/compose.yaml
#     --full-only         only the Debian images (also what happens without static binaries)
#     --profile debug     test images: the Debian images hold the test build's binaries
#                         (target/debug, `cargo build --workspace --bins`: nothing compiled
#                         again) and say so in their io.tessera.build.profile label; CI uses
#                         it to spare a cold release build (about 35 min on 2 cores). They
#                         must take a prefix other than `tessera` (--registry tessera-test);
#                         never publish them. The minimal images hold the static (release)
#                         binaries either way. Default release ($TESSERA_IMAGE_PROFILE).
#
# Why not the Dockerfile's own builder stages: this machine reaches no image registry, and a
# release build in a container would compile everything again. The release binaries come
# from the host (`cargo build --release`, Debian 12 like the images; target/static-dist/ as
# scripts/build-static.sh left it) and are handed to the Dockerfile in a local image,
# tessera-local/binaries (BUILDER_IMAGE: its /out and /out/static are taken as they are). The
# base images are made from Debian's archive when they cannot be pulled, under names of their
# own: tessera-local/debian:bookworm-slim (mmdebstrap minbase) for BASE_IMAGE and
# tessera-local/minimal (libc, CA certificates, tini: docker/minimal-root.sh on an mmdebstrap
# tree) for MINIMAL_IMAGE (scripts/local-images.sh). Users build docker/Dockerfile as it is.
#
# The compose farm (docker/compose.yaml) also needs `rabbitmq:4.3` and `dxflrs/garage`; where
# they cannot be pulled, stand-ins are built from docker/local/ under tessera-local/ names,
# never the public ones (scripts/compose-images.sh points compose at them):
# tessera-local/rabbitmq:4.0, Debian 13's rabbitmq-server 4.0 on tessera-local/debian:trixie-slim
# (scripts/local-images.sh), and tessera-local/garage from the host's `garage` binary.
#
# Images to publish hold release builds only (the default); `--profile debug` is for tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
say() { printf '==> %s\n' "$*"; }
die() { printf 'docker-images: %s\n' "$*" >&2; exit 1; }
# mmdebstrap_tree, tessera_debian_base, tessera_rabbitmq; tessera_have IMAGE (here or can be
# pulled); tessera_docker_build (the classic builder, quiet).
# shellcheck source=scripts/local-images.sh
. scripts/local-images.sh
docker_build() { tessera_docker_build "$@"; }

registry=${TESSERA_REGISTRY:-tessera}
full_only=0
profile=${TESSERA_IMAGE_PROFILE:-release}
while [[ $# -gt 0 ]]; do
  case $1 in
    --registry) registry=${2:?--registry needs a prefix}; shift 2 ;;
    --full-only) full_only=1; shift ;;
    --profile) profile=${2:?--profile needs release or debug}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (--registry PREFIX, --full-only, --profile release|debug)" ;;
  esac
done
case $profile in release|debug) ;; *) die "--profile $profile: release or debug" ;; esac
# Test images never take the names of release ones (a debug binary under tessera/worker:latest
# is what the review found): they need a registry prefix of their own.
if [[ $profile == debug && ${registry%/} == tessera ]]; then
  die "--profile debug makes test images: give them a prefix of their own (--registry tessera-test, or TESSERA_REGISTRY)"
fi
registry=${registry%/}
command -v docker >/dev/null || { echo "docker-images: no docker CLI" >&2; exit 2; }
docker info >/dev/null 2>&1 || { echo "docker-images: no Docker engine answers" >&2; exit 2; }

version=$(git describe --always --dirty 2>/dev/null || echo dev)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
[[ $version == *-dirty ]] && revision+="-dirty"
static_dir=target/static-dist
if [[ $full_only == 0 && ! -x $static_dir/tessera-dispatcher ]]; then
  say "no static binaries in $static_dir (scripts/build-static.sh): Debian (-full) images only"
  full_only=1
fi

# --- base images ----------------------------------------------------------------------------
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base_args=()
# debian:bookworm-slim, else tessera-local/debian:bookworm-slim (made from Debian's archive).
base=''
tessera_debian_base bookworm base
if [[ $base == tessera-local/* ]]; then
  # The Dockerfile's minimal-base stage is built from BASE_IMAGE with apt; this is the same
  # root made here, so the build needs no network.
  minimal=tessera-local/minimal
  if ! docker image inspect "$minimal" >/dev/null 2>&1; then
    say "$minimal: libc, CA certificates and tini from Debian's archive (docker/minimal-root.sh)"
    mmdebstrap_tree bookworm "$tmp/full" ca-certificates,tini
    sh docker/minimal-root.sh "$tmp/full" "$tmp/min"
    tar --numeric-owner -C "$tmp/min" -c . | docker import - "$minimal" >/dev/null
    rm -rf "$tmp/full" "$tmp/min"
  fi
  base_args+=(--build-arg "MINIMAL_IMAGE=$minimal")
fi
base_args+=(--build-arg "BASE_IMAGE=$base")

# --- binaries: release, from the host -------------------------------------------------------
if [[ $profile == release ]]; then
  say "release binaries (cargo build --release)"
  nice -n 5 cargo build -q --release --locked -p tessera-cli -p tessera-worker -p tessera-dispatcher
else
  say "TEST IMAGES: the Debian images get the test build's debug binaries (never publish them)"
  nice -n 5 cargo build -q --locked --workspace --bins
fi
install -d "$tmp/ctx/out"
install -s -m 0755 "target/$profile/tessera" "target/$profile/tessera-media" \
  "target/$profile/tessera-worker" "target/$profile/tessera-dispatcher" "$tmp/ctx/out/"
static_revision=$revision
if [[ $full_only == 0 ]]; then
  install -d "$tmp/ctx/out/static"
  install -m 0755 "$static_dir/tessera-media" "$static_dir/tessera-worker" \
    "$static_dir/tessera-dispatcher" "$tmp/ctx/out/static/"
  # The static binaries may come from another commit than HEAD: label what they are.
  static_revision=$(sed -n 's/^commit: //p' "$static_dir/BUILDINFO.txt" 2>/dev/null || true)
  grep -q '^git: .*-dirty' "$static_dir/BUILDINFO.txt" 2>/dev/null && static_revision+="-dirty"
  [[ -n $static_revision ]] || static_revision=unknown
fi
printf 'FROM %s\nCOPY out/ /out/\n' "$base" >"$tmp/ctx/Dockerfile"
binaries=tessera-local/binaries:latest
docker_build -t "$binaries" "$tmp/ctx"
rm -rf "$tmp/ctx"

# --- images ---------------------------------------------------------------------------------
# build TARGET REVISION NAME:TAG...: a target of docker/Dockerfile, REVISION its label.
build() {
  local target=$1 rev=$2 tags=() tag
  shift 2
  for tag in "$@"; do tags+=(-t "$tag"); done
  say "$target -> $*"
  docker_build -f docker/Dockerfile --target "$target" \
    --build-arg BUILDER_IMAGE="$binaries" "${base_args[@]}" \
    --build-arg VERSION="$version" --build-arg REVISION="$rev" --build-arg PROFILE="$profile" \
    "${tags[@]}" .
}
images=()
for t in dispatcher worker; do
  build "$t-full" "$revision" "$registry/$t:$version-full" "$registry/$t:latest-full"
  images+=("$registry/$t:latest-full")
done
for t in worker-gpu cli; do
  build "$t" "$revision" "$registry/$t:$version" "$registry/$t:latest"
  images+=("$registry/$t:latest")
done
if [[ $full_only == 0 ]]; then
  for t in dispatcher worker; do
    build "$t" "$static_revision" "$registry/$t:$version" "$registry/$t:latest"
    images+=("$registry/$t:latest")
  done
fi

# --- the services of docker/compose.yaml ------------------------------------------------------
# Where the official images cannot be pulled, stand-ins under tessera-local/ names (never the
# public ones); scripts/compose-images.sh points compose at them.
garage_image=dxflrs/garage:v${GARAGE_VERSION:-2.5.0}
# rabbitmq:4.3, else the stand-in tessera-local/rabbitmq:4.0 (on its own Debian 13 base).
rabbitmq_image=''
tessera_rabbitmq rabbitmq_image
if ! tessera_have "$garage_image"; then
  garage_image=tessera-local/${garage_image##*/}
  if ! docker image inspect "$garage_image" >/dev/null 2>&1; then
    garage_bin=$(command -v garage || true)
    [[ -n $garage_bin ]] || die "dxflrs/garage cannot be pulled and there is no garage binary to build $garage_image from"
    say "dxflrs/garage: no registry; building the stand-in $garage_image from $garage_bin"
    install -d "$tmp/garage"
    cp docker/local/garage.Dockerfile "$tmp/garage/Dockerfile"
    install -s -m 0755 "$garage_bin" "$tmp/garage/garage"
    docker_build --build-arg BASE_IMAGE="$base" -t "$garage_image" "$tmp/garage"
  fi
fi

echo
printf '%-36s %10s %8s\n' image bytes MiB
for image in "${images[@]}" "$rabbitmq_image" "$garage_image"; do
  bytes=$(docker image inspect -f '{{.Size}}' "$image")
  printf '%-36s %10s %8s\n' "$image" "$bytes" "$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')"
done
