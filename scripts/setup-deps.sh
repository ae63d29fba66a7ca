#!/usr/bin/env bash
# Installs what tessera needs on Debian 12 (bookworm). Safe to run again: it only
# installs what is missing, so a second run takes a second or two.
#
#   scripts/setup-deps.sh             FFmpeg -dev libraries, ffmpeg/ffprobe CLIs, clang, pkg-config, time,
#                                     libvmaf (built from source into /usr/local: scripts/build-libvmaf.sh)
#   scripts/setup-deps.sh --services  the same, plus the test services: a RabbitMQ broker running at
#                                     127.0.0.1:5672 and the `garage` binary (S3 server for tests)
#
# Runs as root, or through sudo for the apt and broker steps when not root.
# Environment:
#   RABBITMQ_START_TIMEOUT  seconds to wait for the broker to come up (default 120)
#   GARAGE_VERSION          crate version for `cargo install garage` (default 2.5.0, the one the
#                           tests were written against; the config format changed across majors)
set -euo pipefail

readonly APT_PACKAGES=(
  ffmpeg
  libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev
  libavfilter-dev libavdevice-dev
  pkg-config clang libclang-dev
  time
  iproute2 python3-venv
  # The autoscaling replay's scaler reads the rendered manifests (scripts/autoscale-replay.sh).
  python3-yaml
  # The second independent client of the streaming-package tests: hlsdemux/dashdemux (bad),
  # the H.264/HEVC/AAC decoders (libav), and gst-launch (tools).
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-libav
  # promtool, for the alerting rules' checks and unit tests (tests/tests/prometheus_rules.rs);
  # the Prometheus server that comes with it is not left running (quiet_prometheus).
  prometheus
  # Headless Chromium and its WebDriver, for the dashboard's browser test (tests/tests/ui_browser.rs).
  chromium chromium-driver fonts-liberation
  # libfaketime, for the chaos run's clock jump on the dispatcher (scripts/chaos.sh).
  faketime
  # libvmaf's build (scripts/build-libvmaf.sh): in no Debian release, built from source.
  meson ninja-build nasm xxd g++ curl
)

export DEBIAN_FRONTEND=noninteractive
# cargo-installed tools (garage, cargo-nextest) live here; a non-login shell may not have it on PATH.
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"

log() { printf '[setup-deps] %s\n' "$*"; }
die() { printf '[setup-deps] error: %s\n' "$*" >&2; exit 1; }

usage() {
  # The comment block at the top of this file, without the '# '.
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
}

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "not root and sudo is not installed; run this as root"
  SUDO=(sudo)
fi
as_root() { "${SUDO[@]}" "$@"; }

# Prints the packages among "$@" that dpkg does not list as installed.
missing_packages() {
  local p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      printf '%s\n' "$p"
    fi
  done
}

ensure_packages() {
  local missing=()
  mapfile -t missing < <(missing_packages "$@")
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "apt: already installed: $*"
    return 0
  fi
  log "apt: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Debian's prometheus package starts its server where systemd runs; tessera needs only its
# promtool, so a server this run installed is stopped and disabled.
quiet_prometheus() {
  if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
    as_root systemctl disable --now prometheus >/dev/null 2>&1 || true
    log "prometheus: server stopped and disabled (only promtool is used)"
  fi
}

# True when something accepts TCP connections on 127.0.0.1:$1.
port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

rabbit_ready() {
  as_root rabbitmqctl -q status >/dev/null 2>&1 && port_open 5672
}

ensure_rabbitmq() {
  ensure_packages rabbitmq-server
  if rabbit_ready; then
    log "rabbitmq: running at 127.0.0.1:5672"
    return 0
  fi
  if port_open 5672 && ! as_root rabbitmqctl -q status >/dev/null 2>&1; then
    # Something (another broker, another Erlang cookie) already owns the port: use it, don't fight it.
    log "rabbitmq: port 5672 is open but rabbitmqctl cannot reach a node; assuming an external broker"
    return 0
  fi
  if ! as_root rabbitmqctl -q status >/dev/null 2>&1; then
    log "rabbitmq: starting (rabbitmq-server -detached)"
    # -detached returns at once; on Debian the wrapper drops to the rabbitmq user by itself.
    as_root rabbitmq-server -detached
  fi
  local timeout=${RABBITMQ_START_TIMEOUT:-120}
  local deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    # await_startup fails fast while the Erlang node is not up yet, and blocks while it boots.
    if as_root timeout 30 rabbitmqctl -q await_startup >/dev/null 2>&1 && port_open 5672; then
      log "rabbitmq: running at 127.0.0.1:5672 (after $((timeout - (deadline - SECONDS))) s)"
      return 0
    fi
    sleep 2
  done
  log "rabbitmq: last lines of the broker logs:"
  as_root sh -c 'tail -n 30 /var/log/rabbitmq/*.log' 2>/dev/null || true
  die "rabbitmq did not come up on 127.0.0.1:5672 within ${timeout} s"
}

ensure_garage() {
  if command -v garage >/dev/null 2>&1; then
    log "garage: $(command -v garage) ($(garage --version 2>/dev/null | head -n1 || echo 'version unknown'))"
    return 0
  fi
  command -v cargo >/dev/null 2>&1 || die "garage is missing and cargo is not installed to build it"
  local spec=(garage --version "${GARAGE_VERSION:-2.5.0}")
  log "garage: not found; cargo install ${spec[*]} --locked (about 9 minutes on 2 cores)"
  cargo install "${spec[@]}" --locked
  command -v garage >/dev/null 2>&1 || die "cargo install garage finished but garage is not on PATH"
  log "garage: installed at $(command -v garage)"
}

check_rust() {
  if ! command -v cargo >/dev/null 2>&1; then
    log "rust: cargo not found; install a Rust toolchain (rustup, 1.80 or newer) to build tessera"
    return 0
  fi
  local comp
  for comp in fmt clippy; do
    if ! cargo "$comp" --version >/dev/null 2>&1; then
      if command -v rustup >/dev/null 2>&1; then
        log "rust: adding missing component for cargo $comp"
        rustup component add "$([[ $comp == fmt ]] && echo rustfmt || echo clippy)" ||
          log "rust: could not add it; scripts/test.sh needs cargo $comp"
      else
        log "rust: cargo $comp is missing; scripts/test.sh needs it"
      fi
    fi
  done
  if cargo nextest --version >/dev/null 2>&1; then
    log "rust: cargo-nextest present; scripts/test.sh uses it"
  else
    log "rust: cargo-nextest absent (optional); scripts/test.sh falls back to cargo test"
  fi
}

main() {
  local services=0
  while [[ $# -gt 0 ]]; do
    case $1 in
      --services) services=1 ;;
      -h | --help) usage; return 0 ;;
      *) usage >&2; die "unknown argument: $1" ;;
    esac
    shift
  done

  command -v dpkg-query >/dev/null 2>&1 || die "this script supports Debian 12 (apt/dpkg) only"
  local had_prometheus=0
  [[ -z $(missing_packages prometheus) ]] && had_prometheus=1
  ensure_packages "${APT_PACKAGES[@]}"
  ((had_prometheus)) || quiet_prometheus
  # tessera-media links it (media/build.rs): the build needs it, not only the tests.
  bash "$(dirname "${BASH_SOURCE[0]}")/build-libvmaf.sh"
  check_rust
  if ((services)); then
    ensure_rabbitmq
    ensure_garage
  fi
  log "done"
}

main "$@"
