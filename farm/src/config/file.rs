//! Reading a binary's TOML config file, with errors that name the file.
//!
//! Why one reader: the CLI, the dispatcher and the worker each take `--config`/`TESSERA_CONFIG`;
//! reading it in one place gives them the same "no file means defaults" rule and the same
//! errors naming the file (which setting was wrong is the caller's, `layers.rs`).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// A config file that could not be used: which file, and why.
///
/// Why a type: the CLI keeps the cause as an error chain (`anyhow`'s `{:#}` shows
/// "config file F: invalid: …"), the services print one line ([`ConfigFileError::one_line`]).
#[derive(Debug)]
pub enum ConfigFileError {
    /// The file could not be read.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What reading it said.
        cause: std::io::Error,
    },
    /// The file is not valid TOML for this binary (a syntax error, an unknown key, a bad value).
    Invalid {
        /// The file.
        path: PathBuf,
        /// What parsing it said.
        cause: toml::de::Error,
    },
}

impl ConfigFileError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ConfigFileError::Unreadable { path, .. } | ConfigFileError::Invalid { path, .. } => {
                path
            }
        }
    }

    /// "config file F: cause" in one line, as the services report it.
    pub fn one_line(&self) -> String {
        let cause: &dyn fmt::Display = match self {
            ConfigFileError::Unreadable { cause, .. } => cause,
            ConfigFileError::Invalid { cause, .. } => cause,
        };
        format!("config file {}: {cause}", self.path().display())
    }
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            ConfigFileError::Unreadable { .. } => "cannot read",
            ConfigFileError::Invalid { .. } => "invalid",
        };
        write!(f, "config file {}: {what}", self.path().display())
    }
}

impl std::error::Error for ConfigFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigFileError::Unreadable { cause, .. } => Some(cause),
            ConfigFileError::Invalid { cause, .. } => Some(cause),
        }
    }
}

/// Reads a TOML config file into `T`; without a file, `T::default()` (every layer below the
/// file then falls through to its default).
pub fn read_toml_file<T: DeserializeOwned + Default>(
    path: Option<&Path>,
) -> Result<T, ConfigFileError> {
    let Some(path) = path else {
        return Ok(T::default());
    };
    let text = std::fs::read_to_string(path).map_err(|cause| ConfigFileError::Unreadable {
        path: path.to_path_buf(),
        cause,
    })?;
    toml::from_str(&text).map_err(|cause| ConfigFileError::Invalid {
        path: path.to_path_buf(),
        cause,
    })
}

/// Reads a service's TOML config file (its default when no file is given); the error is one
/// line naming the file and the cause.
///
/// Why a wrapper: the services resolve their settings into `Result<_, String>`.
pub fn read_config_file<T: DeserializeOwned + Default>(path: Option<&Path>) -> Result<T, String> {
    read_toml_file(path).map_err(|e| e.one_line())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        workers: Option<u32>,
    }

    #[test]
    fn no_file_is_the_defaults() {
        let f: File = read_toml_file(None).unwrap();
        assert_eq!(f.workers, None);
    }

    #[test]
    fn a_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(&path, "workers = 3\n").unwrap();
        let f: File = read_toml_file(Some(&path)).unwrap();
        assert_eq!(f.workers, Some(3));
    }

    #[test]
    fn errors_name_the_file_and_keep_the_cause() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.toml");
        let e = read_toml_file::<File>(Some(&missing)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("config file {}: cannot read", missing.display())
        );
        assert!(std::error::Error::source(&e).is_some());
        let one = read_config_file::<File>(Some(&missing)).unwrap_err();
        assert!(
            one.starts_with(&format!("config file {}: ", missing.display())),
            "{one}"
        );
        assert!(!one.ends_with("cannot read"), "{one}");

        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "wrokers = 3\n").unwrap();
        let e = read_toml_file::<File>(Some(&bad)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("config file {}: invalid", bad.display())
        );
        assert_eq!(e.path(), bad.as_path());
        let one = read_config_file::<File>(Some(&bad)).unwrap_err();
        assert!(one.contains(&bad.display().to_string()), "{one}");
        assert!(one.contains("wrokers"), "{one}");
    }
}
