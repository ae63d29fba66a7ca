//! Links libvmaf, the VMAF library the quality measures call (src/ffi/vmaf.rs): a static
//! library that scripts/build-libvmaf.sh builds from source and installs where pkg-config
//! finds it (/usr/local by default; scripts/setup-deps.sh runs it).
//!
//! Why a build script: libvmaf is in no Debian release, so it is not found the way FFmpeg is
//! (ffmpeg-sys-next); a missing one should stop the build with what to run, not fail at link.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let found = pkg_config::Config::new()
        .atleast_version("2.3")
        .statik(true)
        .cargo_metadata(true)
        .probe("libvmaf");
    if let Err(e) = found {
        panic!(
            "libvmaf (>= 2.3) not found by pkg-config: run scripts/build-libvmaf.sh \
             (scripts/setup-deps.sh runs it), or set PKG_CONFIG_PATH to its prefix's \
             lib/pkgconfig. pkg-config said: {e}"
        );
    }
    // Part of libvmaf is C++ (its SVM model); its .pc file does not say so.
    println!("cargo:rustc-link-lib=stdc++");
}
