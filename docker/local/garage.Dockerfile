# A stand-in for the official `dxflrs/garage` image, for machines that cannot pull it: the
# host's `garage` binary (cargo install garage, the version scripts/setup-deps.sh installs) on
# a Debian 12 base (scripts/docker-images.sh passes the locally made
# tessera-local/debian:bookworm-slim), at the same path as in the official image.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
COPY garage /garage
ENV RUST_LOG=garage=info
CMD ["/garage", "server"]
