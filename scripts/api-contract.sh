#!/usr/bin/env bash
# The API contract with every schemathesis check (issue 29, item 7): a generated request the
# schema allows is accepted, one it refuses is refused, responses match the document, and
# the stateful phase follows the links from a created job to GET and DELETE /v1/jobs/{id}.
# Every check but use_after_free: DELETE /v1/jobs/{id} cancels a job, which stays readable.
# Starts a farm (Garage, a RabbitMQ vhost, the dispatcher, no workers) through the test
# harness's ignored test `api_contract::schemathesis::all_checks_pass`, which runs `st`.
#
#   scripts/api-contract.sh [SECONDS]    time budget of the run, default 300 (the coverage
#                                        phase takes 2-3 minutes on two cores; the run fails
#                                        when no time was left to follow the links)
# Needs what the tests need (scripts/setup-deps.sh --services) and python3 with venv;
# installs schemathesis from PyPI into target/schemathesis-venv once (as api-fuzz.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/schemathesis-venv
if [ ! -x "$venv/bin/st" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet schemathesis
fi
cargo build --workspace --bins
TESSERA_SCHEMATHESIS="$PWD/$venv/bin/st" TESSERA_SCHEMATHESIS_SECONDS="${1:-300}" \
  cargo test -p tessera-tests --test api_contract -- --ignored --nocapture all_checks_pass
