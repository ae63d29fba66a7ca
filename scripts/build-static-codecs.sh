#!/usr/bin/env bash
# Builds the two AV1 libraries Debian 12 ships only as shared objects, SVT-AV1 (libSvtAv1Enc.a:
# the libsvtav1 encoder tessera uses for AV1) and dav1d (libdav1d.a: software AV1 decoding), as
# static PIC archives from Debian's own source packages (`apt-get source`, with Debian's
# patches), into the static FFmpeg's prefix, so FFmpeg's configure finds them there. Called by
# scripts/build-static.sh; see docs/static-build.md.
#
#   scripts/build-static-codecs.sh --print-key             the lines that go into build-static.sh's
#                                                          cache key (versions and build flags)
#   scripts/build-static-codecs.sh --build PREFIX WORKDIR JOBS
#                                                          download into WORKDIR/src, build in
#                                                          WORKDIR/build-codecs, install into PREFIX
#
# Environment: SVTAV1_DEB_VERSION, DAV1D_DEB_VERSION: the Debian source versions to build
# (default: apt's candidate of libsvtav1enc-dev / libdav1d-dev, i.e. the version Debian's
# shared FFmpeg is built against). Needs cmake, meson, ninja-build, nasm and deb-src (the
# caller installs and enables them). Heavy steps run under `nice -n 10`.
set -euo pipefail
export LC_ALL=C

log() { printf '[build-static] %s\n' "$*" >&2; }
die() { printf '[build-static] error: %s\n' "$*" >&2; exit 1; }

# The Debian source version of $1 (source package), from apt's candidate of binary package $2.
deb_source_version() {
  local v
  v=$(apt-cache show --no-all-versions "$2" 2>/dev/null | sed -n 's/^Version: //p' | head -1)
  v=${v%+b[0-9]*}
  [[ -n $v ]] || v=$(apt-cache showsrc "$1" 2>/dev/null | sed -n 's/^Version: //p' | sort -V | tail -1)
  [[ -n $v ]] || die "cannot tell which $1 version to build (is $2 in apt's lists?)"
  printf '%s' "$v"
}

SVT_VERSION=${SVTAV1_DEB_VERSION:-$(deb_source_version svt-av1 libsvtav1enc-dev)}
DAV1D_VERSION=${DAV1D_DEB_VERSION:-$(deb_source_version dav1d libdav1d-dev)}

# Encoder only (the FFmpeg wrapper needs no SVT-AV1 decoder), no apps or tests; nasm instead
# of Debian's yasm (same x86 assembly; nasm is installed for FFmpeg anyway).
svt_flags() {
  printf '%s\n' -G Ninja -DCMAKE_BUILD_TYPE=Release -DREPRODUCIBLE_BUILDS=ON \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DBUILD_ENC=ON -DBUILD_DEC=OFF -DBUILD_APPS=OFF -DBUILD_TESTING=OFF -DENABLE_NASM=ON \
    -DCMAKE_INSTALL_PREFIX="$1" -DCMAKE_INSTALL_LIBDIR=lib
}
# 8- and 16-bit (10/12-bit) decoding with the assembly, as Debian's build; no tools or tests.
dav1d_flags() {
  printf '%s\n' --prefix="$1" --libdir=lib --buildtype=release --default-library=static \
    -Db_staticpic=true -Dbitdepths=8,16 -Denable_asm=true -Denable_tools=false \
    -Denable_tests=false -Denable_examples=false -Denable_docs=false
}

print_key() {
  printf '%s\n' "svt-av1=$SVT_VERSION" "$(svt_flags @PREFIX@)" \
    "dav1d=$DAV1D_VERSION" "$(dav1d_flags @PREFIX@)"
}

# Downloads source package $1=$2 into $3 (once) and unpacks it, with Debian's patches, into $4.
unpack_source() {
  local pkg="$1" ver="$2" src_dir="$3" dest="$4" dsc out
  dsc="$src_dir/${pkg}_${ver#*:}.dsc"
  if [[ ! -f $dsc ]]; then
    log "$pkg: apt-get source $pkg=$ver"
    (cd "$src_dir" && apt-get source -qq --download-only -o APT::Sandbox::User=root \
      "$pkg=$ver") >&2 || die "apt-get source $pkg=$ver failed (deb-src enabled? version still on the mirror?)"
  fi
  rm -rf "$dest"
  out=$(dpkg-source --no-copy -x "$dsc" "$dest" 2>&1) || { printf '%s\n' "$out" >&2; die "dpkg-source -x $dsc failed"; }
}

build_svt() {
  local prefix="$1" work="$2" jobs="$3" t0=$SECONDS flags=()
  local src="$work/build-codecs/svt-av1" bld="$work/build-codecs/svt-av1-build"
  unpack_source svt-av1 "$SVT_VERSION" "$work/src" "$src"
  mapfile -t flags < <(svt_flags "$prefix")
  log "svt-av1 $SVT_VERSION: cmake ${flags[*]}"
  nice -n 10 cmake -S "$src" -B "$bld" "${flags[@]}" >"$work/build-codecs/svt-av1.log" 2>&1 \
    && nice -n 10 ninja -C "$bld" -j"$jobs" install >>"$work/build-codecs/svt-av1.log" 2>&1 \
    || { tail -40 "$work/build-codecs/svt-av1.log" >&2; die "svt-av1 build failed"; }
  [[ -f $prefix/lib/libSvtAv1Enc.a && -f $prefix/lib/pkgconfig/SvtAv1Enc.pc ]] \
    || die "svt-av1 installed no libSvtAv1Enc.a / SvtAv1Enc.pc into $prefix/lib"
  log "svt-av1: built in $((SECONDS - t0)) s"
}

build_dav1d() {
  local prefix="$1" work="$2" jobs="$3" t0=$SECONDS flags=()
  local src="$work/build-codecs/dav1d" bld="$work/build-codecs/dav1d-build"
  unpack_source dav1d "$DAV1D_VERSION" "$work/src" "$src"
  mapfile -t flags < <(dav1d_flags "$prefix")
  log "dav1d $DAV1D_VERSION: meson setup ${flags[*]}"
  nice -n 10 meson setup "$bld" "$src" "${flags[@]}" >"$work/build-codecs/dav1d.log" 2>&1 \
    && nice -n 10 ninja -C "$bld" -j"$jobs" install >>"$work/build-codecs/dav1d.log" 2>&1 \
    || { tail -40 "$work/build-codecs/dav1d.log" >&2; die "dav1d build failed"; }
  [[ -f $prefix/lib/libdav1d.a && -f $prefix/lib/pkgconfig/dav1d.pc ]] \
    || die "dav1d installed no libdav1d.a / dav1d.pc into $prefix/lib"
  log "dav1d: built in $((SECONDS - t0)) s"
}

case "${1:-}" in
  --print-key) print_key ;;
  --build)
    [[ $# -eq 4 ]] || die "usage: $0 --build PREFIX WORKDIR JOBS"
    mkdir -p "$3/src" "$3/build-codecs"
    build_svt "$2" "$3" "$4"
    build_dav1d "$2" "$3" "$4"
    rm -rf "$3/build-codecs"
    ;;
  *) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2 ;;
esac
