//! The media child executable: where it is installed, and what its FFmpeg can do.
//!
//! Why its own module: only `tessera-media` links FFmpeg, so the parents find it at start-up
//! (a missing one is an error that names the path) and ask it once for the capabilities they
//! used to read from FFmpeg in-process.

use std::path::PathBuf;
use std::time::Duration;

use tessera_model::capabilities::Capabilities;

use super::{Limits, MediaOp, Sandbox};
use crate::FarmError;

/// The name of the media child's executable.
pub const MEDIA_CHILD_NAME: &str = "tessera-media";

/// The environment variable naming the media child's executable, for installs that keep it
/// somewhere other than beside the tessera binaries.
pub const MEDIA_CHILD_ENV: &str = "TESSERA_MEDIA_BIN";

/// The media child's executable: `$TESSERA_MEDIA_BIN` when set, else `tessera-media` beside
/// the running executable (or one directory up, for cargo's test binaries in `deps/`).
///
/// Why an executable of its own: the parents then link no FFmpeg, so every `tessera`,
/// worker and dispatcher start skips binding its libraries; and a missing child is an error
/// at set-up that names the path, not a failure of the first operation.
pub fn media_child_exe() -> Result<PathBuf, FarmError> {
    if let Some(path) = std::env::var_os(MEDIA_CHILD_ENV) {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Ok(path);
        }
        return Err(FarmError::Io {
            path: path.display().to_string(),
            reason: format!("{MEDIA_CHILD_ENV} names no media child executable here"),
        });
    }
    let exe = std::env::current_exe().map_err(|e| FarmError::Io {
        path: "current executable".into(),
        reason: e.to_string(),
    })?;
    let name = format!("{MEDIA_CHILD_NAME}{}", std::env::consts::EXE_SUFFIX);
    let dir = exe.parent().unwrap_or(std::path::Path::new("."));
    let beside = dir.join(&name);
    // cargo puts test executables in target/<profile>/deps/, one level below the binaries.
    let in_deps = dir.file_name().is_some_and(|n| n == "deps");
    let up = dir.parent().filter(|_| in_deps).map(|up| up.join(&name));
    let candidates = [Some(beside.clone()), up];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
        .ok_or_else(|| FarmError::Io {
            path: beside.display().to_string(),
            reason: format!(
                "the media child executable is missing: install {name} beside {} \
                 (it is built with the tessera-cli package) or set {MEDIA_CHILD_ENV}",
                exe.display()
            ),
        })
}

impl Sandbox {
    /// What the media child's FFmpeg can do: asked once (in a child, within 30 s) and kept by
    /// this sandbox and its clones, since the installed child does not change while the
    /// process runs.
    pub async fn capabilities(&self) -> Result<Capabilities, FarmError> {
        let limits = Limits {
            timeout: Duration::from_secs(30),
            ..Limits::default()
        };
        self.caps
            .get_or_try_init(|| async {
                let (caps, _) = self
                    .run::<Capabilities>(&MediaOp::Capabilities, limits, &mut |_| {})
                    .await?;
                Ok::<_, FarmError>(caps)
            })
            .await
            .cloned()
    }
}
