# A stand-in for the official `rabbitmq:3.10` image, for machines that cannot pull it (the
# development and CI machines): Debian 12's rabbitmq-server 3.10 on BASE_IMAGE
# (scripts/docker-images.sh passes the locally made tessera-local/debian:bookworm-slim); it
# builds this only when the official image cannot be pulled; users get the official one.
# Like it: RABBITMQ_DEFAULT_USER/PASS set the first user, data in /var/lib/rabbitmq, the node
# runs in the foreground as `rabbitmq`.
ARG BASE_IMAGE=debian:bookworm-slim
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
