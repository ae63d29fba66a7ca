#!/bin/sh
# Writes the compose farm's secrets, random, into docker/secrets/*.env (mode 600), once: files
# that exist are kept, so running it again changes nothing. compose.yaml reads them with
# env_file; they are never committed (.gitignore).
#
# Each service gets only the files it needs:
#   rabbitmq.env      the broker's user and password (RABBITMQ_DEFAULT_USER/PASS)   rabbitmq
#   garage-rpc.env    Garage's RPC secret                                          garage
#   garage-admin.env  Garage's admin API token                              garage, garage-init
#   amqp.env          the broker URL with that password                 dispatcher, workers
#   s3.env            the farm's S3 key                   dispatcher, workers, garage-init
#   dispatcher.env    the API tokens and the webhook signing key              dispatcher
#   client.env        TESSERA_TOKEN for `tessera submit` on this host         (the host)
set -eu
dir=$(cd "$(dirname "$0")" && pwd)/secrets
umask 077
mkdir -p "$dir"
hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

if [ ! -f "$dir/rabbitmq.env" ]; then
  printf 'RABBITMQ_DEFAULT_USER=tessera\nRABBITMQ_DEFAULT_PASS=%s\n' "$(hex 16)" >"$dir/rabbitmq.env"
fi
amqp_pass=$(sed -n 's/^RABBITMQ_DEFAULT_PASS=//p' "$dir/rabbitmq.env")
if [ ! -f "$dir/garage-rpc.env" ]; then
  # Garage reads GARAGE_RPC_SECRET and GARAGE_ADMIN_TOKEN in place of rpc_secret and
  # admin_token in garage.toml.
  printf 'GARAGE_RPC_SECRET=%s\n' "$(hex 32)" >"$dir/garage-rpc.env"
fi
if [ ! -f "$dir/garage-admin.env" ]; then
  printf 'GARAGE_ADMIN_TOKEN=%s\n' "$(hex 24)" >"$dir/garage-admin.env"
fi
if [ ! -f "$dir/amqp.env" ]; then
  printf 'TESSERA_AMQP_URL=amqp://tessera:%s@rabbitmq:5672/%%2f\n' "$amqp_pass" >"$dir/amqp.env"
fi
if [ ! -f "$dir/s3.env" ]; then
  # Garage key ids are GK followed by 24 hex digits; secrets are 64 hex digits.
  printf 'TESSERA_S3_ACCESS_KEY_ID=GK%s\nTESSERA_S3_SECRET_ACCESS_KEY=%s\n' "$(hex 12)" "$(hex 32)" \
    >"$dir/s3.env"
fi
if [ ! -f "$dir/client.env" ]; then
  printf 'TESSERA_TOKEN=%s\n' "$(hex 24)" >"$dir/client.env"
fi
if [ ! -f "$dir/dispatcher.env" ]; then
  # A bare token is the admin of tenant "default"; see docs/operations.md for tenants.
  printf 'TESSERA_API_TOKENS=%s\nTESSERA_WEBHOOK_SECRET=%s\n' \
    "$(sed -n 's/^TESSERA_TOKEN=//p' "$dir/client.env")" "$(hex 24)" >"$dir/dispatcher.env"
fi
echo "secrets in $dir"
