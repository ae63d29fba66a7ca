#!/bin/sh
# Writes rabbitmq.conf from RABBITMQ_DEFAULT_USER/RABBITMQ_DEFAULT_PASS (the official image's
# variables), then runs the node in the foreground. `guest` may connect from other hosts
# (loopback_users = none), as in the official image.
#
# On a 4.x server (the installed rabbitmq-server package's major version >= 4: Debian 13's
# 4.0.5) it also denies the deprecated features RabbitMQ 4.3 denies by default, which 4.0 only
# warns about:
#   deprecated_features.permit.transient_nonexcl_queues = false
#       declaring a non-durable, non-exclusive queue closes the connection (541
#       INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated...), as on 4.3;
#   deprecated_features.permit.global_qos = false
#       4.3 refuses basic.qos with global=true; 4.0.5 answers qos-ok, logs an error and
#       ignores the flag (the prefetch applies per consumer), so here it is only seen in the
#       log and in the prefetch.
# TESSERA_RABBITMQ_DENY_DEPRECATED=0 leaves them out (4.0's own defaults: permitted, with a
# warning in the log); =1 is the default. A 3.x server never gets them (it knows no such
# settings and would not start).
set -eu
version=$(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo 0)
version=${version#*:}
deny=${TESSERA_RABBITMQ_DENY_DEPRECATED:-1}
{
  echo 'listeners.tcp.default = 5672'
  echo 'loopback_users = none'
  if [ -n "${RABBITMQ_DEFAULT_USER:-}" ]; then
    echo "default_user = $RABBITMQ_DEFAULT_USER"
    echo "default_pass = ${RABBITMQ_DEFAULT_PASS:?RABBITMQ_DEFAULT_PASS is not set}"
  fi
  if [ "${version%%.*}" -ge 4 ] 2>/dev/null && [ "$deny" = 1 ]; then
    echo 'deprecated_features.permit.transient_nonexcl_queues = false'
    echo 'deprecated_features.permit.global_qos = false'
  fi
} >/etc/rabbitmq/rabbitmq.conf
exec "$@"
