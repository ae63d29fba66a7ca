#!/usr/bin/env bash
# The long chaos run (issue 9): 30 jobs of two outputs through three workers while a seeded
# schedule of faults hits the farm (workers SIGKILLed and drained, RabbitMQ restarted, Garage
# stopped for 20 s, the dispatcher SIGKILLed), once per seed. Each run ends with the checks
# of tests/src/chaos.rs (hung = lost = corrupt = partial = 0, queues drained, work area empty)
# and prints its figures.
#
#   scripts/chaos.sh [SEED...]        default seeds: 11 23 37
# Needs what the tests need (scripts/setup-deps.sh --services) and the debug binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(11 23 37)
cargo build --workspace --bins --tests
status=0
for seed in "${seeds[@]}"; do
  echo "=== chaos seed $seed"
  if TESSERA_CHAOS_JOBS=${TESSERA_CHAOS_JOBS:-30} TESSERA_CHAOS_WORKERS=${TESSERA_CHAOS_WORKERS:-3} \
     TESSERA_CHAOS_FAULTS=${TESSERA_CHAOS_FAULTS:-12} TESSERA_CHAOS_STORE_OUTAGE=${TESSERA_CHAOS_STORE_OUTAGE:-20} TESSERA_CHAOS_GAP=${TESSERA_CHAOS_GAP:-5} \
     TESSERA_CHAOS_BROKER_RESTART=${TESSERA_CHAOS_BROKER_RESTART:-1} \
     TESSERA_CHAOS_SEED="$seed" \
     cargo test --workspace --test chaos -- --nocapture 2>&1 | tee "/tmp/tessera-chaos-$seed.log" \
     | grep -E "^chaos|^done |^recovery|test result|panicked"; then :; else status=1; fi
  grep -q "test result: ok" "/tmp/tessera-chaos-$seed.log" || status=1
done
exit $status
