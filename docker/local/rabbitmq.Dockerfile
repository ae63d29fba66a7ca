# A stand-in for the official RabbitMQ image, for machines that cannot pull it (the
# development and CI machines): the rabbitmq-server of BASE_IMAGE's Debian release, so the
# base picks the version. scripts/local-images.sh builds it only when the official image
# cannot be pulled (users get the official one), under a name of its own:
#
#   BASE_IMAGE=tessera-local/debian:trixie-slim     Debian 13, rabbitmq-server 4.0 (Erlang 27)
#     -> tessera-local/rabbitmq:4.0, the stand-in for compose's rabbitmq:4.3 and the
#        test broker of scripts/rabbit4.sh
#   BASE_IMAGE=tessera-local/debian:bookworm-slim   Debian 12, rabbitmq-server 3.10 (Erlang 25)
#     -> a 3.10 broker (nothing builds it now; the Dockerfile still does)
#
# Like the official image: RABBITMQ_DEFAULT_USER/PASS set the first user, data in
# /var/lib/rabbitmq, the node runs in the foreground as `rabbitmq`. On a 4.x server the
# entrypoint also denies the deprecated features RabbitMQ 4.3 denies by default
# (rabbitmq-entrypoint.sh says which, what 4.0 does when they are used, how to permit them).
ARG BASE_IMAGE=debian:trixie-slim
FROM ${BASE_IMAGE}
# No service starts during the package's installation.
RUN printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d \
 && apt-get update \
 && apt-get install -y --no-install-recommends rabbitmq-server \
 && rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* \
 && install -d -o rabbitmq -g rabbitmq /var/lib/rabbitmq /etc/rabbitmq \
 && chown -R rabbitmq:rabbitmq /etc/rabbitmq /var/lib/rabbitmq
COPY rabbitmq-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV HOME=/var/lib/rabbitmq \
    RABBITMQ_LOGS=- \
    PATH=/usr/lib/rabbitmq/bin:/usr/sbin:/usr/bin:/sbin:/bin
USER rabbitmq
EXPOSE 5672
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["rabbitmq-server"]
