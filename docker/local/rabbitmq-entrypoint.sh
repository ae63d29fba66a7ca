#!/bin/sh
# Writes rabbitmq.conf from RABBITMQ_DEFAULT_USER/RABBITMQ_DEFAULT_PASS (the official image's
# variables), then runs the node in the foreground.
set -eu
{
  echo 'listeners.tcp.default = 5672'
  echo 'loopback_users = none'
  if [ -n "${RABBITMQ_DEFAULT_USER:-}" ]; then
    echo "default_user = $RABBITMQ_DEFAULT_USER"
    echo "default_pass = ${RABBITMQ_DEFAULT_PASS:?RABBITMQ_DEFAULT_PASS is not set}"
  fi
} >/etc/rabbitmq/rabbitmq.conf
exec "$@"
