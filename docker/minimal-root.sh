#!/bin/sh
# Assembles the root filesystem of tessera's minimal images in DEST from a Debian 12 system
# at SRC that has libc6, libgcc-s1, ca-certificates and tini installed:
#
#   docker/minimal-root.sh SRC DEST
#
# Why: the minimal images run static binaries (FFmpeg linked into tessera-media), which need
# only glibc (and libgcc_s, Rust's unwinder), CA certificates for TLS to S3 and the broker,
# and tini as PID 1. DEST gets exactly those packages' files (less documentation, locales and
# glibc's iconv modules, which nothing here loads; the copyright files stay), the CA bundle, an nsswitch.conf, the users
# root and tessera (uid/gid 10001), /tmp, and the folders the services write to, owned by
# tessera. No shell, no package manager. Used in docker/Dockerfile's minimal-root stage
# (SRC=/) and by scripts/docker-images.sh on an mmdebstrap tree (tessera-local/minimal), so
# both ways give the same files. Needs only sh, dpkg-query, cp and sed.
set -eu
[ $# -eq 2 ] || { echo "usage: minimal-root.sh SRC DEST" >&2; exit 2; }
src=${1%/}
dest=$2
mkdir -p "$dest"

# The packages' files and symlinks, as dpkg lists them; folders come with them (a listed
# folder may be a link on a merged-/usr system: /lib, /lib64, fixed up below).
for pkg in libc6 libgcc-s1 tini; do
  dpkg-query --admindir="$src/var/lib/dpkg" -L "$pkg" || { echo "minimal-root: $pkg is not installed in $src" >&2; exit 1; }
done | sed -e '/^\/usr\/share\/doc/d' -e '/^\/usr\/share\/lintian/d' \
           -e '/^\/usr\/share\/locale/d' -e '/\/gconv\//d' -e '/tini-static/d' -e '/^\/\.$/d' |
while IFS= read -r path; do
  if [ ! -d "$src$path" ] && { [ -L "$src$path" ] || [ -e "$src$path" ]; }; then
    (cd "$src/" && cp -a --parents ".$path" "$dest/")
  fi
done
# Usrmerge: /lib and /lib64 are links into /usr in Debian 12; keep them links.
for link in lib lib64 bin sbin; do
  if [ -L "$src/$link" ] && [ -d "$dest/$link" ] && [ ! -L "$dest/$link" ]; then
    target=$(readlink "$src/$link")
    mkdir -p "$dest/$target"
    cp -a "$dest/$link/." "$dest/$target/"
    rm -rf "${dest:?}/$link"
    ln -s "$target" "$dest/$link"
  fi
done

# Each package's copyright file (where the tree has it; libgcc-s1's folder is a link).
for pkg in libc6 libgcc-s1 tini ca-certificates; do
  if [ -f "$src/usr/share/doc/$pkg/copyright" ]; then
    (cd "$src/" && cp -L --parents "usr/share/doc/$pkg/copyright" "$dest/")
  fi
done

# The CA bundle update-ca-certificates wrote (not a file of the package itself).
mkdir -p "$dest/etc/ssl/certs"
cp -L "$src/etc/ssl/certs/ca-certificates.crt" "$dest/etc/ssl/certs/ca-certificates.crt"

# Users and name lookup; no login shell exists.
printf 'root:x:0:0:root:/root:/nonexistent\ntessera:x:10001:10001:tessera:/home/tessera:/nonexistent\n' \
  >"$dest/etc/passwd"
printf 'root:x:0:\ntessera:x:10001:\n' >"$dest/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$dest/etc/nsswitch.conf"

mkdir -p "$dest/tmp" "$dest/root" "$dest/usr/local/bin" "$dest/home/tessera" \
  "$dest/staging" "$dest/var/lib/tessera" "$dest/data"
chmod 1777 "$dest/tmp"
chmod 0700 "$dest/root"
chown 10001:10001 "$dest/home/tessera" "$dest/staging" "$dest/var/lib/tessera" "$dest/data"
