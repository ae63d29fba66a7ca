#!/usr/bin/env bash
# Builds and installs libvmaf (Netflix's VMAF library, BSD-2-Clause-Patent) as a static
# library with its standard models compiled in, and its `vmaf` command (the oracle of
# tessera's VMAF test). libvmaf is in no Debian release: its source is taken from the crates
# registry, where the libvmaf-sys crate carries it (libvmaf 2.3.1; only the C source and the
# models are used, not the crate's own GPL-3.0 code), checked against a pinned SHA-256.
# tessera-media's build script finds the library with pkg-config (media/build.rs).
#
#   scripts/build-libvmaf.sh            install into $TESSERA_LIBVMAF_PREFIX (/usr/local) unless
#                                       that version is there already
#   scripts/build-libvmaf.sh --force    build and install again
#   scripts/build-libvmaf.sh --print-prefix
#
# Needs: a C/C++ compiler, meson, ninja-build, nasm, xxd (installed through apt when missing
# and root or sudo is at hand). xxd is what compiles the models in: without it libvmaf would
# build without them, so its absence is an error here. About 15 s on 2 cores, under nice.
#
# Environment:
#   TESSERA_LIBVMAF_PREFIX  where to install (default /usr/local: pkg-config and PATH find it
#                           with no settings; another prefix needs PKG_CONFIG_PATH)
#   TESSERA_CACHE_DIR       where the source tarball is kept (default ~/.cache/tessera)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DEBIAN_FRONTEND=noninteractive LC_ALL=C

log() { printf '[build-libvmaf] %s\n' "$*" >&2; }
die() { printf '[build-libvmaf] error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; }

readonly VMAF_VERSION=2.3.1
readonly CRATE=libvmaf-sys-0.4.4
readonly CRATE_SHA256=8b053ec5f32c6ba5ae9a51d2bbef0abd35e34033ad83c7b331bfec3e04df79a6
readonly CRATE_URL=https://static.crates.io/crates/libvmaf-sys/$CRATE.crate
# Bump when the build below changes in a way the version does not show.
readonly RECIPE_REV=1

prefix=${TESSERA_LIBVMAF_PREFIX:-/usr/local}
cache=${TESSERA_CACHE_DIR:-${HOME:-/root}/.cache/tessera}
force=0
case ${1:-} in
  "") ;;
  --force) force=1 ;;
  --print-prefix) echo "$prefix"; exit 0 ;;
  -h|--help) usage; exit 0 ;;
  *) die "unknown argument '$1' (--force, --print-prefix)" ;;
esac

stamp=$prefix/share/tessera/libvmaf.stamp
want="libvmaf $VMAF_VERSION recipe $RECIPE_REV"
if ((force == 0)) && [[ -f $stamp && $(cat "$stamp") == "$want" && -f $prefix/lib/libvmaf.a && -x $prefix/bin/vmaf ]]; then
  log "libvmaf $VMAF_VERSION is installed in $prefix"
  exit 0
fi

SUDO=()
[[ $(id -u) -eq 0 ]] || SUDO=(sudo)
need=()
for tool in meson:meson ninja:ninja-build nasm:nasm xxd:xxd c++:g++ curl:curl; do
  command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
if ((${#need[@]})); then
  log "apt: installing ${need[*]}"
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
command -v xxd >/dev/null || die "xxd is missing: libvmaf would build without its models"

mkdir -p "$cache/src"
tarball=$cache/src/$CRATE.crate
if [[ ! -f $tarball ]] || ! echo "$CRATE_SHA256  $tarball" | sha256sum -c --quiet 2>/dev/null; then
  log "fetching libvmaf $VMAF_VERSION's source ($CRATE_URL)"
  curl -fsSL --retry 3 --max-time 300 -o "$tarball.part" "$CRATE_URL" || die "cannot download $CRATE_URL"
  echo "$CRATE_SHA256  $tarball.part" | sha256sum -c --quiet \
    || die "$CRATE_URL: SHA-256 is not $CRATE_SHA256"
  mv "$tarball.part" "$tarball"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work" "$CRATE/vmaf/libvmaf" "$CRATE/vmaf/model" "$CRATE/vmaf/LICENSE"
src=$work/$CRATE/vmaf/libvmaf
log "building libvmaf $VMAF_VERSION (static, models built in) for $prefix"
nice -n 10 meson setup "$work/build" "$src" --buildtype release --prefix "$prefix" --libdir lib \
  -Ddefault_library=static -Dbuilt_in_models=true -Denable_tests=false -Denable_docs=false \
  -Denable_float=false >"$work/setup.log" 2>&1 || { cat "$work/setup.log" >&2; die "meson setup failed"; }
grep -q 'Program xxd found: YES' "$work/setup.log" || die "meson did not find xxd: the models would be missing"
nice -n 10 ninja -C "$work/build" >"$work/build.log" 2>&1 || { tail -40 "$work/build.log" >&2; die "ninja failed"; }
"${SUDO[@]}" ninja -C "$work/build" install >/dev/null
"${SUDO[@]}" install -D -m 0644 "$work/$CRATE/vmaf/LICENSE" "$prefix/share/doc/libvmaf/LICENSE"
echo "$want" | "${SUDO[@]}" install -D -m 0644 /dev/stdin "$stamp"
log "installed: $prefix/lib/libvmaf.a, $prefix/bin/vmaf ($("$prefix/bin/vmaf" --version 2>&1 | head -n 1))"
