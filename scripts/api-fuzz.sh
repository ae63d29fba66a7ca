#!/usr/bin/env bash
# schemathesis against the real dispatcher's /openapi.json (issue 9): installs schemathesis
# from PyPI into target/schemathesis-venv once, then runs the ignored test
# `api_hostile::schemathesis_finds_no_server_error_and_no_schema_violation` (a farm on the
# real services, a valid token, no 5xx and every response matching the schema).
#
#   scripts/api-fuzz.sh [SECONDS]     time budget of the run, default 120
# Needs what the tests need (scripts/setup-deps.sh --services) and python3 with venv.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/schemathesis-venv
if [ ! -x "$venv/bin/st" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet schemathesis
fi
cargo build --workspace --bins
TESSERA_SCHEMATHESIS="$PWD/$venv/bin/st" TESSERA_SCHEMATHESIS_SECONDS="${1:-120}" \
  cargo test --workspace --test api_hostile -- --ignored --nocapture schemathesis
