//! `tessera-media`: the sandbox's media child, the only tessera executable that links FFmpeg.
//!
//! The `tessera`, `tessera-worker` and `tessera-dispatcher` processes start it (beside them,
//! or at `$TESSERA_MEDIA_BIN`) to run FFmpeg work on untrusted input under a timeout and
//! resource limits; see `tessera_farm::sandbox`.

fn main() {
    std::process::exit(tessera_farm::sandbox::child_main());
}
