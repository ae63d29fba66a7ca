#!/usr/bin/env bash
# A RabbitMQ 4.x test broker in a container, for the tests that run against a broker of
# their own (they read TESSERA_TEST_RABBIT_ADDR and TESSERA_TEST_RABBITMQCTL):
#
#   scripts/rabbit4.sh start   make the images if missing, (re)create and start the container,
#                              wait until the broker is up, print the env lines
#   scripts/rabbit4.sh env     the env lines of the running container
#   scripts/rabbit4.sh stop    remove the container (its data goes with it)
#
#   eval "$(scripts/rabbit4.sh start)" && cargo test ...
#
# stdout holds nothing but these lines (everything else goes to stderr):
#   export TESSERA_TEST_RABBIT_ADDR='127.0.0.1:5673'
#   export TESSERA_TEST_RABBITMQCTL='docker exec tessera-rabbit4 rabbitmqctl'
#
# The broker is the one docker/compose.yaml runs: the official rabbitmq:4.3 when it is here or
# can be pulled, else the stand-in tessera-local/rabbitmq:4.0, Debian 13's rabbitmq-server
# 4.0.5 (Erlang 27) with the deprecated features 4.3 denies by default denied: a transient
# non-exclusive queue is refused as on 4.3; basic.qos with global=true is not refused, only
# its flag ignored (docker/local/rabbitmq-entrypoint.sh). The stand-in is made from Debian's
# archive when absent (scripts/local-images.sh: mmdebstrap, docker import,
# docker/local/rabbitmq.Dockerfile; 1 to 2 minutes on a machine with no images, then about
# 10 s to start). User guest/guest, allowed from the host; AMQP published on 127.0.0.1 only;
# data on a tmpfs (a test broker: nothing survives `stop` or a re-created container).
#
# Environment:
#   TESSERA_RABBIT4_NAME     the container's name (tessera-rabbit4)
#   TESSERA_RABBIT4_PORT     host port for AMQP (5673; 5672 stays free for a broker on the host)
#   TESSERA_RABBIT4_IMAGE    run this image instead (it must honour RABBITMQ_DEFAULT_USER/PASS)
#   TESSERA_RABBIT4_TIMEOUT  seconds `start` waits for the broker (120)
#
# Idempotent: `start` with the container running on that port and answering only prints the
# env lines; otherwise it re-creates the container (`stop` first to pick up a rebuilt image).
# Exit 0 when the broker answers, 1 when not (with the container's log on stderr), 2 when no
# Docker engine answers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
say() { printf '[rabbit4] %s\n' "$*" >&2; }
die() { printf 'rabbit4: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; }

name=${TESSERA_RABBIT4_NAME:-tessera-rabbit4}
port=${TESSERA_RABBIT4_PORT:-5673}
timeout_s=${TESSERA_RABBIT4_TIMEOUT:-120}
[[ $name =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || die "TESSERA_RABBIT4_NAME '$name' is not a container name"
[[ $port =~ ^[0-9]+$ ]] || die "TESSERA_RABBIT4_PORT '$port' is not a port"
[[ $timeout_s =~ ^[0-9]+$ ]] || die "TESSERA_RABBIT4_TIMEOUT '$timeout_s' is not a number of seconds"

# env_lines: the lines the tests read, for the running container (its published port).
env_lines() {
  local addr
  addr=$(docker port "$name" 5672/tcp 2>/dev/null | head -n 1) || true
  [[ -n $addr ]] || die "container $name publishes no AMQP port: scripts/rabbit4.sh start"
  printf "export TESSERA_TEST_RABBIT_ADDR='%s'\n" "$addr"
  printf "export TESSERA_TEST_RABBITMQCTL='docker exec %s rabbitmqctl'\n" "$name"
}
running() { [[ $(docker inspect -f '{{.State.Running}}' "$name" 2>/dev/null) == true ]]; }
# amqp_answers: the broker answers the AMQP 0-9-1 header on the host's port with a method
# frame (type 1, connection.start). A bare TCP connect would not do: docker-proxy accepts
# connections before anything listens in the container.
amqp_answers() {
  local first
  first=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "AMQP\x00\x00\x09\x01" >&3 && head -c 1 <&3' \
    _ "$port" 2>/dev/null | od -An -tx1 | tr -d ' \n') || true
  [[ $first == 01 ]]
}
# ready: the node has booted (rabbitmqctl await_startup) and AMQP answers on the port.
ready() {
  docker exec "$name" rabbitmqctl -q await_startup --timeout 5 >/dev/null 2>&1 && amqp_answers
}
logs_and_die() {
  say "the container's log (last 60 lines):"
  docker logs --tail 60 "$name" >&2 2>&1 || true
  die "$*"
}

start() {
  if running && [[ $(docker port "$name" 5672/tcp 2>/dev/null | head -n 1) == "127.0.0.1:$port" ]] && ready; then
    say "$name is up already"
    env_lines
    return
  fi
  local image t0 uid gid deadline
  t0=$(date +%s)
  if [[ -n ${TESSERA_RABBIT4_IMAGE:-} ]]; then
    image=$TESSERA_RABBIT4_IMAGE
  else
    # shellcheck source=scripts/local-images.sh
    . scripts/local-images.sh
    tessera_rabbitmq image >&2 || die "no broker image (see above)"
  fi
  docker image inspect "$image" >/dev/null 2>&1 || die "no image $image"
  say "image $image ($(($(date +%s) - t0)) s to make or find)"
  # The data folder is a tmpfs owned by the image's rabbitmq user (its uid is whatever Debian's
  # package gave it: 999 in the official image).
  read -r uid gid < <(docker run --rm --entrypoint sh "$image" -c 'echo "$(id -u rabbitmq) $(id -g rabbitmq)"') \
    || die "$image has no rabbitmq user"
  docker rm -f -v "$name" >/dev/null 2>&1 || true
  t0=$(date +%s)
  docker run -d --name "$name" --hostname rabbit4 \
    -p "127.0.0.1:$port:5672" \
    -e RABBITMQ_DEFAULT_USER=guest -e RABBITMQ_DEFAULT_PASS=guest \
    --tmpfs "/var/lib/rabbitmq:rw,uid=$uid,gid=$gid,mode=0750" \
    --label io.tessera.test-broker=rabbit4 \
    "$image" >/dev/null || {
    docker rm -f -v "$name" >/dev/null 2>&1 || true
    die "docker run $image failed (port 127.0.0.1:$port taken? TESSERA_RABBIT4_PORT)"
  }
  deadline=$((t0 + timeout_s))
  until ready; do
    running || logs_and_die "$name stopped before the broker was up"
    (($(date +%s) < deadline)) || logs_and_die "$name: no broker after ${timeout_s} s (TESSERA_RABBIT4_TIMEOUT)"
    sleep 1
  done
  say "$name: $(docker exec "$name" rabbitmq-diagnostics -q server_version 2>/dev/null || echo '?') up on 127.0.0.1:$port, $(($(date +%s) - t0)) s from docker run"
  env_lines
}

case ${1:-} in
  -h|--help) usage; exit 0 ;;
  start|stop|env) ;;
  *) usage >&2; die "usage: scripts/rabbit4.sh start|stop|env" ;;
esac
command -v docker >/dev/null || { echo "rabbit4: no docker CLI" >&2; exit 2; }
docker info >/dev/null 2>&1 || { echo "rabbit4: no Docker engine answers" >&2; exit 2; }
case $1 in
  start) start ;;
  env)
    running || die "container $name is not running: scripts/rabbit4.sh start"
    env_lines ;;
  stop)
    if docker inspect "$name" >/dev/null 2>&1; then
      docker rm -f -v "$name" >/dev/null
      say "$name removed"
    else
      say "no container $name"
    fi ;;
esac
