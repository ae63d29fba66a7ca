# A stand-in for the official `dxflrs/garage` image, for machines that cannot pull it: the
# host's `garage` binary (cargo install garage, the version scripts/setup-deps.sh installs) on
# the locally made debian:bookworm-slim, at the same path as in the official image.
FROM debian:bookworm-slim
COPY garage /garage
ENV RUST_LOG=garage=info
CMD ["/garage", "server"]
