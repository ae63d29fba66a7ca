#!/usr/bin/env bash
# A rolling upgrade of the compose farm under load (issue 30): images of an older release
# ("old") and of this working tree ("new"), then the Rust test tests/tests/rolling_upgrade.rs
# (tessera_tests::upgrade): the farm of docker/compose.yaml on old everything, a steady load
# of two-output jobs, the dispatcher replaced by the new one while old workers run, the old
# dispatcher back while the workers are replaced one at a time (SIGTERM drains), the new
# dispatcher again; every job must end done, once, with frame-exact outputs. It prints the
# figures per phase.
#
#   scripts/rolling-upgrade.sh                       # old = TESSERA_UPGRADE_FROM, debug binaries
#   TESSERA_UPGRADE_FROM=<commit> scripts/rolling-upgrade.sh
#   TESSERA_DOCKER_PROFILE=release scripts/rolling-upgrade.sh   # release binaries (slower build)
#   TESSERA_UPGRADE_SKIP_BUILD=1 ...                 # reuse tessera/*:upgrade-{old,new}
#   TESSERA_UPGRADE_SKIP_BUILD=1 TESSERA_UPGRADE_NEW_TAG=TAG ...   # other images as "new"
#                                                    # (TESSERA_UPGRADE_OLD_TAG likewise)
#   TESSERA_UPGRADE_JOBS=4 TESSERA_UPGRADE_IN_FLIGHT=2 TESSERA_UPGRADE_LONG_S=60 \
#     TESSERA_UPGRADE_PHASE_S=15 scripts/rolling-upgrade.sh     # the CI sample
#
# Why a script: the old release's binaries are built in a git worktree of their own
# (/tmp/tessera-upgrade/old-src, removed at the end) with their own target directory
# (/tmp/tessera-upgrade/old-target-<commit>, kept as a cache), and both sets of images are made the
# way scripts/docker-images.sh makes them without a registry (host binaries in place of the
# Dockerfile's builder stage; each release's own Dockerfile while this tree's still has that
# stage, else the old one's Debian runtime for both), tagged tessera/{dispatcher,
# worker,cli}:upgrade-old and :upgrade-new, so nothing here touches the :latest images other
# farms use. The test runs its own compose project (tessera-upgrade<pid>) on free ports and
# takes it down with its volumes. Builds run under nice.
#
# The default old release, fa99896, is the last commit of issue 28: issues 29 and 30 were
# worked on after it, side by side, and changed the wire (stitch heartbeats, plan-checked
# keys), the job database (five new tables) and the workers' drain, so it is the release a
# farm running today's code was upgraded from.
#
# Exit 0 when every check passed; 2 when there is no Docker engine (it says so).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
started=$(date +%s)
say() { printf '[rolling-upgrade %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
# `docker build -q ARGS` (the classic builder, under nice) showing its output only when it fails.
dbuild() {
  local out
  out=$(DOCKER_BUILDKIT=0 nice docker build -q "$@" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
}

if ! docker info >/dev/null 2>&1; then
  echo "rolling-upgrade: no Docker engine answers here; the upgrade test did NOT run" >&2
  exit 2
fi
from=${TESSERA_UPGRADE_FROM:-fa99896}
profile=${TESSERA_DOCKER_PROFILE:-debug}
case $profile in
  release) cargo_profile=(--release) ;;
  debug) cargo_profile=() ;;
  *) echo "rolling-upgrade: TESSERA_DOCKER_PROFILE is release or debug, not '$profile'" >&2; exit 2 ;;
esac
work=${TESSERA_UPGRADE_DIR:-/tmp/tessera-upgrade}
old_src=$work/old-src
ctx=""
cleanup() {
  [[ -n $ctx ]] && rm -rf "$ctx"
  if [[ -d $old_src ]]; then git worktree remove --force "$old_src" 2>/dev/null || true; fi
  git worktree prune
}
trap cleanup EXIT

# mmdebstrap_tree, tessera_debian_base, tessera_rabbitmq (scripts/local-images.sh: the bases
# and the broker's stand-in, made as scripts/docker-images.sh makes them).
# shellcheck source=scripts/local-images.sh
. scripts/local-images.sh

# The Debian 12 base the images start from: debian:bookworm-slim when it is here or can be
# pulled, else tessera-local/debian:bookworm-slim, made from Debian's archive (mmdebstrap,
# then docker import) when absent.
ensure_base() {
  base=''
  tessera_debian_base bookworm base
}

# The broker and store images docker/compose.yaml names, built from docker/local/ when absent
# (no registry answers here; users pull the official ones): the broker's stand-in
# tessera-local/rabbitmq:4.0 on its own Debian 13 base, the store's on $base.
ensure_services() {
  local rabbitmq_image=''
  tessera_rabbitmq rabbitmq_image
  say "broker: $rabbitmq_image"
  if ! docker image inspect dxflrs/garage:v2.5.0 >/dev/null 2>&1 \
     && ! docker image inspect tessera-local/garage:v2.5.0 >/dev/null 2>&1; then
    say "dxflrs/garage:v2.5.0: building the stand-in tessera-local/garage:v2.5.0 from the host's garage"
    command -v garage >/dev/null \
      || { echo "rolling-upgrade: no garage binary to build the stand-in from (scripts/setup-deps.sh --services)" >&2; exit 1; }
    ctx=$(mktemp -d)
    sed "s|^FROM debian:bookworm-slim|FROM $base|" docker/local/garage.Dockerfile >"$ctx/Dockerfile"
    install -s -m 0755 "$(command -v garage)" "$ctx/garage"
    dbuild --build-arg BASE_IMAGE="$base" -t tessera-local/garage:v2.5.0 "$ctx"
    rm -rf "$ctx"
    ctx=""
  fi
  # Stand-ins under tessera-local/ names, never the public ones: compose is pointed at them.
  . scripts/compose-images.sh && tessera_service_images
}

# Images tessera/{dispatcher,worker,cli}:TAG from DOCKERFILE with the
# binaries of BINDIR in place of its builder stage (the markers `# >>> builder` and
# `# <<< builder`), on $base.
build_images() {
  local tag=$1 dockerfile=$2 bindir=$3 version=$4
  ctx=$(mktemp -d)
  install -d "$ctx/prebuilt"
  install -s -m 0755 "$bindir/tessera" "$bindir/tessera-media" "$bindir/tessera-worker" \
    "$bindir/tessera-dispatcher" "$ctx/prebuilt/"
  awk -v base="$base" '/^# >>> builder/ { print "FROM " base " AS builder"; print "COPY prebuilt/ /out/"; skip = 1; next }
       /^# <<< builder/ { skip = 0; next }
       /^FROM debian:bookworm-slim/ { sub(/debian:bookworm-slim/, base) }
       !skip' "$dockerfile" >"$ctx/Dockerfile"
  for t in dispatcher worker cli; do
    say "tessera/$t:$tag ($version)"
    dbuild -f "$ctx/Dockerfile" --target "$t" --build-arg VERSION="$version" \
      -t "tessera/$t:$tag" "$ctx"
  done
  rm -rf "$ctx"
  ctx=""
}

if [[ ${TESSERA_UPGRADE_SKIP_BUILD:-0} != 1 ]]; then
  old_rev=$(git rev-parse --verify "$from^{commit}")
  # One target per old commit: its sources are dated at their commit (below), so a cache
  # shared by two commits could pass for current.
  old_target=$work/old-target-${old_rev:0:12}
  ensure_base
  ensure_services
  say "old: $from (${old_rev:0:12}) in a worktree at $old_src, target $old_target ($profile)"
  if [[ -d $old_src && $(git -C "$old_src" rev-parse HEAD 2>/dev/null) != "$old_rev" ]]; then
    git worktree remove --force "$old_src"
  fi
  git worktree prune
  mkdir -p "$work"
  [[ -d $old_src ]] || git worktree add -q --detach "$old_src" "$old_rev"
  # Every file dated at its commit: a fresh worktree then leaves the cached target's build
  # of the same sources current (cargo compares modification times).
  (cd "$old_src" && git ls-files -z | xargs -0 touch -h -d "@$(git log -1 --format=%ct HEAD)")
  (cd "$old_src" && CARGO_TARGET_DIR=$old_target nice cargo build -q --locked "${cargo_profile[@]}" \
    -p tessera-cli -p tessera-worker -p tessera-dispatcher)
  old_dockerfile=$work/Dockerfile.old
  cp "$old_src/docker/Dockerfile" "$old_dockerfile"
  build_images upgrade-old "$old_dockerfile" "$old_target/$profile" "${old_rev:0:12}"
  git worktree remove --force "$old_src"
  git worktree prune

  say "new: this tree's binaries ($profile)"
  if [[ $profile == release ]]; then
    nice cargo build -q --locked --release -p tessera-cli -p tessera-worker -p tessera-dispatcher
  else
    # The workspace's feature set, as scripts/test.sh builds it: nothing is compiled again.
    nice cargo build -q --locked --workspace --bins
  fi
  # This tree's Dockerfile when it still has a builder stage to replace; else the old
  # release's Debian runtime (the binaries are what an upgrade changes).
  new_dockerfile=docker/Dockerfile
  if ! grep -q '^# >>> builder' "$new_dockerfile"; then
    say "docker/Dockerfile has no builder markers: the new binaries go on the old release's runtime"
    new_dockerfile=$old_dockerfile
  fi
  build_images upgrade-new "$new_dockerfile" "target/$profile" "$(git describe --always --dirty)"
fi

# The broker's and the store's stand-ins (tessera-local/...) where the official images are
# absent, also when the images were built by an earlier run.
. scripts/compose-images.sh && tessera_service_images
say "the rolling upgrade (cargo test -p tessera-tests --test rolling_upgrade)"
status=0
nice cargo test -q --locked -p tessera-tests --test rolling_upgrade -- --ignored --nocapture \
  --test-threads=1 || status=$?
say "wall time $(($(date +%s) - started)) s, exit $status"
exit "$status"
