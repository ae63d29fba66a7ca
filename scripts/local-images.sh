# Sourced (not run) by the scripts that make images on a machine that reaches no image
# registry (scripts/docker-images.sh, scripts/rabbit4.sh, scripts/rolling-upgrade.sh): the
# Debian bases made from Debian's archive and the broker's stand-in, made one way for all.
#
#   . scripts/local-images.sh
#   mmdebstrap_tree SUITE DIR [PACKAGES]  a Debian minbase root of SUITE (bookworm, trixie) in
#                                         DIR, documentation left out (copyright files kept)
#   tessera_debian_base SUITE VAR         VAR := debian:SUITE-slim when it is here or can be
#                                         pulled, else tessera-local/debian:SUITE-slim, made
#                                         (mmdebstrap, docker import) when absent
#   tessera_rabbitmq VAR                  VAR := the broker docker/compose.yaml runs: the
#                                         official $tessera_rabbitmq_official when it is here
#                                         or can be pulled, else the stand-in
#                                         $tessera_rabbitmq_stand_in (Debian 13's
#                                         rabbitmq-server 4.0 from docker/local/rabbitmq.Dockerfile
#                                         on the trixie base), built when absent or made from
#                                         other docker/local/rabbitmq* files than these
#
# The pair official/stand-in comes from scripts/compose-images.sh (sourced here). Stand-ins
# and bases made here take tessera-local/ names, never the public ones. Results go into the
# caller's variable, not stdout (a failure inside $(...) would not stop a `set -e` caller);
# messages go to stderr (scripts/rabbit4.sh keeps its stdout for the env lines). Needs bash.
# shellcheck shell=bash
tessera_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/compose-images.sh
. "$tessera_repo/scripts/compose-images.sh"

tessera_say() { printf '==> %s\n' "$*" >&2; }
# tessera_have IMAGE: whether IMAGE is here or can be pulled (30 s at most: offline, a pull may
# hang on DNS; where DNS answers "no such host" it fails at once).
tessera_have() {
  docker image inspect "$1" >/dev/null 2>&1 || timeout 30 docker pull -q "$1" >/dev/null 2>&1
}
# tessera_docker_build ARGS...: the classic builder, quiet; its output only when it fails.
tessera_docker_build() {
  local out
  out=$(DOCKER_BUILDKIT=0 docker build -q "$@" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
}

# mmdebstrap_tree SUITE DIR [PACKAGES]: a minbase root of Debian SUITE in DIR (main, the
# suite's updates and its security archive), documentation left out (the copyright files
# kept), no apt lists.
mmdebstrap_tree() {
  local suite=$1 dir=$2
  command -v mmdebstrap >/dev/null || apt-get install -y -q mmdebstrap >/dev/null
  nice mmdebstrap --variant=minbase --quiet ${3:+--include="$3"} \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    "$suite" "$dir" \
    "deb http://deb.debian.org/debian $suite main" \
    "deb http://deb.debian.org/debian $suite-updates main" \
    "deb http://deb.debian.org/debian-security $suite-security main"
}

# tessera_debian_base SUITE VAR: VAR := the slim Debian SUITE image to build on.
tessera_debian_base() {
  local _suite=$1 _image=tessera-local/debian:$1-slim _dir _t0=$SECONDS
  if tessera_have "debian:$_suite-slim"; then
    printf -v "$2" %s "debian:$_suite-slim"
    return
  fi
  if ! docker image inspect "$_image" >/dev/null 2>&1; then
    tessera_say "$_image: debian:$_suite-slim cannot be pulled; making it from Debian's archive (mmdebstrap)"
    _dir=$(mktemp -d)
    if ! mmdebstrap_tree "$_suite" "$_dir/root" \
       || ! tar -C "$_dir/root" -c . | docker import --change 'CMD ["bash"]' - "$_image" >/dev/null; then
      rm -rf "$_dir"
      tessera_say "$_image: mmdebstrap or docker import failed"
      return 1
    fi
    rm -rf "$_dir"
    tessera_say "$_image made in $((SECONDS - _t0)) s"
  fi
  printf -v "$2" %s "$_image"
}

# tessera_rabbitmq VAR: VAR := the broker image (official, else the stand-in; see above).
tessera_rabbitmq() {
  local _base _source _built _t0
  if tessera_have "$tessera_rabbitmq_official"; then
    printf -v "$1" %s "$tessera_rabbitmq_official"
    return
  fi
  # The stand-in is labelled with the digest of the files it is built from, so a stand-in
  # made before a change to them is made again.
  _source=$(cat "$tessera_repo"/docker/local/rabbitmq.Dockerfile \
    "$tessera_repo"/docker/local/rabbitmq-entrypoint.sh | sha256sum | cut -c1-16)
  _built=$(docker image inspect -f '{{index .Config.Labels "io.tessera.stand-in.source"}}' \
    "$tessera_rabbitmq_stand_in" 2>/dev/null || true)
  if [[ $_built != "$_source" ]]; then
    tessera_debian_base trixie _base || return 1
    _t0=$SECONDS
    tessera_say "$tessera_rabbitmq_official cannot be pulled; building the stand-in $tessera_rabbitmq_stand_in on $_base (Debian's rabbitmq-server, docker/local/rabbitmq.Dockerfile)"
    tessera_docker_build --build-arg BASE_IMAGE="$_base" --label "io.tessera.stand-in.source=$_source" \
      -f "$tessera_repo/docker/local/rabbitmq.Dockerfile" -t "$tessera_rabbitmq_stand_in" "$tessera_repo/docker/local" \
      || return 1
    tessera_say "$tessera_rabbitmq_stand_in built in $((SECONDS - _t0)) s"
  fi
  printf -v "$1" %s "$tessera_rabbitmq_stand_in"
}
