#!/usr/bin/env bash
# The broker suite on each RabbitMQ version tessera supports (issue 45): the tests whose
# outcome depends on the broker (the queue layer, declarations, retries and dead letters,
# lost tasks, drains and spot give-backs, kills, outages and broker restarts, the consumer
# timeout, the churn run, the chaos sample) against Debian 12's RabbitMQ 3.10 at
# 127.0.0.1:5672 and against RabbitMQ 4.0.5 (Debian 13) with RabbitMQ 4.3's defaults for
# deprecated features, in the container of scripts/rabbit4.sh (made from Debian's archive
# where no registry answers). docs/deploy.md ("RabbitMQ") says what is supported;
# docs/reliability.md keeps the last run's summary.
#
#   scripts/broker-suite.sh            both versions, the whole suite (about 25 min on 2 cores)
#   scripts/broker-suite.sh --sample   CI's sample: the queue layer, declarations and retries
#                                      on 4.x only (3.10 runs them in the main test run)
#   scripts/broker-suite.sh --only 3.10|4
#
# Needs: the services of scripts/setup-deps.sh --services, a Docker engine for 4.x,
# `cargo build --workspace --bins` done (the farm tests start the binaries). The churn run
# takes the issue's two minutes here (TESSERA_CHURN_SECONDS, default 120; CI's main run: 45).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'broker-suite: %s\n' "$*" >&2; exit 2; }

suite='binary(rabbit_queue) | binary(rabbit_declare) | binary(farm_retries)'
suite+=' | binary(farm_churn) | binary(farm_lost_tasks) | binary(farm_spot) | binary(farm_faults)'
suite+=' | binary(farm_outage) | binary(farm_poison) | binary(farm_long_stitch) | binary(chaos)'
sample='binary(rabbit_queue) | binary(rabbit_declare) | binary(farm_retries)'
versions=(3.10 4)
filter=$suite
while [[ $# -gt 0 ]]; do
  case $1 in
    --sample) filter=$sample; versions=(4); shift ;;
    --only) case ${2:-} in 3.10|4) versions=("$2") ;; *) die "--only 3.10 or 4" ;; esac; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (--sample, --only 3.10|4)" ;;
  esac
done
export TESSERA_CHURN_SECONDS=${TESSERA_CHURN_SECONDS:-$([[ $filter == "$suite" ]] && echo 120 || echo 45)}

declare -A result
run_on() {
  local version=$1 log rc=0
  log=$(mktemp --suffix=.broker-suite.log)
  say "RabbitMQ $version: cargo nextest run -E '$filter' (log: $log)"
  # --workspace, as the main run builds: -p would unify features differently and rebuild.
  cargo nextest run --no-fail-fast --workspace -E "package(tessera-tests) & ($filter)" 2>&1 | tee "$log" >&2 || rc=$?
  result[$version]="$(grep -E '^ +Summary ' "$log" | tail -1 | sed 's/^ *//') (exit $rc)"
  grep -E '^ +(FAIL|TIMEOUT) ' "$log" | sort -u >&2 || true
  return "$rc"
}

status=0
for version in "${versions[@]}"; do
  if [[ $version == 3.10 ]]; then
    # The local broker (3.10 runs first: nothing points the tests elsewhere yet).
    unset TESSERA_TEST_RABBIT_ADDR TESSERA_TEST_RABBITMQCTL
    run_on 3.10 || status=1
  else
    if ! docker info >/dev/null 2>&1; then
      die "RabbitMQ 4.x runs in a container: no Docker engine answers"
    fi
    # A container this run starts is removed at the end; one that ran before is left running.
    name=${TESSERA_RABBIT4_NAME:-tessera-rabbit4}
    if [[ $(docker inspect -f '{{.State.Running}}' "$name" 2>/dev/null) != true ]]; then
      trap 'bash scripts/rabbit4.sh stop >&2 || true' EXIT
    fi
    eval "$(bash scripts/rabbit4.sh start)"
    server=$($TESSERA_TEST_RABBITMQCTL version 2>/dev/null || echo 4.x)
    run_on "4 ($server)" || status=1
  fi
done
# The summaries, for docs/reliability.md.
printf '\nbroker suite (%s), churn %s s:\n' "$(git describe --always --dirty 2>/dev/null)" "$TESSERA_CHURN_SECONDS"
for key in "${!result[@]}"; do printf '  RabbitMQ %s: %s\n' "$key" "${result[$key]}"; done
exit "$status"
