#!/usr/bin/env bash
# The long chaos run (issue 9), in four parts, each printing its figures:
#   1. the fuzz targets (proptest: wire decoding, S3 events, job specs, planning), each for
#      TESSERA_FUZZ_CASES cases (default 20000);
#   2. schemathesis against /openapi.json (scripts/api-fuzz.sh, TESSERA_API_FUZZ_SECONDS,
#      default 120; installs schemathesis from PyPI once);
#   3. poison on every queue with each seed, the network partition, the full disks;
#   4. per seed: 30 jobs of two outputs, and 3 more before each fault, through three
#      workers while a seeded schedule of 23 faults hits the farm, each of the 23 kinds
#      of tests/src/chaos/faults.rs at least once: workers SIGKILLed, drained and
#      SIGSTOPped; RabbitMQ restarted, also while the dispatcher restarts; Garage stopped
#      for 20 s; S3 503 SlowDown, 429 and +500 ms latency; a rollback whose deletes answer
#      503; the dispatcher SIGKILLed, also with a delivery copy in flight and in the
#      middle of an HLS package's copies (that job's package checked file by file), and
#      that again with the resumed dispatcher killed 0-15 s later while the broker is down;
#      dispatcher-store and dispatcher-broker partitions one way and both; a worker cut
#      off from the store; every message published twice for a while; the dispatcher's
#      clock jumping 2 h (libfaketime: apt-get install faketime). Each run ends with the
#      checks of tests/src/chaos.rs: hung = lost = duplicated = corrupt = partial = 0,
#      every decoded frame equal to the same job run without faults, queues drained, work
#      area empty.
#
#   scripts/chaos.sh [SEED...]        default seeds: 11 23 37
# Needs what the tests need (scripts/setup-deps.sh --services), root (partition, tmpfs), and
# the debug binaries. TESSERA_CHAOS_PARTS=1234 selects parts.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(11 23 37)
parts="${TESSERA_CHAOS_PARTS:-1234}"
cargo build --workspace --bins --tests
status=0

if [[ $parts == *1* ]]; then
  cases="${TESSERA_FUZZ_CASES:-20000}"
  echo "=== fuzz targets, $cases cases each"
  if PROPTEST_CASES="$cases" timeout 1800 cargo test --workspace --lib fuzz_ >/tmp/tessera-fuzz.log 2>&1; then :; else status=1; fi
  grep -E "^test .*fuzz_.* \.\.\. " /tmp/tessera-fuzz.log | while read -r _ name _ result; do
    echo "fuzz: ${name##*::}: $cases cases, $result"
  done || true
  grep -qE "FAILED|panicked" /tmp/tessera-fuzz.log && status=1
fi

if [[ $parts == *2* ]]; then
  echo "=== schemathesis"
  if bash scripts/api-fuzz.sh "${TESSERA_API_FUZZ_SECONDS:-120}" >/tmp/tessera-api-fuzz.log 2>&1; then :; else status=1; fi
  grep -E "generated|failures in|test result" /tmp/tessera-api-fuzz.log | sed 's/^/schemathesis: /' || true
fi

if [[ $parts == *3* ]]; then
  for seed in "${seeds[@]}"; do
    echo "=== poison seed $seed"
    if TESSERA_POISON_SEED="$seed" cargo test --workspace --test farm_poison >"/tmp/tessera-poison-$seed.log" 2>&1; then
      echo "poison seed $seed: passed"
    else
      echo "poison seed $seed: FAILED (/tmp/tessera-poison-$seed.log)"; status=1
    fi
  done
  echo "=== partition and full disks"
  if cargo test --workspace --test farm_partition --test farm_disk_full -- --nocapture >/tmp/tessera-partition.log 2>&1; then :; else status=1; fi
  grep -E "^partition:|^test .* \.\.\. |test result" /tmp/tessera-partition.log || true
fi

if [[ $parts == *4* ]]; then
  for seed in "${seeds[@]}"; do
    echo "=== chaos seed $seed"
    if TESSERA_CHAOS_JOBS=${TESSERA_CHAOS_JOBS:-30} TESSERA_CHAOS_WORKERS=${TESSERA_CHAOS_WORKERS:-3} \
       TESSERA_CHAOS_FAULTS=${TESSERA_CHAOS_FAULTS:-23} TESSERA_CHAOS_STORE_OUTAGE=${TESSERA_CHAOS_STORE_OUTAGE:-20} TESSERA_CHAOS_GAP=${TESSERA_CHAOS_GAP:-5} \
       TESSERA_CHAOS_BROKER_RESTART=${TESSERA_CHAOS_BROKER_RESTART:-1} TESSERA_CHAOS_JOBS_PER_FAULT=${TESSERA_CHAOS_JOBS_PER_FAULT:-3} \
       TESSERA_CHAOS_SEED="$seed" \
       cargo test --workspace --test chaos -- --nocapture 2>&1 | tee "/tmp/tessera-chaos-$seed.log" \
       | grep -E "^chaos|^done |^fault|^failed|^corrupt|^left|^recovery|test result|panicked"; then :; else status=1; fi
    grep -q "test result: ok" "/tmp/tessera-chaos-$seed.log" || status=1
  done
fi
exit $status
