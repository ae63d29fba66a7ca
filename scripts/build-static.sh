#!/usr/bin/env bash
# Builds self-contained `tessera`, `tessera-media`, `tessera-worker` and `tessera-dispatcher`
# binaries: FFmpeg 5.1 (Debian's source package, a minimal configuration with
# NVENC/NVDEC/CUVID/scale_cuda, libx264, libx265, SVT-AV1, dav1d, zimg) is built as static
# libraries and linked into tessera-media (the sandbox's media child, the only binary that calls
# FFmpeg), so a host needs only glibc and, for the GPU path, the NVIDIA driver (loaded with
# dlopen at run time). SVT-AV1 and dav1d, which Debian ships without static archives, are built
# from their Debian source packages first (scripts/build-static-codecs.sh). See
# docs/static-build.md.
#
#   scripts/build-static.sh                 everything: deps, FFmpeg (unless cached), binaries
#   scripts/build-static.sh --ffmpeg-only   deps and the static FFmpeg prefix only
#   scripts/build-static.sh --print-prefix  prints the FFmpeg prefix this script would use, and exits
#   scripts/build-static.sh --print-key     prints the cache key (Debian version + flags hash), and exits
#
# Options:
#   --ffmpeg-only     stop after the FFmpeg prefix is ready
#   --skip-deps       do not touch apt (packages and deb-src must already be there)
#   --force-ffmpeg    rebuild FFmpeg even when a prefix with the same key exists
#   --keep-build      keep FFmpeg's build tree (default: removed after a successful install)
#   --jobs N          parallel jobs for make and cargo (default: nproc)
#   -h, --help        this text
#
# Environment:
#   TESSERA_CACHE_DIR     where the FFmpeg prefix, sources and build tree live
#                         (default ~/.cache/tessera; outside the clone so `cargo clean` and fresh
#                         clones keep it). The prefix is
#                         $TESSERA_CACHE_DIR/ffmpeg-static/<debian-version>-<flags-hash>/,
#                         linked from target/ffmpeg-static/<debian-version>.
#   FFMPEG_DEB_VERSION    the Debian ffmpeg source version to build (default: the installed
#                         libavcodec-dev's version, so the headers match what tessera is
#                         developed against; else the newest in apt)
#   SVTAV1_DEB_VERSION, DAV1D_DEB_VERSION
#                         the Debian source versions of SVT-AV1 and dav1d (default: apt's
#                         candidate of libsvtav1enc-dev / libdav1d-dev)
#   STATIC_MAX_MIB        the limit for the four binaries in one tar, xz -9 compressed (default 60)
#
# Output: target/static-dist/{tessera,tessera-media,tessera-worker,tessera-dispatcher,
# BUILDINFO.txt,tessera-static-x86_64-linux.tar.xz}.
# The cargo build uses CARGO_TARGET_DIR=target/static (release profile, stripped; override with
# TESSERA_STATIC_TARGET_DIR, as CI does to keep dependencies compiled across clones), so it
# never touches target/debug or target/release. Heavy steps run under `nice -n 10`.
# Needs root (or sudo) for apt: it enables deb-src (/etc/apt/sources.list.d/tessera-deb-src.sources)
# and installs nasm, cmake, meson, ninja, libffmpeg-nvenc-dev and the -dev packages of the static
# libraries.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"
export DEBIAN_FRONTEND=noninteractive
export LC_ALL=C

log() { printf '[build-static] %s\n' "$*" >&2; }
die() { printf '[build-static] error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; }

# Bump when the FFmpeg build changes in a way the flags below do not show.
readonly RECIPE_REV=2
readonly MAX_MIB="${STATIC_MAX_MIB:-60}"
readonly CACHE_DIR="${TESSERA_CACHE_DIR:-${HOME:-/root}/.cache/tessera}"
readonly STATIC_TARGET_DIR="${TESSERA_STATIC_TARGET_DIR:-$ROOT/target/static}"
readonly DIST_DIR="$ROOT/target/static-dist"
# tessera-media (the sandbox's media child, built with tessera-cli) is the only one calling
# FFmpeg; tessera-dispatcher is built here too so a minimal dispatcher image needs only glibc.
readonly BINARIES=(tessera tessera-media tessera-worker tessera-dispatcher)

# apt packages the build needs. The -dev packages whose static archives (.a) are linked in:
# libx264-dev (libx264.a), libx265-dev (libx265.a, needs libnuma.a from libnuma-dev and
# libstdc++.a), libzimg-dev (libzimg.a: the zscale filter of HDR tone mapping), zlib1g-dev
# (libz.a). SVT-AV1 (libsvtav1enc-dev) and dav1d (libdav1d-dev) have no .a in Debian 12: they
# are built from source (cmake, meson, ninja-build) by scripts/build-static-codecs.sh.
readonly APT_PACKAGES=(
  dpkg-dev xz-utils nasm clang pkg-config gcc g++ make cmake meson ninja-build
  libffmpeg-nvenc-dev
  libx264-dev libx265-dev libnuma-dev libzimg-dev zlib1g-dev
)
# Static archives copied into the prefix's lib/ on every run (so the link takes them, not the .so
# next to them in /usr/lib): everything FFmpeg's .pc files name that is not glibc, SVT-AV1 or
# dav1d (those two are installed into the prefix by their own build).
readonly STATIC_LIBS=(x264 x265 numa zimg z stdc++ atomic)
readonly CODECS_SCRIPT="$ROOT/scripts/build-static-codecs.sh"
# -l flags that may stay dynamic: glibc and the compiler runtime.
readonly SYSTEM_LIBS_RE='^(c|m|dl|rt|pthread|gcc|gcc_s|util)$'

# ----------------------------------------------------------------------------------------------
# FFmpeg configure flags. Everything is off (--disable-everything, --disable-autodetect); what
# tessera needs is switched on by name. Keep the lists sorted by kind; they are the cache key.
DECODERS=(
  # video
  h264 hevc vp8 vp9 av1 libdav1d mpeg1video mpeg2video mpeg4 h263 msmpeg4v1 msmpeg4v2
  msmpeg4v3 wmv1 wmv2 wmv3 vc1 mjpeg prores dnxhd theora png apng gif bmp rawvideo v210 ffv1
  huffyuv ffvhuff utvideo dvvideo qtrle
  '*_cuvid'
  # audio
  aac aac_latm mp1 mp1float mp2 mp2float mp3 mp3float ac3 eac3 opus vorbis flac alac 'pcm_*'
  truehd mlp dca wmav1 wmav2 wmapro
  # subtitles (text ones are carried over; the others are probed)
  subrip srt ass ssa movtext webvtt text dvdsub dvbsub pgssub ccaption
)
ENCODERS=(
  libx264 libx265 libsvtav1 h264_nvenc hevc_nvenc aac mjpeg
  movtext subrip srt ass ssa webvtt
)
HWACCELS=('*_nvdec')
MUXERS=(
  mp4 mov ipod ismv matroska matroska_audio webm nut mpegts hls dash mxf avi flv ogg oga opus
  wav image2 image2pipe null srt ass webvtt adts segment mp3 ac3 eac3 flac yuv4mpegpipe ivf
)
DEMUXERS=(
  mov matroska nut mpegts mpegtsraw hls mxf avi flv live_flv ogg wav w64 aiff caf asf dv
  image2 image2pipe png_pipe jpeg_pipe mjpeg
  aac loas mp3 ac3 eac3 flac truehd mlp dts
  h264 hevc m4v mpegvideo mpegps vc1 ivf obu av1 yuv4mpegpipe rawvideo concat
  srt ass webvtt sup vobsub
)
FILTERS=(
  scale format noformat null anull aformat aresample zscale tonemap colorspace
  hwupload hwdownload hwmap hwupload_cuda scale_cuda yadif_cuda
  setpts asetpts settb asettb fps pad crop transpose hflip vflip yadif bwdif setsar setdar
  split asplit trim atrim copy acopy asetnsamples volume pan
)
PROTOCOLS=(file pipe)

join_by() { local IFS="$1"; shift; printf '%s' "$*"; }

configure_flags() {
  local p="$1"
  local flags=(
    --prefix="$p"
    --pkg-config-flags=--static
    --enable-static --disable-shared --enable-pic
    --disable-programs --disable-doc --disable-debug --disable-network
    --disable-avdevice --disable-postproc
    --disable-autodetect --disable-everything
    --enable-gpl
    --enable-pthreads --enable-zlib
    --enable-libx264 --enable-libx265 --enable-libsvtav1 --enable-libdav1d --enable-libzimg
    --enable-ffnvcodec --enable-cuda --enable-cuda-llvm --nvcc=clang
    --enable-nvenc --enable-nvdec --enable-cuvid
    --enable-parsers --enable-bsfs
    --enable-decoder="$(join_by , "${DECODERS[@]}")"
    --enable-encoder="$(join_by , "${ENCODERS[@]}")"
    --enable-hwaccel="$(join_by , "${HWACCELS[@]}")"
    --enable-muxer="$(join_by , "${MUXERS[@]}")"
    --enable-demuxer="$(join_by , "${DEMUXERS[@]}")"
    --enable-filter="$(join_by , "${FILTERS[@]}")"
    --enable-protocol="$(join_by , "${PROTOCOLS[@]}")"
  )
  printf '%s\n' "${flags[@]}"
}

# ----------------------------------------------------------------------------------------------
ffmpeg_only=0 skip_deps=0 force_ffmpeg=0 keep_build=0 print_prefix=0 print_key=0
JOBS=$(nproc)
while (($#)); do
  case "$1" in
    --ffmpeg-only) ffmpeg_only=1 ;;
    --skip-deps) skip_deps=1 ;;
    --force-ffmpeg) force_ffmpeg=1 ;;
    --keep-build) keep_build=1 ;;
    --print-prefix) print_prefix=1 ;;
    --print-key) print_key=1 ;;
    --jobs) [[ $# -ge 2 ]] || die "--jobs needs a number"; JOBS="$2"; shift ;;
    --jobs=*) JOBS="${1#--jobs=}" ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
  shift
done
[[ $JOBS =~ ^[0-9]+$ && $JOBS -ge 1 ]] || die "--jobs: not a positive number: $JOBS"

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 && SUDO=(sudo)
fi
as_root() {
  if [[ $(id -u) -ne 0 && ${#SUDO[@]} -eq 0 ]]; then
    die "needs root for: $* (run as root, or install sudo)"
  fi
  "${SUDO[@]}" "$@"
}

missing_packages() {
  local p
  for p in "$@"; do
    [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true) == *'install ok installed'* ]] \
      || printf '%s\n' "$p"
  done
}

have_ffmpeg_source() {
  local out
  out=$(apt-cache showsrc ffmpeg 2>/dev/null || true)
  [[ $out == *"Package: ffmpeg"* ]]
}

ensure_deb_src() {
  have_ffmpeg_source && return 0
  local codename list=/etc/apt/sources.list.d/tessera-deb-src.sources
  codename=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
  [[ -n $codename ]] || die "cannot tell the Debian release from /etc/os-release"
  log "apt: enabling deb-src for $codename in $list"
  as_root tee "$list" >/dev/null <<EOF
# Added by tessera scripts/build-static.sh: source packages for the static FFmpeg build.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename $codename-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $codename-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  as_root apt-get update -qq
  have_ffmpeg_source || die "apt still has no source package for ffmpeg after enabling deb-src"
}

ensure_deps() {
  command -v dpkg-query >/dev/null 2>&1 || die "this script supports Debian 12 (apt/dpkg) only"
  local missing=()
  mapfile -t missing < <(missing_packages "${APT_PACKAGES[@]}")
  if ((${#missing[@]})); then
    log "apt: installing ${missing[*]}"
    as_root apt-get update -qq
    as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    log "apt: build packages already installed"
  fi
  ensure_deb_src
}

deb_version() {
  if [[ -n ${FFMPEG_DEB_VERSION:-} ]]; then
    printf '%s' "$FFMPEG_DEB_VERSION"
    return
  fi
  local v
  v=$(dpkg-query -W -f='${Version}' libavcodec-dev 2>/dev/null || true)
  if [[ -z $v ]]; then
    v=$(apt-cache showsrc ffmpeg 2>/dev/null | sed -n 's/^Version: //p' | sort -V | tail -1)
  fi
  [[ -n $v ]] || die "cannot tell which ffmpeg version to build (set FFMPEG_DEB_VERSION)"
  printf '%s' "$v"
}

# ----------------------------------------------------------------------------------------------
((skip_deps || print_prefix || print_key)) || ensure_deps

DEB_VERSION=$(deb_version)
# A file-system-safe form of the Debian version: 7:5.1.9-0+deb12u1 -> 5.1.9-0+deb12u1
VERSION_DIR=${DEB_VERSION#*:}
# The key covers what decides the FFmpeg build: version, flags (with a placeholder prefix), recipe.
CODECS_KEY=$(bash "$CODECS_SCRIPT" --print-key) || die "cannot tell the SVT-AV1/dav1d versions"
KEY_INPUT=$(printf '%s\n' "rev=$RECIPE_REV" "deb=$DEB_VERSION" "$(configure_flags @PREFIX@)" "$CODECS_KEY")
FLAGS_HASH=$(printf '%s' "$KEY_INPUT" | sha256sum | cut -c1-12)
PREFIX="$CACHE_DIR/ffmpeg-static/$VERSION_DIR-$FLAGS_HASH"
STAMP="$PREFIX/.tessera-ffmpeg-static"

if ((print_prefix)); then printf '%s\n' "$PREFIX"; exit 0; fi
if ((print_key)); then printf '%s\n' "$VERSION_DIR-$FLAGS_HASH"; exit 0; fi

# Checks that every -l flag of the installed .pc files is a static archive in the prefix or
# a glibc/compiler-runtime library; prints the static link line.
check_prefix() {
  local p="$1" flag name bad=()
  local libs
  libs=$(PKG_CONFIG_LIBDIR="$p/lib/pkgconfig" PKG_CONFIG_PATH='' pkg-config --static --libs \
    libavfilter libavformat libavcodec libswscale libswresample libavutil)
  for flag in $libs; do
    [[ $flag == -l* ]] || continue
    name=${flag#-l}
    [[ -f "$p/lib/lib$name.a" || $name =~ $SYSTEM_LIBS_RE ]] || bad+=("$flag")
  done
  ((${#bad[@]} == 0)) || die "FFmpeg's link line needs libraries with no static archive in $p/lib: ${bad[*]}"
  printf '%s\n' "$libs"
}

build_ffmpeg() {
  local src_dir="$CACHE_DIR/ffmpeg-static/src"
  local build_dir="$CACHE_DIR/ffmpeg-static/build-$VERSION_DIR-$FLAGS_HASH"
  local t0=$SECONDS
  mkdir -p "$src_dir"
  local dsc="$src_dir/ffmpeg_${VERSION_DIR}.dsc"
  if [[ ! -f $dsc ]]; then
    log "ffmpeg: apt-get source ffmpeg=$DEB_VERSION"
    (cd "$src_dir" && apt-get source -qq --download-only -o APT::Sandbox::User=root \
        "ffmpeg=$DEB_VERSION") >&2 \
      || die "apt-get source ffmpeg=$DEB_VERSION failed (is deb-src enabled? is this version still on the mirror? set FFMPEG_DEB_VERSION)"
  else
    log "ffmpeg: source package already downloaded: $dsc"
  fi
  rm -rf "$build_dir"
  log "ffmpeg: unpacking (with Debian's patches) into $build_dir"
  # (apt-get source checked the files' hashes against the signed archive index; dpkg-source's
  # own signature check only warns without debian-keyring, hence the quiet unless it fails.)
  local out
  out=$(dpkg-source --no-copy -x "$dsc" "$build_dir" 2>&1) || { printf '%s\n' "$out" >&2; die "dpkg-source -x failed"; }

  local flags=()
  mapfile -t flags < <(configure_flags "$PREFIX")
  log "ffmpeg: configure ${flags[*]}"
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  local tc=$SECONDS
  bash "$CODECS_SCRIPT" --build "$PREFIX" "$CACHE_DIR/ffmpeg-static" "$JOBS"
  CODECS_SECONDS=$((SECONDS - tc))
  # The prefix's SvtAv1Enc.pc and dav1d.pc (static archives) come before any in /usr.
  (cd "$build_dir" && PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" \
    nice -n 10 ./configure "${flags[@]}" >configure.out 2>&1) || {
    tail -30 "$build_dir/ffbuild/config.log" >&2 || true
    die "ffmpeg configure failed; see $build_dir/ffbuild/config.log"
  }
  # configure silently drops components whose dependencies are missing: insist on the ones
  # the GPU and software paths need.
  local must=(
    CONFIG_H264_NVENC_ENCODER CONFIG_HEVC_NVENC_ENCODER CONFIG_H264_CUVID_DECODER
    CONFIG_H264_NVDEC_HWACCEL CONFIG_HEVC_NVDEC_HWACCEL CONFIG_AV1_NVDEC_HWACCEL
    CONFIG_SCALE_CUDA_FILTER CONFIG_HWUPLOAD_CUDA_FILTER CONFIG_ZSCALE_FILTER
    CONFIG_TONEMAP_FILTER CONFIG_LIBX264_ENCODER CONFIG_LIBX265_ENCODER
    CONFIG_LIBSVTAV1_ENCODER CONFIG_LIBDAV1D_DECODER CONFIG_MJPEG_ENCODER
    CONFIG_AAC_ENCODER CONFIG_MOVTEXT_ENCODER CONFIG_ZLIB
    CONFIG_CUDA_LLVM CONFIG_PTX_COMPRESSION HAVE_PTHREADS HAVE_X86ASM
  )
  local m missing=()
  for m in "${must[@]}"; do
    grep -qh "^#define $m 1" "$build_dir/config.h" "$build_dir/config_components.h" \
      || missing+=("$m")
  done
  ((${#missing[@]} == 0)) || die "ffmpeg configure left out: ${missing[*]} (see $build_dir/configure.out)"
  log "ffmpeg: configured in $((SECONDS - t0)) s; make -j$JOBS (nice 10)"
  local t1=$SECONDS
  nice -n 10 make -C "$build_dir" -j"$JOBS" >"$build_dir/make.out" 2>&1 || {
    tail -40 "$build_dir/make.out" >&2
    die "ffmpeg make failed; see $build_dir/make.out"
  }
  log "ffmpeg: compiled in $((SECONDS - t1)) s; installing into $PREFIX"
  make -C "$build_dir" install >"$build_dir/install.out" 2>&1 || die "ffmpeg make install failed"
  {
    printf 'debian_version=%s\nflags_hash=%s\nbuilt=%s\nbuild_seconds=%s\ncodecs_seconds=%s\n' \
      "$DEB_VERSION" "$FLAGS_HASH" "$(date -u +%FT%TZ)" "$((SECONDS - t0))" "$CODECS_SECONDS"
    printf '%s\n' "$KEY_INPUT"
  } >"$STAMP.tmp"
  mv "$STAMP.tmp" "$STAMP"
  if ((keep_build)); then
    log "ffmpeg: build tree kept at $build_dir"
  else
    rm -rf "$build_dir"
  fi
  log "ffmpeg: done in $((SECONDS - t0)) s"
}

T_START=$SECONDS
if ((force_ffmpeg == 0)) && [[ -f $STAMP ]] && grep -qx "flags_hash=$FLAGS_HASH" "$STAMP"; then
  log "ffmpeg: using cached prefix $PREFIX (key $VERSION_DIR-$FLAGS_HASH)"
  FFMPEG_SECONDS=0
else
  build_ffmpeg
  FFMPEG_SECONDS=$((SECONDS - T_START))
fi
copy_static_libs() {
  local name path
  for name in "${STATIC_LIBS[@]}"; do
    path=$(gcc -print-file-name="lib$name.a")
    [[ $path == /* && -f $path ]] || die "no static archive lib$name.a on this system (apt package missing?)"
    cmp -s "$path" "$PREFIX/lib/lib$name.a" || cp -f "$path" "$PREFIX/lib/"
  done
}
copy_static_libs
mkdir -p "$ROOT/target/ffmpeg-static"
ln -sfn "$PREFIX" "$ROOT/target/ffmpeg-static/$VERSION_DIR"
LINK_LINE=$(check_prefix "$PREFIX")

if ((ffmpeg_only)); then
  log "FFmpeg prefix ready: $PREFIX"
  printf '%s\n' "$PREFIX"
  exit 0
fi

# ----------------------------------------------------------------------------------------------
# Rust: ffmpeg-sys-next with its `static` feature (through the crates' `static` features) asks
# pkg-config with --static; our prefix comes first on PKG_CONFIG_PATH. The pkg-config crate
# links a library statically when its .a sits in a -L directory outside /usr, which is why the
# third-party archives were copied into the prefix.
command -v cargo >/dev/null 2>&1 || die "cargo not found"
# libvmaf: a static library in /usr/local already (scripts/build-libvmaf.sh; a no-op when it is).
bash "$ROOT/scripts/build-libvmaf.sh"
log "cargo: building ${BINARIES[*]} (release, static FFmpeg) into $STATIC_TARGET_DIR, -j$JOBS nice 10"
t_cargo=$SECONDS
PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
CARGO_TARGET_DIR="$STATIC_TARGET_DIR" \
CARGO_PROFILE_RELEASE_DEBUG=0 \
CARGO_PROFILE_RELEASE_STRIP=symbols \
  nice -n 10 cargo build --release --locked -j"$JOBS" \
    -p tessera-cli -p tessera-worker -p tessera-dispatcher \
    --features tessera-cli/static,tessera-worker/static
CARGO_SECONDS=$((SECONDS - t_cargo))
log "cargo: done in $CARGO_SECONDS s"

mkdir -p "$DIST_DIR"
for b in "${BINARIES[@]}"; do
  install -m 0755 "$STATIC_TARGET_DIR/release/$b" "$DIST_DIR/$b"
done

# No FFmpeg (or any non-glibc) library may be needed at run time.
bad_ldd=0
for b in "${BINARIES[@]}"; do
  log "ldd $DIST_DIR/$b:"
  ldd "$DIST_DIR/$b" | sed 's/^/    /' >&2
  if ldd "$DIST_DIR/$b" | awk '{print $1}' \
      | grep -vE '^(linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libutil\.so\.1|libgcc_s\.so\.1)$' \
      | grep -q .; then
    log "  ^ needs a library other than glibc/libgcc_s"
    bad_ldd=1
  fi
done
((bad_ldd == 0)) || die "a binary needs shared libraries beyond glibc"

glibc_needed=$(for b in "${BINARIES[@]}"; do objdump -T "$DIST_DIR/$b"; done \
  | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sort -uV | tail -1)

{
  printf 'tessera static build\n'
  printf 'git: %s\n' "$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
  printf 'commit: %s\n' "$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
  printf 'built: %s on %s\n' "$(date -u +%FT%TZ)" "$(. /etc/os-release && echo "$PRETTY_NAME")"
  printf 'ffmpeg: Debian source package ffmpeg %s (prefix %s)\n' "$DEB_VERSION" "$PREFIX"
  printf 'codecs built from Debian source packages: %s\n' "$(grep -E '^(svt-av1|dav1d)=' <<<"$CODECS_KEY" | tr '\n' ' ')"
  printf 'needs: glibc >= %s (symbol version), NVIDIA driver for the GPU path\n' "${glibc_needed#GLIBC_}"
  printf 'link line: %s\n' "$LINK_LINE"
  printf 'configure:\n'
  configure_flags "$PREFIX" | sed 's/^/  /'
} >"$DIST_DIR/BUILDINFO.txt"

tarball="$DIST_DIR/tessera-static-x86_64-linux.tar.xz"
log "packing $tarball (xz -9)"
tar -C "$DIST_DIR" -cf - "${BINARIES[@]}" BUILDINFO.txt | nice -n 10 xz -9 -T1 >"$tarball.tmp"
mv "$tarball.tmp" "$tarball"

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
total=0
for b in "${BINARIES[@]}"; do
  s=$(stat -c %s "$DIST_DIR/$b")
  total=$((total + s))
  printf '%-16s %10d bytes  %s\n' "$b" "$s" "$(mib "$s")"
done
csize=$(stat -c %s "$tarball")
printf '%-16s %10d bytes  %s\n' "all, raw" "$total" "$(mib "$total")"
printf '%-16s %10d bytes  %s  (tar | xz -9: %s)\n' "all, xz -9" "$csize" "$(mib "$csize")" "${tarball#"$ROOT"/}"
printf 'needs glibc >= %s; timings: ffmpeg %s s (0 = cached), cargo %s s, total %s s\n' \
  "${glibc_needed#GLIBC_}" "$FFMPEG_SECONDS" "$CARGO_SECONDS" "$((SECONDS - T_START))"
if ((csize > MAX_MIB * 1048576)); then
  die "compressed size $(mib "$csize") is over the ${MAX_MIB} MiB limit"
fi
log "ok: $DIST_DIR"
