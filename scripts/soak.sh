#!/usr/bin/env bash
# The soak (issue 9): 200 short jobs (or $1) through two workers on the real services while a
# worker is SIGKILLed every 5-10 s. Prints jobs per hour, the dispatcher's RSS after the
# first job / peak / end, its open descriptors, the workers' peak RSS, and the SQLite size.
#
#   scripts/soak.sh [JOBS]
# Needs what the tests need (scripts/setup-deps.sh --services) and the debug binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --workspace --bins --tests
TESSERA_SOAK_JOBS="${1:-200}" cargo test --workspace --test soak -- --ignored --nocapture 2>&1 \
  | tee /tmp/tessera-soak.log | grep -E "^soak|test result|panicked"
grep -q "test result: ok" /tmp/tessera-soak.log
